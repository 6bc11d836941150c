"""Defaults shared by the library and the commands, importable without torch (so `--help` stays fast)."""

# Source tokens per batch: with beam 5 about a thousand decoder rows, enough for efficient
# matrix products, while a batch's slowest sentence holds up few others.
BATCH_TOKENS = 4096

# Length penalties translate-tune tries, and the brevity penalty a choice must reach (BLEU's BP:
# under it, beam search is cutting translations short).
LENGTH_PENALTY_CANDIDATES = (0.0, 0.5, 0.8, 1.0, 1.1, 1.2, 1.3, 1.4, 1.6, 2.0)
# The GNMT length penalties any command or request accepts: 0 ranks by raw log-probability;
# beyond 5 the penalty alone decides, and the floats it divides by lose all precision.
LENGTH_PENALTY_RANGE = (0.0, 5.0)
MIN_BREVITY_PENALTY = 0.95
