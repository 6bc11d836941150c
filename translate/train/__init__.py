"""Training with Lightning: the LightningModule, its loss, the data module with its token batches,
encoded corpora and many-language sampling, run directories, the precision choice, progress lines,
atomic checkpoint writing, batch prediction, and translate-train's LightningCLI.
May import every floor below (decode/ for validation BLEU); nothing below imports it."""
