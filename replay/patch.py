"""Route every httpx and httpx2 client in the process through the active cassette session.

The patch replaces the request method of each concrete transport class (`HTTPTransport`,
`AsyncHTTPTransport`, `MockTransport`, `WSGITransport`, `ASGITransport`) of each library
present, so clients built before the session, and the SDKs' own clients, are covered.
The replacement asks the innermost active router to handle the request, handing it the
original method bound to the transport, which is how recording reaches the network.
Patches go on when the first router is installed and come off when the last one leaves.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import threading
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

__all__ = ["Router", "install", "install_bottom", "uninstall"]

_MODULES = ("httpx", "httpx2")
_SYNC = {"HTTPTransport", "MockTransport", "WSGITransport"}
_ASYNC = {"AsyncHTTPTransport", "MockTransport", "ASGITransport"}

Send = Callable[[Any], Any]
AsyncSend = Callable[[Any], Awaitable[Any]]


class Router(Protocol):
    """Decides the fate of each request while installed (a cassette session)."""

    def handle(self, request: Any, send: Send) -> Any:
        """Answer a sync request; `send` reaches the real transport."""
        ...

    async def ahandle(self, request: Any, send: AsyncSend) -> Any:
        """Answer an async request; `send` reaches the real transport."""
        ...


_lock = threading.Lock()
_routers: list[Router] = []
_guards: list[Router] = []
_originals: list[tuple[type, str, Any]] = []


def _current() -> Router | None:
    return _routers[-1] if _routers else None


def _guarded(send: Send) -> Send:
    # Guards stand between every router and the network: a request a session records still
    # has to pass them (the network guard blocks recording as much as unrecorded requests).
    for guard in _guards:
        send = functools.partial(guard.handle, send=send)
    return send


def _guarded_async(send: AsyncSend) -> AsyncSend:
    for guard in _guards:
        send = functools.partial(guard.ahandle, send=send)
    return send


def _sync_patch(original: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    def handle_request(self: Any, request: Any) -> Any:
        send = _guarded(lambda request: original(self, request))
        router = _current()
        if router is None:
            return send(request)
        return router.handle(request, send)

    return handle_request


def _async_patch(original: Callable[[Any, Any], Awaitable[Any]]) -> Callable[[Any, Any], Any]:
    async def handle_async_request(self: Any, request: Any) -> Any:
        send = _guarded_async(lambda request: original(self, request))
        router = _current()
        if router is None:
            return await send(request)
        return await router.ahandle(request, send)

    return handle_async_request


def _targets() -> list[tuple[type, str, bool]]:
    targets = []
    for name in _MODULES:
        if importlib.util.find_spec(name) is None:
            continue
        module = importlib.import_module(name)
        for class_name in sorted(_SYNC | _ASYNC):
            cls = getattr(module, class_name, None)
            if cls is None:
                continue
            if class_name in _SYNC:
                targets.append((cls, "handle_request", False))
            if class_name in _ASYNC:
                targets.append((cls, "handle_async_request", True))
    return targets


def _patch_transports() -> None:
    for cls, method, is_async in _targets():
        original = cls.__dict__.get(method)
        if original is None:
            continue
        _originals.append((cls, method, original))
        setattr(cls, method, (_async_patch if is_async else _sync_patch)(original))


def install(router: Router) -> None:
    """Make `router` the innermost active router, patching the transports if needed."""
    with _lock:
        if not _routers and not _guards:
            _patch_transports()
        _routers.append(router)


def install_bottom(router: Router) -> None:
    """Install `router` as a guard: every request on its way to the network passes it, also
    one that a cassette session records (the network guard)."""
    with _lock:
        if not _routers and not _guards:
            _patch_transports()
        _guards.append(router)


def uninstall(router: Router) -> None:
    """Remove `router`; the last one out restores the original transports."""
    with _lock:
        if router in _routers:
            _routers.remove(router)
        if router in _guards:
            _guards.remove(router)
        if not _routers and not _guards:
            for cls, method, original in reversed(_originals):
                setattr(cls, method, original)
            _originals.clear()
