"""Recording transports: pass a real response through to the client, chunk by chunk, and
write down each chunk with the moment it came off the network.

The upstream body is read eagerly, by a thread (sync) or a task (async), which stamps each
chunk as it arrives and hands it over through a queue. So the stamps are the network's, not
the client's: a client that dawdles between reads does not stretch the recorded gaps. The
client still gets every chunk as soon as it arrives, and nothing is buffered whole: a client
that stops early stops the recording at that point.

`Recording` is the shared core: the timeline of one response, finished exactly once, by
the end of the body, an upstream error, or the client closing early.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import queue
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import anyio
import httpx

from replay._httpmod import async_stream, module_of, sync_stream
from replay.clock import Clock, MonotonicClock
from replay.model import Cassette, Chunk, Interaction, Request, Response, StreamEnd
from replay.redact import Redactor

__all__ = [
    "AsyncRecordingTransport",
    "Recording",
    "RecordingTransport",
    "record_async",
    "record_sync",
]

#: Called with each finished, redacted interaction (the session appends it to its cassette).
Sink = Callable[[Interaction], None]


class Recording:
    """The timeline of one response being recorded; finished once, then handed to the sink."""

    def __init__(
        self,
        request: Request,
        clock: Clock,
        start: float,
        sink: Sink,
        pending: set[Recording] | None = None,
    ) -> None:
        self.request = request
        self.pending = pending
        if pending is not None:
            pending.add(self)
        self.clock = clock
        self.start = start
        self.sink = sink
        self.status = 0
        self.headers: list[tuple[str, str]] = []
        self.headers_at = 0.0
        self.chunks: list[Chunk] = []
        self._lock = threading.Lock()
        self.finished = False

    def elapsed(self) -> float:
        return max(0.0, self.clock.now() - self.start)

    def got_headers(self, response: Any) -> None:
        self.headers_at = self.elapsed()
        self.status = response.status_code
        self.headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in response.headers.raw]

    def got_chunk(self, data: bytes) -> None:
        at = self.elapsed()
        with self._lock:
            if not self.finished:
                self.chunks.append(Chunk(at, data))

    def finish(self, *, error: BaseException | None = None, truncated: bool = False) -> None:
        """End the recording now (first call wins) and hand the interaction to the sink."""
        with self._lock:
            if self.finished:
                return
            self.finished = True
            chunks = list(self.chunks)
            if self.pending is not None:
                self.pending.discard(self)
        at = max(self.elapsed(), chunks[-1].at if chunks else self.headers_at)
        end = StreamEnd(
            at=at,
            error=None if error is None else type(error).__name__,
            message="" if error is None else str(error),
            truncated=truncated,
        )
        response = Response(
            status=self.status,
            headers=self.headers,
            headers_at=self.headers_at,
            chunks=chunks,
            end=end,
        )
        self.sink(Interaction(self.request, response))


def _cassette_sink(cassette: Cassette, redactor: Redactor) -> Sink:
    lock = threading.Lock()

    def sink(interaction: Interaction) -> None:
        cleaned = redactor.interaction(interaction)
        with lock:
            cassette.append(cleaned)

    return sink


def _response_like(upstream: Any, stream: Any) -> Any:
    return module_of(upstream).Response(
        status_code=upstream.status_code,
        headers=upstream.headers.raw,
        stream=stream,
        extensions=upstream.extensions,
    )


_END = object()


class _Failed:
    def __init__(self, error: BaseException) -> None:
        self.error = error


class _SyncTap:
    """The client's side of a sync recording: reads what the pump thread queued."""

    def __init__(self, recording: Recording, upstream: Any) -> None:
        self._recording = recording
        self._upstream = upstream
        self._queue: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._closed = threading.Event()
        threading.Thread(target=self._pump, name="replay-recorder", daemon=True).start()

    def _pump(self) -> None:
        try:
            for data in self._upstream.stream:
                self._recording.got_chunk(data)
                self._queue.put(data)
                if self._closed.is_set():
                    return
        except Exception as error:
            if not self._closed.is_set():
                self._recording.finish(error=error)
                self._queue.put(_Failed(error))
        else:
            self._recording.finish()
        finally:
            self._queue.put(_END)
            if not self._closed.is_set():
                _quietly(self._upstream.close)

    def __iter__(self) -> Iterator[bytes]:
        while True:
            item = self._queue.get()
            if item is _END:
                return
            if isinstance(item, _Failed):
                raise item.error
            assert isinstance(item, bytes)
            yield item

    def close(self) -> None:
        if self._closed.is_set():
            return
        self._closed.set()
        self._recording.finish(truncated=True)
        _quietly(self._upstream.close)


