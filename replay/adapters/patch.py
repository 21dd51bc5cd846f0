"""Route every httpx and httpx2 client in the process through the cassette session of its context.

The patch replaces the request method of each concrete transport class (`HTTPTransport`,
`AsyncHTTPTransport`, `MockTransport`, `WSGITransport`, `ASGITransport`) of each library
present, so clients built before the session, and the SDKs' own clients, are covered.
The replacement asks the router (cassette session) of the request's context to handle the
request, handing it the original method bound to the transport, which is how recording
reaches the network. Patches go on when the first router is installed and come off when
the last one leaves, unless held (`hold`): the pytest plugin holds them from one test's
session to the next test's, so that a suite does not take them off and put them back on
between every two tests. Patched but with no router, a transport sends as if unpatched.

Routing is per context, so that concurrent sessions never see each other's traffic:
- a router is entered in a `ContextVar`: an asyncio task (or a trio task) sees the sessions
  entered in it and in the code that started it; nested sessions: the innermost;
- a thread sees the sessions of the thread that started it (`Thread.start` notes them),
  and work submitted to a `ThreadPoolExecutor` runs with the sessions of its submitter;
- a request with none of these goes to the only active session; with several active,
  nothing can tell which is meant: it fails with `AmbiguousSessionError`, never a guess.
While a router is installed, `threading.Thread.start` and `ThreadPoolExecutor.submit` are
wrapped to carry the sessions over; both are restored with the transports.

httpx2 and the other client libraries (`ADAPTERS`: websockets too) are patched once imported
(as the import ends: `replay.adapters.on_import`): a session does not import httpx2, aiohttp
and requests (some 120 ms) where none is used; so is `ThreadPoolExecutor` (a few ms).
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import sys
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from replay.adapters.on_import import PatchOnImport
from replay.adapters.routes import (
    CONTEXT,
    FRONTS,
    INHERITED,
    LOCK,
    ROUTERS,
    SENDING,
    AsyncSend,
    Router,
    Send,
    bypassed,
    carried,
    current,
    routed,
    routers_here,
    set_front,
    start_unrouted,
)
from replay.errors import hide_for_replay_errors

__all__ = [
    "ADAPTERS",
    "AsyncSend",
    "Router",
    "Send",
    "bypassed",
    "carried",
    "current",
    "guarded",
    "guarded_async",
    "hold",
    "install",
    "install_bottom",
    "release",
    "routed",
    "set_front",
    "start_unrouted",
    "uninstall",
]

T = TypeVar("T")

_MODULES = ("httpx", "httpx2")

#: The other libraries served, and the module whose `patches()` patches each (imported then).
ADAPTERS: dict[str, str] = {
    "aiohttp": "replay.adapters.aiohttp",
    "requests": "replay.adapters.requests",
    "httpcore": "replay.adapters.httpcore",  # used directly, without httpx
    "httpcore2": "replay.adapters.httpcore",
    "urllib3": "replay.adapters.urllib3",  # used directly (requests routes its own first)
    "http.client": "replay.adapters.httpclient",  # and so urllib.request
    "websockets.asyncio.client": "replay.adapters.websockets",  # WebSocket conversations
    "websockets.sync.client": "replay.adapters.websockets_sync",
}

_guards: list[Router] = []
_originals: list[tuple[type, str, Any]] = []  # (class, attribute, original or None)
_holds = 0  # `hold` calls not yet released


def _start(original: Callable[[threading.Thread], None]) -> Callable[[threading.Thread], None]:
    """`Thread.start`, made to note the sessions of the starting context for the thread."""

    def start(self: threading.Thread) -> None:
        stack = routers_here()
        if stack:
            INHERITED[self] = stack
        original(self)

    return start


def _submit(original: Callable[..., Any]) -> Callable[..., Any]:
    """`ThreadPoolExecutor.submit`, made to run the work in the submitter's sessions."""

    def submit(self: Any, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        return original(self, carried(fn), *args, **kwargs)

    return submit


def guarded(send: Send) -> Send:
    """`send` behind the guards (`send` itself when there are none): they stand between
    every router and the network, so a request a session records still has to pass them
    (the network guard blocks recording as much as unrecorded requests)."""
    for guard in _guards:
        send = functools.partial(guard.handle, send=send)
    return send


def guarded_async(send: AsyncSend) -> AsyncSend:
    """Async twin of `guarded`."""
    for guard in _guards:
        send = functools.partial(guard.ahandle, send=send)
    return send


def _send_sync(original: Callable[[Any, Any], Any], transport: Any, request: Any) -> Any:
    from replay.adapters.record import network_send_sync  # (a recording: read by the stamper)

    with bypassed():
        return network_send_sync(transport, original, request)


async def _send_async(original: Callable[[Any, Any], Any], transport: Any, request: Any) -> Any:
    from replay.adapters.record import network_send  # (which may read a recording in a thread)

    with bypassed():
        return await network_send(transport, original, request)


def _sync_patch(original: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    def handle_request(self: Any, request: Any) -> Any:
        __tracebackhide__ = hide_for_replay_errors
        if SENDING.get():
            return original(self, request)
        send = guarded(functools.partial(_send_sync, original, self))
        router = current()
        if router is None:
            return send(request)
        return router.handle(request, send)

    return handle_request


def _async_patch(original: Callable[[Any, Any], Awaitable[Any]]) -> Callable[[Any, Any], Any]:
    async def handle_async_request(self: Any, request: Any) -> Any:
        __tracebackhide__ = hide_for_replay_errors
        if SENDING.get():
            return await original(self, request)
        send = guarded_async(functools.partial(_send_async, original, self))
        router = current()
        if router is None:
            return await send(request)
        return await router.ahandle(request, send)

    return handle_async_request


#: The request methods of the httpx / httpx2 transport base classes, and their patches.
_METHODS = (
    ("BaseTransport", "handle_request", _sync_patch),
    ("AsyncBaseTransport", "handle_async_request", _async_patch),
)


def _transport_classes(base: type) -> list[type]:
    """`base` and all its subclasses, but replay's own transports (which answer from their
    own cassettes)."""
    found, seen, todo = [], set(), [base]
    while todo:
        cls = todo.pop()
        if cls in seen:
            continue
        seen.add(cls)
        todo.extend(cls.__subclasses__())
        if not cls.__module__.startswith("replay."):
            found.append(cls)
    return found


def _patch_class(cls: type, method: str, wrap: Callable[[Any], Any]) -> None:
    original = cls.__dict__.get(method)
    if original is not None and not getattr(original, "_replay_patch", False):
        _originals.append((cls, method, original))
        patched = wrap(original)
        patched._replay_patch = True
        setattr(cls, method, patched)


def _hook_subclasses(base: type, method: str, wrap: Callable[[Any], Any]) -> None:
    """Patch the transport classes defined while patched, as they are defined."""
    original = base.__dict__.get("__init_subclass__")

    def __init_subclass__(cls: type, /, **kwargs: Any) -> None:
        super(base, cls).__init_subclass__(**kwargs)  # type: ignore[arg-type]
        if not cls.__module__.startswith("replay."):
            _patch_class(cls, method, wrap)

    _originals.append((base, "__init_subclass__", original))
    setattr(base, "__init_subclass__", classmethod(__init_subclass__))  # noqa: B010


def _patch_transports() -> None:
    for name in _MODULES:
        if name in sys.modules:
            _patch_module(name)
        else:  # not imported yet (httpx2, most often): patched when imported, if it ever is
            _on_import.pending[name] = name
    for library, adapter in ADAPTERS.items():
        if library in sys.modules:
            _patch_adapter(adapter)
        else:  # nothing can have used it yet: patched when imported, if it ever is
            _on_import.pending[library] = adapter
    if _EXECUTOR in sys.modules:
        _patch_executor()
    else:  # no executor can exist yet (importing it costs some ms): patched if it ever does
        _on_import.pending[_EXECUTOR] = _EXECUTOR
    _on_import.start()
    _carry(threading.Thread, "start", _start)


#: The module of `ThreadPoolExecutor`, whose `submit` carries the sessions over too.
_EXECUTOR = "concurrent.futures.thread"


def _carry(cls: type, method: str, carry: Callable[[Any], Any]) -> None:
    _originals.append((cls, method, cls.__dict__[method]))
    setattr(cls, method, carry(cls.__dict__[method]))


def _patch_executor() -> None:
    _carry(importlib.import_module(_EXECUTOR).ThreadPoolExecutor, "submit", _submit)


def _patch_module(name: str) -> None:
    """Patch the transport classes of httpx or httpx2 (`name`), and hook their subclasses;
    its clients route a transport that is no subclass of theirs too (`_Duck`)."""
    module = importlib.import_module(name)
    for base_name, method, wrap in _METHODS:
        base = getattr(module, base_name)
        for cls in _transport_classes(base):
            _patch_class(cls, method, wrap)
        _hook_subclasses(base, method, wrap)
    for client, base, duck in (
        (module.Client, module.BaseTransport, _SyncDuck),
        (module.AsyncClient, module.AsyncBaseTransport, _AsyncDuck),
    ):
        original = client.__dict__.get("_transport_for_url")  # private: else not routed
        if original is not None:
            _originals.append((client, "_transport_for_url", original))
            setattr(client, "_transport_for_url", _ducked(original, base, duck))  # noqa: B010


def _ducked(original: Callable[[Any, Any], Any], base: type, duck: type) -> Callable[..., Any]:
    """A client's `_transport_for_url`, made to hand back a duck-typed transport wrapped."""

    def _transport_for_url(self: Any, url: Any) -> Any:
        transport = original(self, url)
        return transport if isinstance(transport, base) else duck(transport)

    return _transport_for_url


class _Duck:
    """A transport passed to a client that does not subclass its library's base class (it
    only has `handle_request` or `handle_async_request`): routed as a subclass would be,
    its own method being the real send."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner


def _inner_send(duck: _Duck, request: Any) -> Any:
    return duck.inner.handle_request(request)


async def _inner_asend(duck: _Duck, request: Any) -> Any:
    return await duck.inner.handle_async_request(request)


class _SyncDuck(_Duck):
    handle_request = _sync_patch(_inner_send)


class _AsyncDuck(_Duck):
    handle_async_request = _async_patch(_inner_asend)


def _patch_adapter(adapter: str) -> None:
    for cls, method, replacement in importlib.import_module(adapter).patches():
        _originals.append((cls, method, cls.__dict__[method]))
        setattr(cls, method, replacement)


def _patch_imported(what: str) -> None:
    """Patch what has just been imported: an httpx module's transports, the thread pool
    executor, or an adapter's library."""
    if what in _MODULES:
        _patch_module(what)
    elif what == _EXECUTOR:
        _patch_executor()
    else:
        _patch_adapter(what)


_on_import = PatchOnImport(_patch_imported, LOCK)
_inherited = INHERITED  # (the threads started in a routed context, and their routers)


def _patched() -> bool:
    return bool(ROUTERS or _guards or _holds)


def _first_in() -> None:
    if not _patched():
        _patch_transports()


def _last_out() -> None:
    if not _patched():
        for cls, method, original in reversed(_originals):
            if original is None:
                delattr(cls, method)
            else:
                setattr(cls, method, original)
        _originals.clear()
        _on_import.stop()


def hold() -> None:
    """Keep the patches on, routers or none, until `release` (patching them if they are off).

    Each `hold` needs its own `release`.
    """
    global _holds
    with LOCK:
        _first_in()
        _holds += 1


def release() -> None:
    """Undo one `hold`: with no router left either, the original transports come back."""
    global _holds
    with LOCK:
        if _holds == 0:
            raise RuntimeError("replay.adapters.patch.release() without a hold")
        _holds -= 1
        _last_out()


def install(router: Router) -> None:
    """Make `router` the innermost router of this context (and active in the process),
    patching the transports if needed."""
    with LOCK:
        _first_in()
        ROUTERS.append(router)
    CONTEXT.set((*CONTEXT.get(), router))


def install_bottom(router: Router) -> None:
    """Install `router` as a guard: every request on its way to the network passes it, also
    one that a cassette session records (the network guard)."""
    with LOCK:
        _first_in()
        _guards.append(router)


def uninstall(router: Router) -> None:
    """Remove `router`; the last one out restores the original transports."""
    stack = CONTEXT.get()
    if router in stack:  # (left from another context, it stays there, inactive: no matter)
        CONTEXT.set(tuple(other for other in stack if other is not router))
    with LOCK:
        if router in ROUTERS:
            ROUTERS.remove(router)
        if router in _guards:
            _guards.remove(router)
        FRONTS.pop(id(router), None)
        _last_out()
