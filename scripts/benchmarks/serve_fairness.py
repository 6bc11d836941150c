"""translate-serve's fairness to its clients, on a real server over loopback (each part on a
server of its own, started with 2 torch threads):

    .venv/bin/python scripts/benchmarks/serve_fairness.py --checkpoint runs/default/checkpoints/last.ckpt
    .venv/bin/python scripts/benchmarks/serve_fairness.py --checkpoint CKPT --tree OTHER_CHECKOUT

- fairness: a client sending one sentence a request, one after the other, while one maximal
  request runs (`N1`: 256 lines of 1,000 sentences each, the probe that once held everyone;
  `max`: --max-sentences distinct sentences, the most a request may hold); its latencies'
  p50, p99 and max, and the maximal request's status and time;
- cancellation: 50 clients each send 100 sentences at beam 5 and disconnect after 2 s; the model
  process's CPU in each tenth of a second after they left, the time until it is idle (under 10%
  for half a second) and the next request's latency;
- event loop: /health polled every 20 ms (by a process of its own) while eight concurrent maximal
  requests of each kind (1,024 sentences, native and in HTML; about 1 MB as native JSON,
  LibreTranslate JSON, HTML in one tag, a form) are read and translated, for 30 s or until all
  are answered; the polls' p99 and max.

--tree runs the server from another checkout (in its directory, whose `translate` package
`python -m` reads first), to set figures of two versions side by side.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from translate.process_group import end_group, start_group  # noqa: E402
from translate.serve.launch import free_loopback_port, serve_command, wait_until_ready  # noqa: E402

PROBE_TIMEOUT_S = 30.0
BODY_CHARS = 1_000_000


def start_server(
    checkpoint: str, tree: str | None, flags: list[str]
) -> tuple[subprocess.Popen, str]:
    port = free_loopback_port()
    process = start_group(
        serve_command(str(Path(checkpoint).resolve()), port, *flags, threads=2),
        cwd=tree or REPO,  # `python -m` reads the package of its working directory first
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    why = wait_until_ready(process, f"{base}/ready", 120)
    if why is not None:
        end_group(process)
        raise SystemExit(f"translate-serve {why}")
    return process, base


def children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*/children"):
        found += [int(child) for child in task.read_text().split()]
    return found


def model_process(server: subprocess.Popen) -> int:
    """The server's model process: the descendant that is a Python process of its own (the keeper
    starts the server, the server the model process and multiprocessing's resource tracker)."""
    frontier, seen = [server.pid], []
    while frontier:
        pid = frontier.pop()
        for child in children(pid):
            seen.append(child)
            frontier.append(child)
    spawned = [
        pid
        for pid in seen
        if b"multiprocessing" in Path(f"/proc/{pid}/cmdline").read_bytes()
        and b"resource_tracker" not in Path(f"/proc/{pid}/cmdline").read_bytes()
    ]
    if not spawned:
        raise SystemExit("no model process found under the server")
    return spawned[0]


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def fairness(base: str, name: str, body: dict, seconds: float) -> dict:
    """One-sentence requests one after another while `body` is translated."""
    big: dict = {}

    def send_big() -> None:
        started = time.perf_counter()
        try:
            response = httpx.post(f"{base}/translate", json=body, timeout=900)
            big["status"] = response.status_code
        except httpx.HTTPError as fault:
            big["status"] = type(fault).__name__
        big["seconds"] = time.perf_counter() - started

    thread = threading.Thread(target=send_big, daemon=True)
    thread.start()
    time.sleep(1.0)
    latencies, timeouts, n = [], 0, 0
    deadline = time.monotonic() + seconds
    with httpx.Client(timeout=PROBE_TIMEOUT_S) as client:
        while time.monotonic() < deadline:
            n += 1
            started = time.perf_counter()
            try:
                response = client.post(
                    f"{base}/translate", json={"text": [f"Click the button number {n}."]}
                )
                response.raise_for_status()
                latencies.append(time.perf_counter() - started)
            except httpx.HTTPError:
                timeouts += 1
                latencies.append(PROBE_TIMEOUT_S)
    thread.join(timeout=5)  # a request still running then ends with the server
    return {
        "probe": name,
        "big_status": big.get("status", "still running"),
        "big_seconds": round(big["seconds"], 2) if "seconds" in big else None,
        "requests": len(latencies),
        "failed_or_timed_out": timeouts,
        "p50_s": round(statistics.median(latencies), 3),
        "p99_s": round(percentile(latencies, 0.99), 3),
        "max_s": round(max(latencies), 3),
    }


