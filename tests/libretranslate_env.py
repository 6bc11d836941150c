"""LibreTranslate from PyPI in a virtual environment of its own, serving exported Argos packages
(`translate-export --format argos`) offline on 127.0.0.1: how tests/test_argos.py, argos_check.py,
app_requests.py and the load benchmark (`scripts/bench.py serve --modes libretranslate`) install
and start it. docs/export.md shows the same steps as commands.

    .venv/bin/python tests/libretranslate_env.py                   # install into .cache/libretranslate-venv
    .venv/bin/python tests/libretranslate_env.py --serve CKPT --port 5000   # and serve CKPT's packages

Offline means: a private HOME and XDG directories, the package index at a loopback port nothing
listens on, sentences split by the package's own spaCy pipeline (ARGOS_CHUNK_TYPE=SPACY), spaCy's
sentence-model directory created so that spaCy does not try to download it, and in every Python
process started here any connection but to this machine refused (sitecustomize.py below).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from translate.process_group import end_group, run_group, start_group
from translate.serve.launch import free_loopback_port, wait_until_ready

REPO = Path(__file__).resolve().parents[1]

# What pip installs, and all it needs. LibreTranslate 1.9.6 pins its own dependencies (Flask
# 2.2.5, Flask-Limiter 2.6.3, argos-translate-lt 1.12.1, numpy<2) but not spaCy, which Argos's
# offline sentence splitter (ARGOS_CHUNK_TYPE=SPACY) needs. No typer or rich pin: Flask-Limiter
# 2.6.3 requires rich<13 and pip picks a typer that accepts it (on 2026-11-26: rich 12.6.0,
# typer 0.24.2, spaCy 3.8.18); `libretranslate --help`, a server and tests/test_argos.py run on it.
LIBRETRANSLATE = ["libretranslate==1.9.6", "spacy>=3.7"]
DEFAULT_VENV = REPO / ".cache" / "libretranslate-venv"
INSTALL_S = 1200  # pip's downloads
# With one package installed it first fetches its package index, about 1,000 times when that
# fails (docs/export.md): at once at a closed local port, slowly where the network must time out.
START_S = 300
PROXIES = ("http_proxy", "https_proxy", "all_proxy", "no_proxy")

# Loaded by every Python process given PYTHONPATH=<its directory>: a connection to anything but
# this machine raises, so whatever works is shown to need no network.
OFFLINE = """\
import socket

_connect = socket.socket.connect


def _offline(self, address):
    if isinstance(address, tuple) and address[0] not in ("127.0.0.1", "::1", "localhost"):
        raise OSError(f"offline: a connection to {address} was attempted")
    return _connect(self, address)


