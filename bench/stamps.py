"""Recording stamps while the client blocks its event loop (benchmark 5 of `run.py`).

An async client receives the headers of a 40-event stream (one event every 40 ms), then
holds its event loop up for one second, as a CPU-bound step or sync code in async code
would, and then reads on. The origin (a real HTTP server on 127.0.0.1) sends event `n`
`40 ms × (n + 1)` after its headers; the figure is how far each recorded `at` lies from
that moment (`|at − (headers_at + 40 ms × (n + 1))|`), per chunk.

Contenders: the client's own `AsyncHTTPTransport` inside `use_cassette` (replay reads the
body from a worker thread), and a subclass of it that replay cannot read from a thread
(the body is read by a task on the client's loop: the floor of what a loop-bound reader can
do, about the whole second late). And a sync `httpx.Client`, busy for one second with its
first event: it reads its body itself while it keeps up, and replay's worker thread reads
on for it while it is away.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import httpx

import replay
from replay.testing import Origin, Script

GAP = 0.04
EVENTS = 40
BLOCK = 1.0
STREAM = Script(chunks=tuple((GAP, f"data: {n}\n\n".encode()) for n in range(EVENTS)))


class CustomTransport(httpx.AsyncHTTPTransport):
    """A transport of the application's own: replay records it on the client's loop."""


async def _record(url: str, path: Path, transport: Any) -> None:
    with replay.use_cassette(path, record_mode="all"):
        async with (
            httpx.AsyncClient(transport=transport) as client,
            client.stream("GET", url) as response,
        ):
            time.sleep(BLOCK)  # the client holds its event loop up
            async for _ in response.aiter_raw():
                pass


def _record_sync(url: str, path: Path) -> None:
    with (
        replay.use_cassette(path, record_mode="all"),
        httpx.Client() as client,
        client.stream("GET", url) as response,
    ):
        chunks = response.iter_raw()
        next(chunks)  # the first event, read as it arrives
        time.sleep(BLOCK)  # the client is busy with it
        for _ in chunks:
            pass


def stamp_errors(runs: int, runner: str, transport: type[Any] | None) -> list[float]:
    """|recorded at − sent at| of every event of `runs` recordings, in seconds."""
    errors: list[float] = []
    with Origin({"/stream": STREAM}) as origin, tempfile.TemporaryDirectory() as tmp:
        for run in range(runs):
            path = Path(tmp) / f"run{run}.msgpack"
            if runner == "sync":
                _record_sync(origin.url + "/stream", path)
            else:
                made = None if transport is None else transport()
                anyio.run(_record, origin.url + "/stream", path, made, backend=runner)
            [interaction] = replay.Cassette.load(path).interactions
            response = interaction.response
            for n, event in enumerate(response.events()):
                errors.append(abs(event.at - (response.headers_at + GAP * (n + 1))))
    return errors
