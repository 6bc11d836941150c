"""Text in and out: corpora and their strict reading, the SentencePiece vocabulary (special ids,
language tags), language names and identification, lines as they arrive.
Imports only the ground (errors, files)."""