def _quietly(close: Callable[[], object]) -> None:
    with contextlib.suppress(Exception):  # the connection is being torn down: nothing to say
        close()


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


class _AsyncTap:
    """The client's side of an async recording: reads what the pump task queued."""

    def __init__(self, recording: Recording, upstream: Any) -> None:
        self._recording = recording
        self._upstream = upstream
        self._send, self._receive = anyio.create_memory_object_stream[object](math.inf)
        self._scope = anyio.CancelScope()
        self._closed = False
        _spawn(self._pump)

    async def _pump(self) -> None:
        try:
            with self._scope:
                try:
                    async for data in self._upstream.stream:
                        self._recording.got_chunk(data)
                        self._send.send_nowait(data)
                except Exception as error:
                    self._recording.finish(error=error)
                    self._send.send_nowait(_Failed(error))
                else:
                    self._recording.finish()
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass
        finally:
            self._send.close()
            with anyio.CancelScope(shield=True):
                with contextlib.suppress(Exception):
                    await self._upstream.aclose()

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for item in self._receive:
            if isinstance(item, _Failed):
                raise item.error
            assert isinstance(item, bytes)
            yield item

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._recording.finish(truncated=True)
        self._scope.cancel()
        self._receive.close()


def record_sync(
    request: Any,
    send: Callable[[Any], Any],
    sink: Sink,
    *,
    clock: Clock | None = None,
    pending: set[Recording] | None = None,
) -> Any:
    """Send `request` with `send` (a real transport's handle_request) and record the answer."""
    clock = clock or MonotonicClock()
    start = clock.now()
    request.read()
    recording = Recording(Request.from_httpx(request), clock, start, sink, pending)
    upstream = send(request)
    recording.got_headers(upstream)
    return _response_like(upstream, sync_stream(module_of(upstream), _SyncTap(recording, upstream)))


async def record_async(
    request: Any,
    send: Callable[[Any], Awaitable[Any]],
    sink: Sink,
    *,
    clock: Clock | None = None,
    pending: set[Recording] | None = None,
) -> Any:
    """Async twin of `record_sync`."""
    clock = clock or MonotonicClock()
    start = clock.now()
    await request.aread()
    recording = Recording(Request.from_httpx(request), clock, start, sink, pending)
    upstream = await send(request)
    recording.got_headers(upstream)
    return _response_like(
        upstream, async_stream(module_of(upstream), _AsyncTap(recording, upstream))
    )


class RecordingTransport(httpx.BaseTransport):
    """Wraps a real sync transport (httpx or httpx2) and records every response into a cassette.

    Args:
        cassette: receives each interaction, redacted, when its body ends.
        inner: the real transport, e.g. `httpx.HTTPTransport()`.
        redactor: what to scrub before anything is stored (default: credentials).
    """

    def __init__(self, cassette: Cassette, inner: Any, *, redactor: Redactor | None = None) -> None:
        self.cassette = cassette
        self.inner = inner
        self._sink = _cassette_sink(cassette, redactor or Redactor())

    def handle_request(self, request: Any) -> Any:
        """Send through `inner`, recording the response as it streams."""
        return record_sync(request, self.inner.handle_request, self._sink)

    def close(self) -> None:
        """Close the inner transport."""
        self.inner.close()


class AsyncRecordingTransport(httpx.AsyncBaseTransport):
    """Async twin of `RecordingTransport`: wraps a real async transport."""

    def __init__(self, cassette: Cassette, inner: Any, *, redactor: Redactor | None = None) -> None:
        self.cassette = cassette
        self.inner = inner
        self._sink = _cassette_sink(cassette, redactor or Redactor())

    async def handle_async_request(self, request: Any) -> Any:
        """Send through `inner`, recording the response as it streams."""
        return await record_async(request, self.inner.handle_async_request, self._sink)

    async def aclose(self) -> None:
        """Close the inner transport."""
        await self.inner.aclose()
