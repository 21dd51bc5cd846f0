"""Recording transports: pass a real response through to the client, chunk by chunk, and
write down each chunk with the moment it came off the network.

The upstream body is read eagerly, and each chunk stamped as it arrives, by a worker thread
(`replay.adapters.reader`): a sync client's, and an async client's whose transport has a sync twin
(`replay.adapters.netthread`: the concrete `AsyncHTTPTransport`). Other async transports are read by
a task on the client's event loop (`_LoopReader`), whose stamps a client that blocks its loop
delays. Either way a client that dawdles between reads does not stretch the recorded gaps,
gets every chunk as soon as it arrives, and nothing is buffered whole: a client that stops
early stops the recording there, and the reader lets go of the connection before the
client's close returns.

Through `HTTPTransport` / `AsyncHTTPTransport` the connections themselves are read by the
stamper process (`replay.adapters.stamper`, `replay.adapters.netbackend`): each chunk then has
the time its bytes arrived, whatever the client (holding the GIL) let the reader do.

The timeline itself, finished exactly once, and where it goes are the engine's
(`replay.engine.recorder`): this module only reads upstream bodies.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import math
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import httpx

from replay.adapters import routes
from replay.adapters.httpmod import async_stream, headers_of, module_of, sync_stream
from replay.adapters.httpx_capture import request_from_httpx
from replay.adapters.netbackend import stamp_of
from replay.adapters.reader import ThreadReader
from replay.clock import Clock, MonotonicClock
from replay.engine.exchange import Record
from replay.engine.feed import CLOSE_WAIT, END, AsyncFeed, Failed, SyncFeed
from replay.engine.recorder import Recording, Tape
from replay.model import Interaction
from replay.redact.redactor import Redactor
from replay.store.cassette import Cassette

__all__ = [
    "AsyncRecordingTransport",
    "RecordingTransport",
    "network_send",
    "network_send_sync",
    "record_async",
    "record_sync",
    "recorded_async",
    "recorded_sync",
]


def _response_like(upstream: Any, stream: Any) -> Any:
    return module_of(upstream).Response(
        status_code=upstream.status_code,
        headers=upstream.headers.raw,
        stream=stream,
        extensions=upstream.extensions,
    )


def _spawn(function: Callable[[], Awaitable[None]]) -> None:
    """Start `function` as a background task of the running event loop (asyncio or trio)."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        import trio

        trio.lowlevel.spawn_system_task(function)
    else:
        task: asyncio.Task[None] = loop.create_task(function())  # type: ignore[arg-type]
        _TASKS.add(task)
        task.add_done_callback(_TASKS.discard)


_TASKS: set[asyncio.Task[None]] = set()


