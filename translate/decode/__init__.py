"""From a loaded model to text: greedy and beam search (joinable: batches and requests join a
running search between steps), or CTranslate2's behind the same door (the engine choice; the
checkpoint converted once), the lines-in/lines-out pipeline, search settings and their checks,
length-penalty tuning, the device and allocator set-up of a decoding process.
Imports model/, text/, the ground and ctranslate2 (where chosen); never train/, Lightning or
torchmetrics."""
