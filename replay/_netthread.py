"""Record an async httpx / httpx2 response from a worker thread: stamps at network arrival.

An async client that blocks its event loop (a CPU-bound step, a sync call in async code)
would hold up a reader running on that loop: chunks would be stamped when the loop got free,
not when they arrived, and a 1x replay would play a delay the server never had. So a
recording sent through the concrete `AsyncHTTPTransport` goes through its *sync twin*: an
`HTTPTransport` of the same module built with the async pool's settings (ssl context,
http1/http2, limits, retries, local address, uds, socket options), made once per async
transport. A worker thread sends the request, reads the body and notes each chunk on the
`Recording` the moment it arrives, then the end; it hands each chunk to the client's loop
without ever waiting for it (a locked deque, and a wake-up scheduled with
`loop.call_soon_threadsafe` or the trio token's `run_sync_soon` only while the client waits).

Still one request on one connection: the twin's pool is the only one that sees it. Errors
come from the twin, so they are the module's own classes; timeouts come from the request's
`timeout` extension. A client that closes early stops the thread: an HTTP/1 read blocked in
it is woken by shutting the socket down.

What goes the ordinary way (a reader task on the client's loop, whose stamps a blocked loop
delays): a transport that is not exactly `AsyncHTTPTransport` (subclasses, MockTransport,
ASGITransport, custom transports), a pool through a proxy or a custom network backend, a
request with a `trace` extension (its callbacks are async), an event loop other than
asyncio or trio, and httpx / httpcore versions whose pool lacks the settings read below.
`unsupported_reason` names which.
"""

from __future__ import annotations

import collections
import contextlib
import importlib
import threading
import weakref
from collections.abc import AsyncIterator, Callable
from typing import Any, Final

import anyio

from replay import patch
from replay._httpmod import AsyncSource, headers_of, interrupt, module_of
from replay.engine.recorder import Recording

__all__ = ["send_in_thread", "unsupported_reason"]

_Schedule = Callable[[Callable[[], None]], object]

#: The HTTP modules served, and the httpcore each builds its pools from.
_CORES: Final = {"httpx": "httpcore", "httpx2": "httpcore2"}

#: The (private) settings of an httpcore AsyncConnectionPool the twin is built from.
_POOL_SETTINGS: Final = (
    "_ssl_context",
    "_max_connections",
    "_max_keepalive_connections",
    "_keepalive_expiry",
    "_http1",
    "_http2",
    "_retries",
    "_local_address",
    "_uds",
    "_socket_options",
    "_network_backend",
)

#: How long closing early waits for the thread to let go of the connection.
_CLOSE_WAIT: Final = 0.5


def unsupported_reason(transport: object, request: Any) -> str | None:
    """Why the response to `request` through `transport` cannot be read from a thread; None
    when it can."""
    module = module_of(transport)
    core_name = _CORES.get(module.__name__)
    if core_name is None or type(transport) is not getattr(module, "AsyncHTTPTransport", None):
        return f"{type(transport).__qualname__} is not {module.__name__}.AsyncHTTPTransport"
    core = importlib.import_module(core_name)
    pool: Any = getattr(transport, "_pool", None)
    if type(pool) is not core.AsyncConnectionPool:  # AsyncHTTPProxy, AsyncSOCKSProxy, custom
        return f"its pool is a {type(pool).__qualname__} (a proxy?)"
    if any(not hasattr(pool, name) for name in _POOL_SETTINGS):
        return f"{core_name} {getattr(core, '__version__', '?')} keeps its settings elsewhere"
    if getattr(pool, "_proxy", None) is not None:
        return "its pool goes through a proxy"
    auto = getattr(importlib.import_module(f"{core_name}._backends.auto"), "AutoBackend", None)
    if type(pool._network_backend) is not auto:
        return "its pool has a custom network backend"
    if pool._ssl_context is None or not isinstance(pool._socket_options, (list, tuple, type(None))):
        return "its pool's settings cannot be copied"
    if module_of(request) is not module or "trace" in request.extensions:
        return "the request has a trace extension (async callbacks)"
    return None