class _LoopReader:
    """Reads an async recording's body on the client's event loop (a pump task), for the
    client's `AsyncFeed`: the items of `replay.engine.feed`, queued as they come.

    A client that closes early cancels the pump; one that drops the body unclosed leaves
    the pump to read it to its end (the recording is complete).
    """

    def __init__(self, recording: Recording, upstream: Any) -> None:
        self._recording = recording
        self._upstream = upstream
        self._unheard: Exception | None = None  # a sink failure not yet raised to the client
        self._send, self._receive = anyio.create_memory_object_stream[object](math.inf)
        self._scope = anyio.CancelScope()
        self._done = anyio.Event()
        self.over = False
        _spawn(self._pump)

    async def _pump(self) -> None:
        try:
            error: Exception | None = None
            with self._scope:  # cancelled when the client closes early
                try:
                    async for data in self._upstream.stream:
                        self._recording.got_chunk(data)
                        self._send.send_nowait(data)
                except anyio.BrokenResourceError:  # the client left
                    pass
                except Exception as caught:  # the stream's end, recorded; the client gets it
                    error = caught
            error = self._finish(error=error)  # a no-op when the client closed first
            if error is not None:
                with contextlib.suppress(anyio.BrokenResourceError):
                    self._send.send_nowait(Failed(error))
        finally:
            self._send.close()
            with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
                await self._upstream.aclose()
            self._done.set()

    async def aget(self) -> object:
        """The next item: a chunk, or (once the pump is over) how the body ended."""
        try:
            item = await self._receive.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            self.over = True
            return END
        if isinstance(item, Failed):
            self.over = True
            if item.error is self._unheard:  # about to be raised to the client: heard
                self._unheard = None
        return item

    def get(self) -> object:
        """Not for a sync client: this body is read on an event loop."""
        raise TypeError("an async recording's body is read with aget")

    def abandon(self) -> bool:
        """Dropped unclosed: the pump reads on to the end (the recording is complete)."""
        return True

    def close(self) -> None:
        """Not for a sync client (see `aclose`)."""
        raise TypeError("an async recording's body is closed with aclose")

    async def aclose(self) -> None:
        """The client closed early: the recording ends as the client's, the pump stops."""
        self._finish(stopped=True)
        self._scope.cancel()
        self._receive.close()
        # Wait (briefly, whatever the caller's cancellation) for the pump to let go of the
        # connection, so that it is back in the pool when the client's close returns.
        with anyio.CancelScope(shield=True), anyio.move_on_after(CLOSE_WAIT):
            await self._done.wait()
        failure, self._unheard = self._unheard, None
        if failure is not None:
            raise failure

    def _finish(self, *, error: Exception | None = None, stopped: bool = False) -> Exception | None:
        """Finish the recording (first call wins); the error the body should end with."""
        try:
            self._recording.finish(error=error, stopped_by="client" if stopped else None)
        except Exception as failure:
            self._unheard = failure
            return failure
        return error


def record_sync(
    request: Any, send: Callable[[Any], Any], tape: Tape, *, clock: Clock | None = None
) -> Any:
    """Send `request` with `send` (a real transport's handle_request) and record the answer
    onto `tape`."""
    clock = clock or MonotonicClock()
    start = clock.now()
    request.read()
    record = Record(tape.start(request_from_httpx(request), clock, start))
    return recorded_sync(request, send, record)


def recorded_sync(request: Any, send: Callable[[Any], Any], record: Record) -> Any:
    """Send `request` (read) with `send` and hand back the response, its body read and
    stamped as it comes onto `record`'s recording (started when the request was sent).

    When `send` ends in `network_send_sync` and the transport allows it, the connection is
    read by the stamper (`replay.adapters.stamper`): each chunk has its network arrival's time.
    """
    recording = record.recording
    request.extensions[RECORDING] = recording
    try:
        upstream = record.sent(functools.partial(send, request))
    finally:
        request.extensions.pop(RECORDING, None)
    recording.got_headers(upstream.status_code, headers_of(upstream), stamp_of(upstream))
    return _response_like(
        upstream, sync_stream(module_of(upstream), SyncFeed(ThreadReader(recording, upstream)))
    )


#: The request extension through which `record_async` hands its recording to the network
#: send (`network_send`), which may read the body in a thread and stamp it there.
RECORDING = "replay.recording"
#: The response extension saying that the network send records the body itself.
RECORDED = "replay.recorded"


def network_send_sync(transport: Any, original: Callable[[Any, Any], Any], request: Any) -> Any:
    """`original(transport, request)`, the real send; except for a request being recorded
    when there is a stamper: then it goes through the transport's twin whose connections the
    stamper reads (`replay.adapters.netthread.stamped_transport`)."""
    if isinstance(request.extensions.get(RECORDING), Recording):
        from replay.adapters.netthread import stamped_transport

        twin = stamped_transport(transport, request)
        if twin is not None:
            with routes.bypassed():
                return twin.handle_request(request)
    return original(transport, request)


