"""`replay serve` under 200 concurrent clients (benchmark 11 of `run.py`).

A cassette of one SSE stream, recorded with its headers 300 ms after the request and its
first event at `FIRST_AT` (the recorded time to first byte), then `EVENTS` - 1 more events
20 ms apart, is served by `replay serve --repeat` (a real subprocess, 127.0.0.1):

- at speed 1, `CLIENTS` clients (`paced.py`: an `httpx.AsyncClient` each, one event loop)
  POST the recorded request once a second each, staggered, and note when the first body byte
  came: p50 and p99 against the recorded `FIRST_AT`. Beside it, the same clients against
  a local origin (`replay.testing.origin.Origin`, its own process) scripted with the same timing:
  what the clients and the machine add anyway;
- at instant speed, the same clients ask back to back: streams answered per second, against
  the same clients asking uvicorn serving a bare ASGI app that sends the same chunks at once
  (the floor: `replay serve`'s own server stack with nothing to look up; `Origin`, a
  threading server with a listen backlog of 5, refuses 200 clients connecting at once).

    python bench/serve_load.py --seconds 10
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx
import paced  # beside this script
import servers
from paced import Ask, Load

import replay
from replay.adapters.httpx_capture import request_from_httpx
from replay.testing import Script

CLIENTS = 200
EVENTS = 20
HEADERS_AT = 0.300
FIRST_AT = 0.305
GAP = 0.020
PAYLOAD = {"model": "gpt-4.1", "input": "Say hello.", "stream": True}
WARMUP = 2.0


def event(number: int) -> bytes:
    return (
        b"event: response.output_text.delta\n"
        b'data: {"type":"response.output_text.delta","sequence_number":%d,"delta":" hi"}\n\n'
        % number
    )


BODY = b"".join(event(n) for n in range(EVENTS))


def cassette(path: Path) -> None:
    """The served cassette: one interaction, the request the clients send."""
    built = httpx.Client().build_request(
        "POST", "https://api.openai.com/v1/responses", json=PAYLOAD
    )
    chunks = [replay.Chunk(FIRST_AT + GAP * n, event(n)) for n in range(EVENTS)]
    response = replay.Response(
        status=200,
        headers=[("content-type", "text/event-stream; charset=utf-8")],
        headers_at=HEADERS_AT,
        chunks=chunks,
    )
    replay.Cassette([replay.Interaction(request_from_httpx(built), response)]).save(path)


def script() -> Script:
    """The origin's twin of the cassette's stream, with the same timing."""
    first = ((FIRST_AT - HEADERS_AT, event(0)),)
    rest = tuple((GAP, event(n)) for n in range(1, EVENTS))
    return Script(header_delay=HEADERS_AT, chunks=first + rest)


@contextlib.contextmanager
def serve(path: Path, speed: str, log: Path) -> Iterator[str]:
    """`replay serve PATH --repeat --speed SPEED` on a free port; its URL; SIGTERM after."""
    arguments = ["serve", str(path), "--port", "0", "--repeat", "--speed", speed]
    with servers.started(arguments, log) as (process, url):
        yield url
        process.send_signal(signal.SIGTERM)
        process.wait(30)


@dataclass
class Result:
    origin_timed: Load
    served_timed: Load
    origin_instant: Load
    served_instant: Load


def run(seconds: float, instant_seconds: float, clients: int = CLIENTS) -> Result:
    """Speed 1 (origin, then serve), then instant (origin, then serve)."""
    routes = {"/timed/v1/responses": script()}
    with servers.origin(routes) as base, tempfile.TemporaryDirectory(prefix="replay-serve-") as tmp:
        path = Path(tmp) / "served.msgpack"
        cassette(path)

        def timed(url: str) -> Load:
            return paced.drive(Ask(url, PAYLOAD, BODY), clients, seconds, 1.0, WARMUP)

        def instant(url: str) -> Load:
            return paced.drive(Ask(url, PAYLOAD, BODY), clients, instant_seconds, 0.0, 1.0)

        origin_timed = timed(f"{base}/timed/v1/responses")
        with serve(path, "1", Path(tmp) / "serve1.log") as url:
            served_timed = timed(f"{url}/v1/responses")
        with servers.plain_asgi([event(n) for n in range(EVENTS)]) as plain:
            origin_instant = instant(f"{plain}/v1/responses")
        with serve(path, "instant", Path(tmp) / "serve-instant.log") as url:
            served_instant = instant(f"{url}/v1/responses")
    return Result(origin_timed, served_timed, origin_instant, served_instant)


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.1f} ms"


def rows(result: Result) -> list[str]:
    """The results as two Markdown tables."""
    lines = [
        "| speed 1 | answered | TTFB p50 | p99 | max | p99 − recorded | errors |",
        "|---|---:|---:|---:|---:|---:|---:|",
        f"| recorded *(floor)* | | {ms(FIRST_AT)} | {ms(FIRST_AT)} | | | |",
    ]
    for name, load in (
        ("origin, same timing", result.origin_timed),
        ("replay serve", result.served_timed),
    ):
        p50, p99 = load.quantile(0.5, load.first_bytes), load.quantile(0.99, load.first_bytes)
        lines.append(
            f"| {name} | {len(load.first_bytes):,} | {ms(p50)} | {ms(p99)} "
            f"| {ms(max(load.first_bytes))} | {ms(p99 - FIRST_AT)} | {len(load.errors)} |"
        )
    lines += [
        "",
        "| instant | streams answered | per second | × floor | latency p50 | p99 | errors |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    floor = result.origin_instant.rate
    for name, load in (
        ("uvicorn, a bare ASGI app sending the same chunks *(floor)*", result.origin_instant),
        ("replay serve --speed instant", result.served_instant),
    ):
        lines.append(
            f"| {name} | {len(load.latencies):,} | {load.rate:.0f} | {load.rate / floor:.2f} "
            f"| {ms(load.quantile(0.5))} | {ms(load.quantile(0.99))} | {len(load.errors)} |"
        )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    parser.add_argument("--seconds", type=float, default=10.0, help="speed 1, per contender")
    parser.add_argument("--instant-seconds", type=float, default=5.0, help="instant, per contender")
    parser.add_argument("--clients", type=int, default=CLIENTS, help=f"({CLIENTS})")
    args = parser.parse_args(argv)
    result = run(args.seconds, args.instant_seconds, args.clients)
    print("\n".join(rows(result)))
    for load in (result.origin_timed, result.served_timed, result.served_instant):
        for error in load.errors[:5]:
            print(f"error: {error}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