socket.socket.connect = _offline
"""


class LibreTranslateUnavailable(RuntimeError):
    """LibreTranslate could not be installed; the message is one line."""


def run_bounded(command: list[str], timeout_s: float) -> tuple[int | None, str]:
    """`command`'s exit status (None if it ran past `timeout_s`: then it and every process it
    started are killed) and its stderr."""
    try:
        # What it started ends with it (venv's ensurepip, pip's builds), done or not.
        done = run_group(
            command,
            timeout=max(timeout_s, 0.001),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        return done.returncode, done.stderr
    except subprocess.TimeoutExpired:
        return None, ""


def installed(path: Path) -> bool:
    """Whether `path` is a virtual environment libretranslate_venv installed with LIBRETRANSLATE."""
    marker = path / ".installed"
    return marker.is_file() and marker.read_text() == "\n".join(LIBRETRANSLATE) + "\n"


def libretranslate_venv(path: Path = DEFAULT_VENV, timeout_s: float = INSTALL_S) -> Path:
    """`path`, a virtual environment with LIBRETRANSLATE installed: as it is if it was installed
    with this list, else (re)created from PyPI, in at most `timeout_s` seconds."""
    if installed(path):
        return path
    deadline = time.monotonic() + timeout_s
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path.parent / f".{path.name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # one install at a time
            if installed(path):
                return path
            print(f"installing {' '.join(LIBRETRANSLATE)} into {path}", flush=True)
            for step, command in (
                ("venv", [sys.executable, "-m", "venv", "--clear", str(path)]),
                (
                    "pip",
                    [str(path / "bin" / "python"), "-m", "pip", "install", "--quiet"]
                    + LIBRETRANSLATE,
                ),
            ):
                code, said = run_bounded(command, deadline - time.monotonic())
                if code is None:
                    raise LibreTranslateUnavailable(
                        f"installing into {path} took over {timeout_s:g} s"
                    )
                if code != 0:
                    lines = [line.strip() for line in said.splitlines() if line.strip()]
                    errors = [line for line in lines if line.startswith("ERROR")]
                    last = (errors or lines or ["no output"])[-1]
                    raise LibreTranslateUnavailable(
                        f"{step} exited with {code} installing into {path}: {last}"
                    )
            (path / ".installed").write_text("\n".join(LIBRETRANSLATE) + "\n")
    except OSError as error:
        raise LibreTranslateUnavailable(f"cannot install into {path}: {error}") from None
    return path


def offline_env(home: Path, beam: int, threads: int = 1) -> dict[str, str]:
    """The environment of an Argos or LibreTranslate process: everything under `home` (a fresh
    directory), nothing to reach but this machine, ARGOS_BEAM_SIZE `beam`, `threads` threads."""
    cache = home / "cache"
    # spaCy's sentence model's directory: present, spaCy tries no download of xx_sent_ud_sm.
    (cache / "argos-translate" / "spacy" / "senter" / "model").mkdir(parents=True, exist_ok=True)
    offline = home / "offline"
    offline.mkdir(exist_ok=True)
    (offline / "sitecustomize.py").write_text(OFFLINE)
    return {
        **{key: value for key, value in os.environ.items() if key.lower() not in PROXIES},
        "PYTHONPATH": str(offline),
        "PYTHONDONTWRITEBYTECODE": "1",  # nothing written into the environments it runs from
        "HOME": str(home),
        "XDG_DATA_HOME": str(home / "data"),
        "XDG_CACHE_HOME": str(cache),
        "XDG_CONFIG_HOME": str(home / "config"),
        "ARGOS_PACKAGES_DIR": str(home / "argos-packages"),
        "ARGOS_PACKAGE_INDEX": f"http://127.0.0.1:{free_loopback_port()}/",  # nothing listens
        "ARGOS_CHUNK_TYPE": "SPACY",
        "ARGOS_BEAM_SIZE": str(beam),
        "ARGOS_DEVICE_TYPE": "cpu",
        "ARGOS_INTER_THREADS": "1",
        "ARGOS_INTRA_THREADS": str(threads),
    }


INSTALL = (
    "import sys; from argostranslate import package; "
    "[package.install_from_path(p) for p in sys.argv[1:]]"
)


def install_packages(
    venv: Path, packages: list[Path], workdir: Path, beam: int, threads: int = 1
) -> dict[str, str]:
    """`packages` installed with `venv`'s Argos under `workdir`/home (see offline_env); the
    environment to start LibreTranslate in."""
    env = offline_env(workdir / "home", beam, threads)
    subprocess.run(
        [str(venv / "bin" / "python"), "-c", INSTALL, *map(str, packages)],
        check=True,
        env=env,
        timeout=300,
    )
    return env


def server_argv(venv: Path, port: int) -> list[str]:
    """`libretranslate` of `venv` on 127.0.0.1:`port`, without its web page."""
    return [str(venv / "bin" / "libretranslate"), "--host", "127.0.0.1", "--port", str(port),
            "--disable-web-ui"]  # fmt: skip


def start_libretranslate(
    venv: Path, env: dict[str, str], workdir: Path, start_s: float = START_S
) -> tuple[subprocess.Popen, str]:
    """`libretranslate` of `venv` in `env` (install_packages's) on 127.0.0.1, a free port, its
    log (it logs every request's text) in `workdir`: the server, in a process group of its own
    (stop it with `stop`), and its base URL once /health answers."""
    port = free_loopback_port()
    log = workdir / "libretranslate.log"
    with open(log, "w") as handle:
        server = start_group(
            server_argv(venv, port),
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=handle,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        failure = wait_until_ready(server, f"{base}/health", start_s)
    except BaseException:
        end_group(server)
        raise
    if failure:
        end_group(server)
        tail = log.read_text(errors="replace")[-3000:]
        raise RuntimeError(f"LibreTranslate {failure}; the end of its log {log}:\n{tail}")
    return server, base


def install_checkpoint(
    checkpoint: str, venv: Path, workdir: Path, threads: int = 1
) -> dict[str, str]:
    """`checkpoint` exported into `workdir`/packages as Argos packages (`translate-export
    --format argos`) and installed (install_packages) with the checkpoint's beam: the environment
    to start LibreTranslate in."""
    from translate.decode.loaded_model import load_model

    packages = workdir / "packages"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "translate.cli.export",
            "--checkpoint",
            checkpoint,
            "--format",
            "argos",
            "--output",
            str(packages),
        ],  # fmt: skip
        check=True,
        cwd=REPO,
    )
    beam = load_model(checkpoint, pack=False).search_defaults().beam
    return install_packages(venv, sorted(packages.iterdir()), workdir, beam, threads)


@contextlib.contextmanager
def libretranslate(
    venv: Path, packages: list[Path], workdir: Path, beam: int, threads: int = 1
) -> Iterator[str]:
    """LibreTranslate serving `packages` (install_packages, start_libretranslate): its base URL,
    the server stopped on leaving, however it is left."""
    env = install_packages(venv, packages, workdir, beam, threads)
    server, base = start_libretranslate(venv, env, workdir)
    try:
        yield base
    finally:
        end_group(server)


def call(base: str, path: str, body: dict | None = None, timeout_s: float = 300) -> object:
    """GET `path` of the server at `base` (POST `body` as JSON if given): its JSON answer."""
    request = urllib.request.Request(
        base + path,
        data=None if body is None else json.dumps(body).encode("utf-8"),
        headers={"Content-Type": "application/json"},
    )
    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # no proxy: loopback
    with direct.open(request, timeout=timeout_s) as response:
        return json.loads(response.read().decode("utf-8"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "venv", nargs="?", type=Path, default=DEFAULT_VENV, help=f"default: {DEFAULT_VENV}"
    )
    parser.add_argument(
        "--serve",
        metavar="CKPT",
        help="then become LibreTranslate serving CKPT's Argos packages on 127.0.0.1 until ended",
    )
    parser.add_argument("--port", type=int, default=5000, help="with --serve (default: 5000)")
    parser.add_argument("--threads", type=int, default=1, help="with --serve: CTranslate2's")
    parser.add_argument(
        "--workdir",
        type=Path,
        help="with --serve: packages and HOME (default: a new temporary one)",
    )
    args = parser.parse_args(argv)
    try:
        venv = libretranslate_venv(args.venv)
    except LibreTranslateUnavailable as error:
        raise SystemExit(f"error: {error}") from None
    if not args.serve:
        print(venv)
        return 0
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="libretranslate-"))
    workdir.mkdir(parents=True, exist_ok=True)
    env = install_checkpoint(args.serve, venv, workdir, args.threads)
    command = server_argv(venv, args.port)
    os.execve(command[0], command, env)  # this process becomes the server, ended as it would be


if __name__ == "__main__":
    sys.exit(main())