async def network_send(transport: Any, original: Callable[[Any, Any], Any], request: Any) -> Any:
    """`original(transport, request)`, the real send; except for a request being recorded
    whose body a worker thread can read (`replay.adapters.netthread`): then the response comes from
    that thread, each chunk stamped when it came off the network."""
    recording = request.extensions.get(RECORDING)
    if isinstance(recording, Recording):
        from replay.adapters.netthread import send_in_thread

        sent = await send_in_thread(transport, request, recording)
        if sent is not None:
            upstream, body = sent
            module = module_of(request)
            return module.Response(
                status_code=upstream.status_code,
                headers=upstream.headers.raw,
                stream=async_stream(module, body),
                extensions={**upstream.extensions, RECORDED: True},
            )
    return await original(transport, request)


async def record_async(
    request: Any, send: Callable[[Any], Awaitable[Any]], tape: Tape, *, clock: Clock | None = None
) -> Any:
    """Async twin of `record_sync`."""
    clock = clock or MonotonicClock()
    start = clock.now()
    await request.aread()
    record = Record(tape.start(request_from_httpx(request), clock, start))
    return await recorded_async(request, send, record)


async def recorded_async(
    request: Any, send: Callable[[Any], Awaitable[Any]], record: Record
) -> Any:
    """Async twin of `recorded_sync`.

    When `send` ends in `network_send` and the transport allows it, the body is read and
    stamped by a worker thread, so a client that blocks its event loop does not delay the
    stamps; otherwise a task on the client's loop reads it (see `replay.adapters.netthread` for
    which transports, and why).
    """
    recording = record.recording
    request.extensions[RECORDING] = recording
    try:
        upstream = await record.asent(send(request))
    finally:
        request.extensions.pop(RECORDING, None)
    if upstream.extensions.get(RECORDED):
        return upstream
    recording.got_headers(upstream.status_code, headers_of(upstream))
    recording.read_on_loop = True
    return _response_like(
        upstream, async_stream(module_of(upstream), AsyncFeed(_LoopReader(recording, upstream)))
    )


class _RecordingShell:
    """What the sync and async recording transports share: the inner transport, the clock
    and the tape."""

    def __init__(
        self,
        cassette: Cassette,
        inner: Any,
        *,
        redactor: Redactor | None = None,
        clock: Clock | None = None,
        on_recorded: Callable[[Interaction], None] | None = None,
    ) -> None:
        self.cassette = cassette
        self.inner = inner
        self.clock = clock
        #: Where recordings go: redacted, then appended to `cassette`.
        self.tape = Tape(cassette, redactor, on_recorded=on_recorded)


class RecordingTransport(_RecordingShell, httpx.BaseTransport):
    """Wraps a real sync transport (httpx or httpx2) and records every response into a cassette.

    Args:
        cassette: receives each interaction, redacted, when its body ends.
        inner: the real transport, e.g. `httpx.HTTPTransport()`.
        redactor: what to scrub before anything is stored (default: credentials).
        clock: stamps the recorded timeline (default: the real monotonic clock).
        on_recorded: called with each interaction once it is stored (e.g. to log it).
    """

    def handle_request(self, request: Any) -> Any:
        """Send through `inner`, recording the response as it streams."""
        send = functools.partial(network_send_sync, self.inner, type(self.inner).handle_request)
        return record_sync(request, send, self.tape, clock=self.clock)

    def close(self) -> None:
        """Close the inner transport."""
        self.inner.close()


class AsyncRecordingTransport(_RecordingShell, httpx.AsyncBaseTransport):
    """Async twin of `RecordingTransport`: wraps a real async transport. Through an
    `AsyncHTTPTransport` the body is read by a worker thread (see `replay.adapters.netthread`)."""

    async def handle_async_request(self, request: Any) -> Any:
        """Send through `inner`, recording the response as it streams."""
        send = functools.partial(network_send, self.inner, type(self.inner).handle_async_request)
        return await record_async(request, send, self.tape, clock=self.clock)

    async def aclose(self) -> None:
        """Close the inner transport (and the sync twin replay read it through)."""
        from replay.adapters.netthread import close_twin

        close_twin(self.inner)
        await self.inner.aclose()
