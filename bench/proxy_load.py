"""`replay proxy` under 200 concurrent clients (benchmark 7 of `run.py`).

A local origin (`replay._origin.Origin`, in a process of its own) answers each POST with a
three-event SSE stream that takes 20 ms (events at 0, 10 and 20 ms after the headers).
200 clients, each an `httpx.AsyncClient` of its own on one event loop, send one request
every `PERIOD` seconds each (staggered, so the load is even), read the whole stream, and
note how long it took. A client whose answer came late starts its next request at once
(no catch-up burst): a proxy that slows down shows as fewer requests per second. The
first `WARMUP` seconds, when the connections are opened, are not counted.

The clients are paced because on a small machine they and the proxy would otherwise
saturate the CPUs: unpaced, 200 clients against a 20 ms origin ask for 10,000 requests a
second, and the latency then measures the CPU's queue, not the proxy. 200 requests a
second keep both well inside two cores (the clients take about 2 ms of CPU a request,
the proxy about 3).

The same clients run twice, for the same time: straight at the origin (the floor: what the
origin, the clients and the machine cost) and through `replay proxy`, a real subprocess
(`python -m replay.cli proxy`) recording to a temporary cassette. Figures: requests per
second, second by second (the last third of the run against the first: flat is 1.0), the
latency p50 / p99 of each, and, after the proxy's graceful stop (SIGTERM), how many of the
interactions the clients saw answered the cassette holds.

    python bench/proxy_load.py                          # 30 s per contender
    python bench/proxy_load.py --seconds 5
    python bench/proxy_load.py --proxy-option=--save-interval=0.1
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing
import re
import signal
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path

import httpx

import replay
from replay._origin import Origin, Script

CLIENTS = 200
PERIOD = 1.0  # seconds between one client's requests: 200 requests/s offered in all
EVENT = (
    b"event: response.output_text.delta\n"
    b'data: {"type":"response.output_text.delta","delta":" token"}\n\n'
)
STREAM = Script(chunks=((0.0, EVENT), (0.01, EVENT), (0.01, EVENT)))
WARMUP = 2.0  # seconds of requests not counted: the connections are opened then
PAYLOAD = {"model": "gpt-4.1", "input": "Say hello.", "stream": True}


@dataclass
class Load:
    """What the clients saw in one run."""

    seconds: float
    latencies: list[float] = field(default_factory=list)
    done_at: list[float] = field(default_factory=list)  # seconds since the run began
    errors: list[str] = field(default_factory=list)
    answered: int = 0  # requests answered in full, warm-up included

    @property
    def per_second(self) -> list[int]:
        """Requests finished in each whole second of the run."""
        counts = [0] * int(self.seconds)
        for at in self.done_at:
            if int(at) < len(counts):
                counts[int(at)] += 1
        return counts

    @property
    def flatness(self) -> float:
        """Requests per second in the last third of the run over those in the first."""
        counts = self.per_second
        third = max(1, len(counts) // 3)
        return statistics.mean(counts[-third:]) / max(1e-9, statistics.mean(counts[:third]))

    def quantile(self, q: float) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


@dataclass
class Result:
    """Both runs, and what the proxy's cassette held after it stopped."""

    floor: Load
    proxied: Load
    saved: int
    stop_seconds: float  # from SIGTERM to the proxy's exit (its final save included)
    cassette_bytes: int
    proxy_said: list[str]  # the proxy's stderr but its start line and "recorded ..." lines


async def _ask(client: httpx.AsyncClient, url: str) -> str | None:
    """Send one request and read its whole answer; what went wrong, if anything."""
    try:
        async with client.stream("POST", url, json=PAYLOAD) as response:
            body = await response.aread()
    except httpx.HTTPError as error:
        return f"{type(error).__name__}: {error}"
    if response.status_code != 200 or body != EVENT * 3:
        return f"status {response.status_code}, {len(body)} bytes"
    return None


async def _client(
    client: httpx.AsyncClient, url: str, first: float, load: Load, began: float, until: float
) -> None:
    start = began - WARMUP + first
    while start < until:
        await asyncio.sleep(max(0.0, start - time.perf_counter()))
        sent = time.perf_counter()
        error = await _ask(client, url)
        done = time.perf_counter()
        if error is not None:
            load.errors.append(error)
        else:
            load.answered += 1
            if sent >= began:  # not a warm-up request
                load.latencies.append(done - sent)
                load.done_at.append(done - began)
        start = max(start + PERIOD, time.perf_counter())


async def _drive(url: str, clients: int, seconds: float) -> Load:
    load = Load(seconds)
    tls = ssl.create_default_context()  # one for all: each client making its own takes long
    async with contextlib.AsyncExitStack() as stack:
        made = [
            await stack.enter_async_context(httpx.AsyncClient(timeout=30.0, verify=tls))
            for _ in range(clients)
        ]
        began = time.perf_counter() + WARMUP
        until = began + seconds
        await asyncio.gather(
            *(
                _client(client, url, PERIOD * n / clients, load, began, until)
                for n, client in enumerate(made)
            )
        )
    return load


def drive(url: str, clients: int = CLIENTS, seconds: float = 30.0) -> Load:
    """Run `clients` paced clients against `url` for `seconds`."""
    return asyncio.run(_drive(url, clients, seconds))


