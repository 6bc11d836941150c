"""translate-serve: the HTTP app, its cross-client batching, the running search requests join,
the model's worker process, the web page. Imports decode/, model/, text/ and the ground; never
train/, Lightning or torchmetrics."""
