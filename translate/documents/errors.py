"""The error a file that cannot be translated as the format it claims raises."""

from __future__ import annotations

from translate.errors import UsageError


class DocumentError(UsageError):
    """A file that cannot be read as its format (truncated, encrypted, too large, hostile); the
    message is one line naming the file and, where known, the part and line."""
