"""Training with Lightning: the LightningModule, its loss, the data module over the prepared data
(vocabulary, encoded corpora) with its token batches, padded batches and many-language sampling,
run directories, the precision choice, progress lines, atomic checkpoint writing, batch
prediction, and translate-train's LightningCLI.
May import every floor below (decode/ for validation BLEU); nothing below imports it."""
