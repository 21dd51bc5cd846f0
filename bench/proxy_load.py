"""`replay proxy` under 200 concurrent clients (benchmark 7 of `run.py`).

A local origin (`replay.testing.origin.Origin`, in a process of its own) answers each POST with a
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
import contextlib
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import paced  # beside this script
import servers
from paced import Ask, Load

import replay
from replay.testing import Script

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
class Result:
    """Both runs, and what the proxy's cassette held after it stopped."""

    floor: Load
    proxied: Load
    saved: int
    stop_seconds: float  # from SIGTERM to the proxy's exit (its final save included)
    cassette_bytes: int
    proxy_said: list[str]  # the proxy's stderr but its start line and "recorded ..." lines


def drive(url: str, clients: int = CLIENTS, seconds: float = 30.0) -> Load:
    """Run `clients` paced clients against `url` for `seconds`."""
    return paced.drive(Ask(url, PAYLOAD, EVENT * 3), clients, seconds, PERIOD, WARMUP)


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
    arguments = ["proxy", "--target", target, "-o", str(out), "--port", "0", *options]
    with servers.started(arguments, log) as (process, url):
        running = Proxy(process, url)
        yield running
        began = time.perf_counter()
        process.send_signal(signal.SIGTERM)
        status = process.wait(60)
        running.stopped_in = time.perf_counter() - began
        lines = log.read_text().splitlines()
        running.said = [line for line in lines[1:] if not line.startswith("recorded ")]
        if status != 0:
            raise RuntimeError(f"replay proxy exited with {status}:\n{log.read_text()[-2000:]}")


def run(seconds: float, clients: int = CLIENTS, options: Sequence[str] = ()) -> Result:
    """The floor's run, then the proxy's (`options` added to its command line), each
    `seconds` long with `clients` clients."""
    with (
        servers.origin({"/v1/responses": STREAM}) as url,
        tempfile.TemporaryDirectory(prefix="replay-bench-proxy-") as tmp,
    ):
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
