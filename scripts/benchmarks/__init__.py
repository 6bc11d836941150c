"""The modes of scripts/bench.py and the harness they share."""