def _serve_origin(pipe: Connection) -> None:
    """The origin's process: sends its URL, then serves until terminated."""
    with Origin({"/v1/responses": STREAM}) as origin:
        pipe.send(origin.url)
        threading.Event().wait()


@contextlib.contextmanager
def origin() -> Iterator[str]:
    """The origin, in a process of its own (no GIL shared with the clients); its URL."""
    context = multiprocessing.get_context("spawn")
    receiving, sending = context.Pipe(duplex=False)
    process = context.Process(target=_serve_origin, args=(sending,), daemon=True)
    process.start()
    sending.close()  # the child's copy stays open: its death ends `recv` with EOFError
    try:
        yield receiving.recv()
    finally:
        process.terminate()
        process.join(10)


@dataclass
class Proxy:
    """A running `replay proxy` subprocess."""

    process: subprocess.Popen[bytes]
    url: str
    stopped_in: float = 0.0
    said: list[str] = field(default_factory=list)  # its stderr but its start and "recorded"


@contextlib.contextmanager
def proxy(target: str, out: Path, log: Path, *options: str) -> Iterator[Proxy]:
    """`replay proxy --target TARGET -o OUT` on a free port, its stderr in `log`; stopped
    with SIGTERM on leaving (how long that took is noted on the `Proxy`)."""
    command = [sys.executable, "-m", "replay.cli", "proxy", "--target", target]
    with log.open("wb") as stderr:
        process = subprocess.Popen(
            [*command, "-o", str(out), "--port", "0", *options],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    try:
        deadline = time.monotonic() + 20
        while not (found := re.search(r"http://127\.0\.0\.1:\d+", log.read_text())):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"replay proxy did not start:\n{log.read_text()}")
            time.sleep(0.05)
        running = Proxy(process, found[0])
        yield running
        began = time.perf_counter()
        process.send_signal(signal.SIGTERM)
        status = process.wait(60)
        running.stopped_in = time.perf_counter() - began
        lines = log.read_text().splitlines()
        running.said = [line for line in lines[1:] if not line.startswith("recorded ")]
        if status != 0:
            raise RuntimeError(f"replay proxy exited with {status}:\n{log.read_text()[-2000:]}")
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def run(seconds: float, clients: int = CLIENTS, options: Sequence[str] = ()) -> Result:
    """The floor's run, then the proxy's (`options` added to its command line), each
    `seconds` long with `clients` clients."""
    with origin() as url, tempfile.TemporaryDirectory(prefix="replay-bench-proxy-") as tmp:
        floor = drive(f"{url}/v1/responses", clients, seconds)
        out = Path(tmp) / "proxied.msgpack"
        with proxy(url, out, Path(tmp) / "proxy.log", *options) as running:
            proxied = drive(f"{running.url}/v1/responses", clients, seconds)
        saved = len(replay.Cassette.load(out).interactions)
        size = out.stat().st_size
        return Result(floor, proxied, saved, running.stopped_in, size, running.said)


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.1f} ms"


def rows(result: Result) -> list[str]:
    """The results as a Markdown table, one row per contender."""
    lines = [
        "| contender | requests | per second: first third → last third | flat | p50 | p99 "
        "| max | errors |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, load in (
        ("origin, direct *(floor)*", result.floor),
        ("replay proxy", result.proxied),
    ):
        counts = load.per_second
        third = max(1, len(counts) // 3)
        lines.append(
            f"| {name} | {len(load.latencies):,} | {statistics.mean(counts[:third]):.0f} → "
            f"{statistics.mean(counts[-third:]):.0f} | {load.flatness:.2f} "
            f"| {ms(load.quantile(0.5))} | {ms(load.quantile(0.99))} "
            f"| {ms(max(load.latencies))} | {len(load.errors)} |"
        )
    return lines


def summary(result: Result) -> list[str]:
    """What happened to the recording: saved, lost, how long the stop took."""
    answered = result.proxied.answered
    return [
        f"After SIGTERM the proxy stopped in {ms(result.stop_seconds)} (final save included); "
        f"its cassette holds {result.saved:,} interactions "
        f"({result.cassette_bytes / 1e6:.1f} MB) for the {answered:,} the clients saw "
        f"answered, warm-up included (lost: {max(0, answered - result.saved):,}).",
        "",
        "Requests per second, second by second, through the proxy: "
        + ", ".join(str(n) for n in result.proxied.per_second)
        + ".",
        "",
        "What else the proxy said on stderr: "
        + ("; ".join(f"`{line}`" for line in result.proxy_said[:5]) or "nothing")
        + ".",
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    parser.add_argument("--seconds", type=float, default=30.0, help="per contender (30)")
    parser.add_argument("--clients", type=int, default=CLIENTS, help=f"({CLIENTS})")
    parser.add_argument(
        "--proxy-option",
        action="append",
        default=[],
        metavar="ARG",
        help="an argument added to the proxy's command line (repeatable)",
    )
    args = parser.parse_args(argv)
    result = run(args.seconds, args.clients, args.proxy_option)
    print("\n".join([*rows(result), "", *summary(result)]))
    for load in (result.floor, result.proxied):
        for error in load.errors[:5]:
            print(f"error: {error}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
