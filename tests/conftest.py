import os
from pathlib import Path

import pytest
import torch
from helpers import FIXTURE, REPO, en_de_checkpoint

# A user's own work: `make test` must leave these as it found them.
USER_OUTPUTS = (REPO / "runs", REPO / ".cache")

# Two threads a test process; with pytest-xdist's workers (make test) the cores shared among them.
# The processes the tests start take as many (OMP_NUM_THREADS): more threads than cores, and
# OpenMP's waiting threads spin on cores another worker needs.
WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
THREADS = max(1, min(2, (os.cpu_count() or 1) // WORKERS))
torch.set_num_threads(THREADS)
if WORKERS > 1:
    os.environ.setdefault("OMP_NUM_THREADS", str(THREADS))

# Inductor's cache does not tell kernels built under one ATEN_CPU_CAPABILITY from another's: make
# test-avx2 after make test read the AVX-512 kernels and computed NaN (the other way round, a
# crash). One cache a capability, for every test and every process a test starts.
if "TORCHINDUCTOR_CACHE_DIR" not in os.environ:
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(
        default_cache_dir(), torch.backends.cpu.get_cpu_capability().lower()
    )


@pytest.fixture(scope="session")
def fixture_dir() -> Path:
    return FIXTURE


@pytest.fixture(scope="session")
def checkpoint_path(tmp_path_factory) -> Path:
    """A small random English-German checkpoint (`helpers.en_de_checkpoint`), written once for
    the serving tests (test_serve, test_libretranslate, test_libretranslate_apps), which only
    read it. A module wanting another one defines its own `checkpoint_path` (test_quantize)."""
    return en_de_checkpoint(tmp_path_factory.mktemp("en-de"))


@pytest.fixture(scope="session")
def bundled_corpus_cache(tmp_path_factory) -> Path:
    """One vocabulary and id cache for the tests that train on the bundled corpus: the first
    trains the vocabulary and encodes (seconds), the others reuse them as a second run does."""
    return tmp_path_factory.mktemp("bundled-cache")


def hardware_line() -> str:
    """The hardware the tests run on: the CPU's vector and bfloat16 flags, the kernels
    torch uses (ATEN_CPU_CAPABILITY holds them to AVX2 in make test-avx2) and the precision
    translate-train chooses here (TRANSLATE_CPU_BF16=0 chooses as without bfloat16)."""
    import platform

    from translate.train.precision import BF16_CPU_FLAGS, choose_precision, cpu_flags

    flags = cpu_flags()
    shown = [flag for flag in ("avx2", "avx512f", *sorted(BF16_CPU_FLAGS)) if flag in flags]
    precision, why = choose_precision("cpu")
    return (
        f"cpu: {platform.machine()}, {os.cpu_count()} cores, flags {' '.join(shown) or '-'}; "
        f"torch kernels {torch.backends.cpu.get_cpu_capability()}; "
        f"training precision {precision} ({why})"
    )


def pytest_collection_modifyitems(config, items) -> None:
    """The modules that hold a test marked slow first, each in its own order: pytest-xdist's
    workers then start the longest modules first and finish together."""
    slow = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow)


def user_outputs() -> dict[str, int]:
    """Every path under runs/ and .cache/ with its modification time."""
    return {
        str(path): path.stat().st_mtime_ns
        for root in USER_OUTPUTS
        if root.exists()
        for path in [root, *root.rglob("*")]
    }


def pytest_sessionstart(session) -> None:
    session.config.stash[OUTPUTS_KEY] = user_outputs()
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None and not hasattr(session.config, "workerinput"):
        reporter.write_line(hardware_line())  # first, even with -q: what the run measured on


def pytest_sessionfinish(session, exitstatus) -> None:
    """Fail the run if a test wrote into the repository's runs/ or .cache/."""
    before = session.config.stash.get(OUTPUTS_KEY, None)
    if before is None:
        return
    after = user_outputs()
    touched = sorted(
        path for path in after.keys() | before.keys() if before.get(path) != after.get(path)
    )
    if touched:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        message = (
            f"tests wrote into the repository's runs/ or .cache/ ({len(touched)} paths, e.g. "
            f"{', '.join(touched[:3])}): tests must use temporary directories"
        )
        if reporter is not None:
            reporter.write_line(message, red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


OUTPUTS_KEY = pytest.StashKey[dict]()
