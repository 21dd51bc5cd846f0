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

import contextlib
import importlib
import sys
import threading
import weakref
from typing import Any, Final, cast

from replay.adapters import netbackend, routes, stamper
from replay.adapters.httpmod import AsyncSource, module_of
from replay.adapters.reader import Schedule, ThreadReader
from replay.engine.feed import AsyncFeed, Failed
from replay.engine.recorder import Recording

__all__ = ["close_twin", "send_in_thread", "stamped_transport", "unsupported_reason"]


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


def unsupported_reason(transport: object, request: Any) -> str | None:
    """Why the response to `request` through `transport` (an async one) cannot be read from
    a thread; None when it can."""
    return _reason(transport, request, sync=False)


def _reason(transport: object, request: Any, *, sync: bool) -> str | None:
    """Why a twin of `transport` (sync or async) cannot send `request`; None when it can."""
    module = module_of(transport)
    core_name = _CORES.get(module.__name__)
    kind = "HTTPTransport" if sync else "AsyncHTTPTransport"
    if core_name is None or type(transport) is not getattr(module, kind, None):
        return f"{type(transport).__qualname__} is not {module.__name__}.{kind}"
    core = importlib.import_module(core_name)
    pool: Any = getattr(transport, "_pool", None)
    if type(pool) is not getattr(core, "ConnectionPool" if sync else "AsyncConnectionPool"):
        return f"its pool is a {type(pool).__qualname__} (a proxy?)"  # HTTPProxy, SOCKSProxy…
    if any(not hasattr(pool, name) for name in _POOL_SETTINGS):
        return f"{core_name} {getattr(core, '__version__', '?')} keeps its settings elsewhere"
    if getattr(pool, "_proxy", None) is not None:
        return "its pool goes through a proxy"
    backends = importlib.import_module(f"{core_name}._backends.{'sync' if sync else 'auto'}")
    if type(pool._network_backend) is not getattr(
        backends, "SyncBackend" if sync else "AutoBackend", None
    ):
        return "its pool has a custom network backend"
    if pool._ssl_context is None or not isinstance(pool._socket_options, (list, tuple, type(None))):
        return "its pool's settings cannot be copied"
    if module_of(request) is not module or "trace" in request.extensions:
        return "the request has a trace extension (async callbacks)"
    return None


def stamped_transport(transport: object, request: Any) -> Any | None:
    """The sync twin of the sync `transport` whose connections are read by the stamper
    (`replay.adapters.netbackend`), to send `request` being recorded; None when there is no
    stamper or the twin cannot send it (`transport` sends it then, as it is)."""
    if not stamper.available() or _reason(transport, request, sync=True) is not None:
        return None
    return _twin(transport).transport


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
        if stamper.available():  # its connections read by the stamper: the network's times
            core_name = _CORES[module.__name__]
            self.transport._pool._network_backend = netbackend.backend_for(core_name)
        self.readers: weakref.WeakSet[ThreadReader] = weakref.WeakSet()

    def close(self) -> None:
        for reader in list(self.readers):
            reader.abandon()
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


def close_twin(transport: Any) -> None:
    """Stop what the twin of `transport` is reading and close its pool (if it has one)."""
    with _TWINS_LOCK:
        twin = _TWINS.pop(transport, None)
    if twin is not None:
        twin.close()


def _scheduler() -> Schedule | None:
    """A thread-safe, non-blocking "run this soon on the running event loop"; None for an
    event loop other than asyncio's or trio's."""
    import asyncio

    try:
        return asyncio.get_running_loop().call_soon_threadsafe
    except RuntimeError:  # not asyncio
        pass
    trio = sys.modules.get("trio")  # a trio run has imported it
    if trio is not None:
        try:
            token = trio.lowlevel.current_trio_token()
        except RuntimeError:  # not trio either
            return None
        return cast(Schedule, token.run_sync_soon)
    return None


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
    twin = _twin(transport)

    def send() -> Any:
        with routes.bypassed():  # a session handled it already: this is its network send
            return twin.transport.handle_request(sync_request)

    reader = ThreadReader(recording, send=send, wake=wake)
    twin.readers.add(reader)
    try:
        first = await reader.aget()
    except BaseException:  # cancelled waiting for the headers: the thread lets them go
        reader.abandon()
        raise
    if isinstance(first, Failed):
        raise first.error
    return first, AsyncFeed(reader)
