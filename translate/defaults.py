"""Defaults shared by the library and the commands, importable without torch (so `--help` stays fast)."""

# Source tokens per batch: with beam 5 about a thousand decoder rows, enough for efficient
# matrix products, while a batch's slowest sentence holds up few others.
BATCH_TOKENS = 4096
