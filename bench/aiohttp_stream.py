"""A 10,000-chunk SSE stream read through aiohttp (benchmark 6 of `run.py`).

The same chunks, read by an aiohttp client with `response.content.iter_any()`, from:

- replay: `use_cassette(..., speed="instant")` answers the request; the client's reads of
  aiohttp's own `StreamReader` take one recorded chunk each, with no turn of the event loop;
- the floor: an `aiohttp.web` server on 127.0.0.1, in a process of its own, that writes each
  chunk with `StreamResponse.write`: the fastest network the client could have.
  Its client reads whatever has arrived, joined: far fewer reads than chunks.

One cassette session (allowing repeats, ignoring 127.0.0.1 so that the floor's requests go
to the server untouched) and one event loop serve every run; each run opens its own
`ClientSession`, sends the request and reads the body to its end.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path

import aiohttp
from aiohttp import web

import replay

Runner = Callable[[], object]
JSON = {"content-type": "application/json"}


@dataclass
class Contenders:
    """Prepare functions (each returns what to time) and the reads each run took."""

    replayed: Callable[[], Runner]
    served: Callable[[], Runner]
    reads: dict[str, list[int]]


def _server(chunks: Sequence[bytes], headers: Sequence[tuple[str, str]], port: Connection) -> None:
    """The floor's server (run in a process of its own): sends its port, then serves."""

    async def handler(request: web.Request) -> web.StreamResponse:
        await request.read()
        response = web.StreamResponse(headers=dict(headers))
        await response.prepare(request)
        for chunk in chunks:
            await response.write(chunk)
        await response.write_eof()
        return response

    async def serve() -> None:
        app = web.Application()
        app.router.add_post("/v1/responses", handler)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        port.send(runner.addresses[0][1])
        await asyncio.Event().wait()  # until the process is terminated

    asyncio.run(serve())


@contextlib.contextmanager
def _serve(chunks: Sequence[bytes], headers: Sequence[tuple[str, str]]) -> Iterator[int]:
    """Run the floor's server in another process (no GIL shared with the client); its port."""
    context = multiprocessing.get_context("spawn")
    receiving, sending = context.Pipe(duplex=False)
    process = context.Process(target=_server, args=(chunks, headers, sending), daemon=True)
    process.start()
    try:
        yield receiving.recv()
    finally:
        process.terminate()
        process.join()


@contextlib.contextmanager
def contenders(interaction: replay.Interaction) -> Iterator[Contenders]:
    """The replay and server-floor contenders for `interaction` (a POST to its URL)."""
    request, response = interaction.request, interaction.response
    expected = len(response.body)
    loop = asyncio.new_event_loop()
    with (
        tempfile.TemporaryDirectory(prefix="replay-bench-aiohttp-") as tmp,
        contextlib.closing(loop),
        _serve(response.chunks.payloads, response.headers) as port,
    ):
        path = Path(tmp) / "stream.msgpack"
        replay.Cassette([interaction]).save(path)
        reads: dict[str, list[int]] = {"replayed": [], "served": []}

        async def read(url: str, name: str) -> None:
            total = count = 0
            async with (
                aiohttp.ClientSession() as client,
                client.post(url, data=request.body, headers=JSON) as answer,
            ):
                async for chunk in answer.content.iter_any():
                    total += len(chunk)
                    count += 1
            if total != expected:
                raise AssertionError(f"{name}: {total} bytes read, {expected} expected")
            reads[name].append(count)

        def prepare(url: str, name: str) -> Callable[[], Runner]:
            return lambda: lambda: loop.run_until_complete(read(url, name))

        server = f"http://127.0.0.1:{port}/v1/responses"
        found = Contenders(prepare(request.url, "replayed"), prepare(server, "served"), reads)
        with replay.use_cassette(
            path,
            record_mode="none",
            speed="instant",
            allow_playback_repeats=True,
            ignore_hosts=["127.0.0.1"],
        ):
            yield found
