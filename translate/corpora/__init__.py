"""Corpora bundled with the package."""
