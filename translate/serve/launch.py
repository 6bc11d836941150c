"""translate-serve (or another HTTP server) as a child process: a free loopback port to give it,
and a wait until it answers, for the tests and the load benchmark, which need a real server."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request


def free_loopback_port() -> int:
    """A port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def serve_command(checkpoint: str, port: int, *flags: str, threads: int = 1) -> list[str]:
    """translate-serve's command line: `checkpoint` served on 127.0.0.1:`port` with `threads`
    torch threads, and `flags`."""
    return [
        sys.executable, "-m", "translate.cli.serve", "--checkpoint", str(checkpoint),
        "--port", str(port), "--threads", str(threads), *flags,
    ]  # fmt: skip


def wait_until_ready(process: subprocess.Popen, url: str, seconds: float) -> str | None:
    """None once GET `url` answers 200; else why not: the process exited, or `seconds` passed."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=1) as response:
                if response.status == 200:
                    return None
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass  # not listening yet, or not ready (503)
        if process.poll() is not None:
            return "exited before it was ready"
        time.sleep(0.1)
    return f"was not ready after {seconds:g} s"
