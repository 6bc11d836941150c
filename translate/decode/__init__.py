"""From a loaded model to text: greedy and beam search (joinable: batches and requests join a
running search between steps), the lines-in/lines-out pipeline, search settings and their checks,
length-penalty tuning, the device and allocator set-up of a decoding process.
Imports model/, text/ and the ground; never train/, Lightning or torchmetrics."""