def cancellation(base: str, model_pid: int, clients: int = 50) -> dict:
    """`clients` requests of 100 sentences, each client gone after 2 s; the model's CPU after."""

    def leave(index: int) -> None:
        lines = [f"Select the cells {index} {n} that you want to copy now." for n in range(100)]
        try:
            httpx.post(f"{base}/translate", json={"text": lines, "beam": 5}, timeout=2.0)
        except httpx.HTTPError:
            pass  # gone, as planned

    threads = [threading.Thread(target=leave, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    left = time.perf_counter()
    windows, idle_after, quiet = [], None, 0
    last = cpu_seconds(model_pid)
    while time.perf_counter() - left < 10:
        time.sleep(0.1)
        now = cpu_seconds(model_pid)
        share = (now - last) / 0.1
        last = now
        windows.append(round(share, 2))
        quiet = quiet + 1 if share < 0.1 else 0
        if quiet == 5 and idle_after is None:
            idle_after = time.perf_counter() - left - 0.5
            break
    started = time.perf_counter()
    httpx.post(f"{base}/translate", json={"text": ["Click OK."]}, timeout=120)
    return {
        "clients": clients,
        "idle_after_s": None if idle_after is None else round(idle_after, 2),
        "cpu_share_first_second": windows[:10],
        "next_request_s": round(time.perf_counter() - started, 3),
    }


def maximal_bodies() -> dict[str, dict]:
    """Requests at the limits, as each API and format takes them: the most sentences a request
    may hold (1,024 short lines), and about 1 MB of text (--max-body-bytes) as each API and
    format takes it."""
    line = ("Select the cells that you want to copy and paste them " * 18)[:990]
    lines = [line] * (BODY_CHARS // 1000)
    text = "\n".join(lines)
    call = {"source": "en", "target": "de"}
    return {
        "native, 1,024 sentences": {
            "json": {"text": [f"Select the cells {n} that you want to copy." for n in range(1024)]}
        },
        "HTML, 1,024 sentences": {
            "json": {
                "q": "".join(
                    f"<p>Select the cells {n} that you want to copy.</p>" for n in range(1024)
                ),
                "format": "html",
                **call,
            }
        },
        "native, 1 MB": {"json": {"text": lines}},
        "LibreTranslate, 1 MB": {"json": {"q": text, **call}},
        "HTML in one tag, 1 MB": {"json": {"q": f"<p>{text}</p>", "format": "html", **call}},
        "form, 1 MB": {"data": {"q": text, **call}},
    }


def poll_health(base: str, done, results) -> None:
    """/health every 20 ms until `done` is set; the latencies to `results`. Run in a process of
    its own, so that the clients' work (encoding a megabyte) never delays a poll."""
    polls = []
    with httpx.Client(timeout=30) as client:
        while not done.is_set():
            started = time.perf_counter()
            client.get(f"{base}/health")
            polls.append(time.perf_counter() - started)
            time.sleep(0.02)
    results.send(polls)


def health_under(base: str, send: dict, window_s: float) -> dict:
    """/health polled every 20 ms while eight clients send `send` at once, for `window_s` or
    until all are answered."""
    statuses = []

    def post() -> None:
        try:
            statuses.append(httpx.post(f"{base}/translate", timeout=600, **send).status_code)
        except httpx.HTTPError as fault:
            statuses.append(type(fault).__name__)

    context = multiprocessing.get_context("spawn")
    done, (results, sent) = context.Event(), context.Pipe(duplex=False)
    poller = context.Process(target=poll_health, args=(base, done, sent))
    poller.start()
    time.sleep(1.0)  # the poller's imports
    senders = [threading.Thread(target=post, daemon=True) for _ in range(8)]
    for sender in senders:
        sender.start()
    deadline = time.monotonic() + window_s
    for sender in senders:
        sender.join(max(0.0, deadline - time.monotonic()))
    done.set()
    polls = results.recv()
    poller.join()
    return {
        "answered": sorted(map(str, statuses)),
        "health_polls": len(polls),
        "health_p99_s": round(percentile(polls, 0.99), 3),
        "health_max_s": round(max(polls), 3),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--tree", default=None, help="serve from this checkout instead")
    parser.add_argument("--seconds", type=float, default=20.0, help="fairness probes a case")
    parser.add_argument("--parts", default="fairness,cancellation,event-loop")
    parser.add_argument("--output", default=None, help="also write the results as JSON here")
    args = parser.parse_args(argv)
    parts = args.parts.split(",")
    results: dict = {"tree": args.tree or str(REPO), "checkpoint": args.checkpoint}
    n1 = {"text": [("Ok. " * 1000)[:3999]] * 256}
    most = {"text": [f"Select the cells {n} that you want to copy." for n in range(1024)]}
    if "fairness" in parts:
        results["fairness"] = []
        for name, body in (("N1", n1), ("max", most)):
            process, base = start_server(args.checkpoint, args.tree, [])
            try:
                results["fairness"].append(fairness(base, name, body, args.seconds))
            finally:
                end_group(process)
            print(json.dumps(results["fairness"][-1]), flush=True)
    if "cancellation" in parts:
        process, base = start_server(args.checkpoint, args.tree, [])
        try:
            results["cancellation"] = cancellation(base, model_process(process))
        finally:
            end_group(process)
        print(json.dumps(results["cancellation"]), flush=True)
    if "event-loop" in parts:
        results["event_loop"] = []
        for kind, send in maximal_bodies().items():
            process, base = start_server(args.checkpoint, args.tree, [])
            try:
                results["event_loop"].append({"kind": kind, **health_under(base, send, 30.0)})
            finally:
                end_group(process)
            print(json.dumps(results["event_loop"][-1]), flush=True)
    if args.output:
        Path(args.output).write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
