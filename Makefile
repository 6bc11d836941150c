# Two commands on a fresh machine: `make train` and `make test`.
# On a GPU cluster, install the CUDA build of torch instead: make train TORCH=torch CONFIG=configs/base.yaml
#   PRECISION=32-true|bf16-mixed|16-mixed  overrides the precision chosen for the hardware
#   RUN_DIR=DIR                            where logs and checkpoints go (default runs/CONFIG-NAME)
#   TRAIN_ARGS="--data.corpus_dir ..."     any other translate-train setting

PYTHON ?= python3
VENV ?= .venv
TORCH ?= torch==2.13.0
CONFIG ?= configs/default.yaml
RUN_DIR ?= runs/$(basename $(notdir $(CONFIG)))
CHECKPOINT ?= $(RUN_DIR)/checkpoints/last.ckpt
PRECISION ?=
TRAIN_ARGS ?=
BIN ?= $(VENV)/bin
STAMP := $(VENV)/.installed
CORPUS := translate/corpora/libreoffice_help_en_de/train.en.gz

.PHONY: install corpus train test test-fast test-avx2 lint translate eval clean tying-study distant-study gpu-report gpu-docs

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet "$(TORCH)"
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

# The processed corpus is committed; this rebuilds it from Debian's packages if it is missing.
$(CORPUS):
	$(BIN)/python scripts/build_corpus.py

# make corpus LANGS="de fr ja zh-CN ru ko": a multi-way corpus of English and those languages
# from Debian's libreoffice-help-* packages, built into MULTIWAY (7-15 s a language).
LANGS ?=
MULTIWAY ?= data/libreoffice_help
corpus: install $(CORPUS)
	$(if $(LANGS),$(BIN)/python scripts/build_corpus.py --langs $(LANGS) --out $(MULTIWAY))

train: corpus
	$(BIN)/translate-train fit --config $(CONFIG) --run_dir $(RUN_DIR) \
		$(if $(PRECISION),--trainer.precision $(PRECISION)) $(TRAIN_ARGS)
	$(BIN)/translate-eval --checkpoint $(CHECKPOINT) --output $(RUN_DIR)/test.hyp
	printf '%s\n' "Click the OK button to close the dialog." \
		"Select the cells that you want to copy." \
		"This function is not available in Basic." \
		| $(BIN)/translate-cli --checkpoint $(CHECKPOINT) --quiet

# Every test. `make test-fast` leaves out the slowest (marked slow), for a quick check while working.
# The modules run in worker processes, one a core up to four (pytest-xdist); TEST_WORKERS= runs
# them in this one process.
TEST_WORKERS ?= -n auto --maxprocesses 4 --dist loadscope
test: install
	$(BIN)/python -m pytest -q $(TEST_WORKERS)

test-fast: install
	$(BIN)/python -m pytest -q -m "not slow" $(TEST_WORKERS)

# ruff (lint and format, as configured in pyproject.toml), and the floors of translate/ as import
# contracts (inference never imports the training stack, no package imports one above it, no cycles).
lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

# The numerical tests and the slowest modules once more as an AVX2-only CPU without bfloat16 runs
# them (most AMD EPYC, many Intel servers and laptops): the kernels held to AVX2, and precision
# chosen as without bfloat16 instructions (TRANSLATE_CPU_BF16=0: float32 where translate-train and
# the GPU report's dry run would otherwise take bf16). Tolerances come from the dtype, so they
# hold on either (.ci/run runs this after make test).
AVX2 := ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2 CT2_FORCE_CPU_ISA=AVX2 TRANSLATE_CPU_BF16=0
test-avx2: install
	$(AVX2) $(BIN)/python -m pytest -q -m "numerical or slow" $(TEST_WORKERS)

# The GPU figures in one command (scripts/bench.py report), on a CUDA machine after `make install
# TORCH=torch`: each step under its own time cap, into runs/gpu-report/ (report.json, report.md,
# plots); `make gpu-docs` then fills the docs' GPU sections from it. DRY_RUN=1: every step at toy size on the CPU,
# into runs/gpu-report-dry-run/.
# GPU_REPORT_ARGS="--steps converge,serve" runs only those (--list names them).
DRY_RUN ?=
GPU_REPORT_ARGS ?=
REPORT ?= runs/gpu-report/report.json
gpu-report: install
	$(BIN)/python scripts/bench.py report $(if $(DRY_RUN),--dry-run) $(GPU_REPORT_ARGS)

gpu-docs: install
	$(BIN)/python scripts/bench.py report --docs --report $(REPORT)

translate: install
	$(BIN)/translate-cli --checkpoint $(CHECKPOINT)

eval: install
	$(BIN)/translate-eval --checkpoint $(CHECKPOINT)

# Every tie mode and sharing variant trained alike, scored and compared (1 to 1.5 hours on 2
# CPU cores); results under runs/tying-study/.  On a GPU: make tying-study STUDY_ARGS="--scale gpu"
tying-study: corpus
	$(BIN)/python scripts/studies/tying_study.py $(STUDY_ARGS)

# Three-way tying into a close, a medium and two distant languages (de, ru, ja, zh-CN), every
# cell on 2 seeds, plus a multilingual model: a few hours on 2 CPU cores; runs/distant-study/.
distant-study: install
	$(BIN)/python scripts/studies/distant_study.py $(STUDY_ARGS)

clean:
	rm -rf runs .cache