class _Twin:
    """The sync twin of one async transport, and the pumps it serves."""

    def __init__(self, transport: Any) -> None:
        module, pool = module_of(transport), transport._pool
        limits = module.Limits(
            max_connections=pool._max_connections,
            max_keepalive_connections=pool._max_keepalive_connections,
            keepalive_expiry=pool._keepalive_expiry,
        )
        self.transport = module.HTTPTransport(
            verify=pool._ssl_context,  # an SSLContext is used as it is
            http1=pool._http1,
            http2=pool._http2,
            limits=limits,
            uds=pool._uds,
            local_address=pool._local_address,
            retries=pool._retries,
            socket_options=pool._socket_options,
        )
        self.pumps: weakref.WeakSet[_Pump] = weakref.WeakSet()
        self.lock = threading.Lock()

    def close(self) -> None:
        with self.lock:
            pumps = list(self.pumps)
        for pump in pumps:
            pump.abandon()
        with contextlib.suppress(Exception):
            self.transport.close()


_TWINS: weakref.WeakKeyDictionary[Any, _Twin] = weakref.WeakKeyDictionary()
_TWINS_LOCK = threading.Lock()


def _twin(transport: Any) -> _Twin:
    with _TWINS_LOCK:
        twin = _TWINS.get(transport)
        if twin is None:
            twin = _TWINS[transport] = _Twin(transport)
            weakref.finalize(transport, twin.close)
        return twin


def _scheduler() -> _Schedule | None:
    """A thread-safe, non-blocking "run this soon on the running event loop"; None for an
    event loop other than asyncio's or trio's."""
    import sniffio

    library = sniffio.current_async_library()
    if library == "asyncio":
        import asyncio

        return asyncio.get_running_loop().call_soon_threadsafe
    if library == "trio":
        import trio

        return trio.lowlevel.current_trio_token().run_sync_soon
    return None


class _Failed:
    def __init__(self, error: BaseException) -> None:
        self.error = error


class _HookFailed(_Failed):
    """Storing the recording failed (a `before_record` hook raised): the client must hear
    of it, even when it closes without reading to the end."""


_END: Final = object()


