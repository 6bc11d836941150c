"""The project's benchmarks in one tool, a mode a question (`scripts/benchmarks/`):

    .venv/bin/python scripts/bench.py train        # training speed and MFU against Marian
    .venv/bin/python scripts/bench.py translate    # decoding: systems, engines, one step, profile
    .venv/bin/python scripts/bench.py serve        # translate-serve under load; fairness probes
    .venv/bin/python scripts/bench.py startup      # how long the commands take to start
    .venv/bin/python scripts/bench.py data         # the data path as the corpus grows
    .venv/bin/python scripts/bench.py report       # the GPU report (make gpu-report, make gpu-docs)

`MODE --help` says what each measures and how."""

import sys

from benchmarks.cli import main

if __name__ == "__main__":
    sys.exit(main())
