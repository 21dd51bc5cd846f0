"""The servers the benchmarks run in processes of their own (no GIL shared with the clients).

- `origin(routes)`: `replay.testing.origin.Origin` (127.0.0.1 only) in a spawned process; its URL.
- `started(command, log)`: a `replay` command that serves HTTP (`replay proxy`, `replay
  serve`) as a subprocess, once it printed its `http://127.0.0.1:PORT` line; killed on
  leaving if it is still running (stopping it gracefully is the caller's business).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from replay.testing import Origin, Script


def _serve_origin(routes: Mapping[str, Script], pipe: Connection) -> None:
    """The origin's process: sends its URL, then serves until terminated."""
    with Origin(routes) as served:
        pipe.send(served.url)
        threading.Event().wait()


@contextlib.contextmanager
def origin(routes: Mapping[str, Script]) -> Iterator[str]:
    """An `Origin` serving `routes`, in a process of its own; its URL."""
    context = multiprocessing.get_context("spawn")
    receiving, sending = context.Pipe(duplex=False)
    process = context.Process(target=_serve_origin, args=(dict(routes), sending), daemon=True)
    process.start()
    sending.close()  # the child's copy stays open: its death ends `recv` with EOFError
    try:
        yield receiving.recv()
    finally:
        process.terminate()
        process.join(10)


@contextlib.contextmanager
def started(arguments: Sequence[str], log: Path) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """`python -m replay.cli ARGUMENTS` (with `--port 0` among them), its stderr in `log`;
    the process and its URL once it said where it listens."""
    with log.open("wb") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "replay.cli", *arguments],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    try:
        deadline = time.monotonic() + 20
        while not (found := re.search(r"http://127\.0\.0\.1:\d+", log.read_text())):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"replay {arguments[0]} did not start:\n{log.read_text()}")
            time.sleep(0.05)
        yield process, found[0]
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def _serve_chunks(chunks: Sequence[bytes], pipe: Connection) -> None:
    """The plain ASGI server's process: uvicorn on a socket bound here, its URL sent back."""
    import asyncio
    import socket

    import uvicorn

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        while (await receive()).get("more_body"):
            pass
        headers = [(b"content-type", b"text/event-stream; charset=utf-8")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        for chunk in chunks:
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b""})

    listening = socket.socket()
    listening.bind(("127.0.0.1", 0))
    pipe.send(f"http://127.0.0.1:{listening.getsockname()[1]}")
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
    asyncio.run(uvicorn.Server(config).serve(sockets=[listening]))


@contextlib.contextmanager
def plain_asgi(chunks: Sequence[bytes]) -> Iterator[str]:
    """uvicorn serving a bare ASGI app that answers any request with `chunks` at once, in a
    process of its own: the same server stack as `replay serve`, with nothing to look up."""
    context = multiprocessing.get_context("spawn")
    receiving, sending = context.Pipe(duplex=False)
    process = context.Process(target=_serve_chunks, args=(list(chunks), sending), daemon=True)
    process.start()
    sending.close()
    try:
        yield receiving.recv()
    finally:
        process.terminate()
        process.join(10)