class _Pump:
    """One request sent and read by a worker thread; the client's loop takes what it queued.

    Items, in order: the upstream response (or _Failed: no headers), its chunks, then _END or
    _Failed(error), queued once the upstream response is closed (the connection released).
    """

    def __init__(self, twin: _Twin, request: Any, recording: Recording, wake: _Schedule) -> None:
        self._twin = twin
        self._request = request
        self._recording = recording
        self._schedule = wake
        self._lock = threading.Lock()
        self._items: collections.deque[object] = collections.deque()
        self._waiter: anyio.Event | None = None  # set by a wake-up; loop side only
        self._wake_pending = False
        self._abandoned = False  # the client let go
        self._upstream: Any = None
        self._reading = False  # the thread may be blocked reading the connection
        self.over = False  # loop side: the last item was taken
        self._thread = threading.Thread(target=self._run, name="replay-recorder", daemon=True)
        with twin.lock:
            twin.pumps.add(self)
        self._thread.start()

    def _run(self) -> None:
        try:
            with patch.bypassed():  # a session handled it already: this is its network send
                upstream = self._twin.transport.handle_request(self._request)
        except BaseException as failure:  # no headers: the client gets the module's error
            self._put(_Failed(failure))
            return
        with self._lock:
            self._upstream, abandoned = upstream, self._abandoned
            self._reading = not abandoned
        if abandoned:  # the client was cancelled while waiting for the headers
            with contextlib.suppress(Exception):
                upstream.close()
            self._put(_END)
            return
        self._recording.got_headers(upstream.status_code, headers_of(upstream))
        self._put(upstream)
        self._put(self._read(upstream))

    def _read(self, upstream: Any) -> object:
        """Read the body to its end, noting each chunk as it arrives; the last item."""
        error: BaseException | None = None
        try:
            for data in upstream.stream:
                if self._abandoned:
                    break
                self._recording.got_chunk(data)
                self._put(data)
        except BaseException as caught:  # the body's end: recorded, and the client's too
            error = caught
        with self._lock:  # from here on the connection may go back to the pool
            self._reading = False
        with contextlib.suppress(Exception):
            upstream.close()
        if self._abandoned:
            return _END
        try:
            self._recording.finish(error=error)  # at the network's time of the end
        except Exception as failure:  # a before_record hook raised: the client hears of it
            return _HookFailed(failure)
        return _END if error is None else _Failed(error)

    def _put(self, item: object) -> None:
        with self._lock:
            self._items.append(item)
            if self._waiter is None or self._wake_pending:
                return
            self._wake_pending = True
        try:
            self._schedule(self._wake)
        except Exception:  # the loop is closed, or the trio run ended: nobody will read
            self._abandoned = True

    def _wake(self) -> None:
        with self._lock:
            self._wake_pending = False
            waiter, self._waiter = self._waiter, None
        if waiter is not None:
            waiter.set()

    async def get(self) -> object:
        """The next item, waiting for it on the client's loop."""
        while True:
            with self._lock:
                if self._items:
                    item = self._items.popleft()
                    self.over = item is _END or isinstance(item, _Failed)
                    return item
                waiter = self._waiter = anyio.Event()
            await waiter.wait()

    def abandon(self) -> None:
        """Stop the thread's reading (from any thread)."""
        with self._lock:
            self._abandoned = True
            if self._upstream is not None and self._reading:
                interrupt(self._upstream)

    async def close(self) -> None:
        """The client closed early: stop, then wait (briefly, shielded) for the connection
        to be released; raise a `before_record` hook's failure met meanwhile."""
        if self.over:
            return
        self.abandon()
        last: object = None
        with anyio.CancelScope(shield=True), anyio.move_on_after(_CLOSE_WAIT):
            while not self.over:
                last = await self.get()
        if isinstance(last, _HookFailed):
            raise last.error


class _Body:
    """The body as the client reads it (an iterator class: nothing to finalize)."""

    def __init__(self, pump: _Pump, recording: Recording) -> None:
        self._pump = pump
        self._recording = recording
        self._closed = False
        weakref.finalize(self, pump.abandon)  # dropped unclosed: stop the thread too

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self

    async def __anext__(self) -> bytes:
        if self._pump.over:
            raise StopAsyncIteration
        item = await self._pump.get()
        if isinstance(item, _Failed):
            raise item.error
        if item is _END:
            raise StopAsyncIteration
        assert isinstance(item, bytes)
        return item

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        if not self._pump.over:
            self._recording.finish(stopped_by="client")  # a no-op if it ended meanwhile
        await self._pump.close()


async def send_in_thread(
    transport: Any, request: Any, recording: Recording
) -> tuple[Any, AsyncSource] | None:
    """Send `request` (read) through the sync twin of `transport` from a worker thread,
    recording the response on `recording` as it arrives; None (nothing sent) when this
    transport, request or event loop does not allow it.

    Returns, once the headers arrived, the upstream (sync) response, and its body for the
    client's loop: an async iterator with `aclose`, which stops the recording as the
    client's if the body has not ended yet.
    """
    wake = _scheduler()
    if wake is None or unsupported_reason(transport, request) is not None:
        return None
    module = module_of(request)
    sync_request = module.Request(
        method=request.method,
        url=request.url,
        headers=request.headers,  # as they are: Content-Length and the rest already set
        stream=module.ByteStream(request.content),
        extensions=request.extensions,  # timeout, sni_hostname…
    )
    pump = _Pump(_twin(transport), sync_request, recording, wake)
    try:
        first = await pump.get()
    except BaseException:  # cancelled waiting for the headers: the thread lets them go
        pump.abandon()
        raise
    if isinstance(first, _Failed):
        raise first.error
    return first, _Body(pump, recording)
