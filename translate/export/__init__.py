"""Checkpoints written in other toolkits' formats: Hugging Face transformers and CTranslate2.
Imports model/, text/ and the ground."""
