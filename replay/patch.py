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

httpx2 and the other client libraries (`ADAPTERS`) are patched only once imported: one
imported while the patches are on is patched as its import ends (`replay._on_import`), so
that a session does not import httpx2, aiohttp and requests (some 120 ms) in a program that
uses none of them. So is `ThreadPoolExecutor` (its module costs a few ms).
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import importlib
import importlib.util
import sys
import threading
import weakref
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, Protocol, TypeVar

from replay._on_import import PatchOnImport
from replay.errors import AmbiguousSessionError, hide_for_replay_errors

__all__ = [
    "ADAPTERS",
    "Router",
    "bypassed",
    "carried",
    "current",
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

#: The other client libraries replay serves, and the adapter module that patches each one
#: (its `patches()`: (class, attribute, replacement) triples), imported when it is installed.
ADAPTERS: dict[str, str] = {
    "aiohttp": "replay.adapters.aiohttp",
    "requests": "replay.adapters.requests",
}

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


_lock = threading.RLock()  # (re-entered when an import under it ends a pending one)
_routers: list[Router] = []  # every installed router, in the order they came
_guards: list[Router] = []
_originals: list[tuple[type, str, Any]] = []  # (class, attribute, original or None)
_fronts: dict[int, Router] = {}  # id(router) -> the router that answers in its place
_holds = 0  # `hold` calls not yet released

Stack = tuple[Router, ...]
_context: contextvars.ContextVar[Stack] = contextvars.ContextVar("replay_routers", default=())
_inherited: weakref.WeakKeyDictionary[threading.Thread, Stack] = weakref.WeakKeyDictionary()


def _alive(stack: Stack) -> Router | None:
    for router in reversed(stack):
        if router in _routers:
            return router
    return None


def _stack() -> Stack:
    """The routers of this context: its own, else those its thread was started with."""
    stack = _context.get()
    if _alive(stack) is None:
        stack = _inherited.get(threading.current_thread(), ())
    return stack


def current() -> Router | None:
    """The router of this context, or the only active one; None when there is none.

    Raises:
        AmbiguousSessionError: several routers are active and none belongs to this context.
    """
    router = _session()
    return None if router is None else _fronts.get(id(router), router)


def routed() -> Any | None:
    """The cassette session of this context, for an adapter: None when there is none, and
    inside replay's own sends (`bypassed`), which a session already handled.

    Raises:
        AmbiguousSessionError: several sessions are active and none belongs to this context.
    """
    return None if _sending.get() else _session()


def _session() -> Router | None:
    router = _alive(_stack())
    if router is None:
        active = list(_routers)
        if len(active) > 1:
            raise AmbiguousSessionError([_name(candidate) for candidate in active])
        router = active[0] if active else None
    return router


def _name(router: Router) -> str:
    return str(getattr(router, "path", None) or type(router).__name__)


def set_front(router: Router, front: Router | None) -> None:
    """Let `front` answer in `router`'s place wherever `router` is current (None: stop)."""
    with _lock:
        if front is None:
            _fronts.pop(id(router), None)
        else:
            _fronts[id(router)] = front


def _start(original: Callable[[threading.Thread], None]) -> Callable[[threading.Thread], None]:
    def start(self: threading.Thread) -> None:
        stack = _stack()
        if stack:
            _inherited[self] = stack
        original(self)

    return start


def _submit(original: Callable[..., Any]) -> Callable[..., Any]:
    def submit(self: Any, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        return original(self, carried(fn), *args, **kwargs)

    return submit


def carried(fn: Callable[..., T]) -> Callable[..., T]:
    """`fn`, made to run in this context's sessions wherever it is called, as a thread
    started here would (`fn` itself when there are none): for work handed to a thread
    that lives on, such as a pool's."""
    stack = _stack()
    return functools.partial(_run_with, stack, fn) if stack else fn


def start_unrouted(thread: threading.Thread) -> None:
    """Start `thread` carrying no session, whichever the starting context or thread has:
    a worker that lives on, each job bringing its own (`carried`)."""
    contextvars.Context().run(thread.start)
    _inherited.pop(thread, None)  # noted from the starting thread's own, if it was started so


def _run_with(stack: Stack, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    token = _context.set(stack)
    try:
        return fn(*args, **kwargs)
    finally:
        _context.reset(token)


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


#: True inside a send that a router already handled (or replay's own send): transports
#: nested in it (a wrapper's inner transport, a sync twin) send as if unpatched.
_sending: contextvars.ContextVar[bool] = contextvars.ContextVar("replay_sending", default=False)


@contextlib.contextmanager
def bypassed() -> Iterator[None]:
    """Within the block, transports send as if unpatched: for replay's own sends, which a
    session has already handled (the thread reading a recording)."""
    token = _sending.set(True)
    try:
        yield
    finally:
        _sending.reset(token)


def _send_sync(original: Callable[[Any, Any], Any], transport: Any, request: Any) -> Any:
    with bypassed():
        return original(transport, request)


async def _send_async(original: Callable[[Any, Any], Any], transport: Any, request: Any) -> Any:
    from replay.record import network_send  # (which may read a recording in a thread)

    with bypassed():
        return await network_send(transport, original, request)


def _sync_patch(original: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    def handle_request(self: Any, request: Any) -> Any:
        __tracebackhide__ = hide_for_replay_errors
        if _sending.get():
            return original(self, request)
        send = _guarded(functools.partial(_send_sync, original, self))
        router = current()
        if router is None:
            return send(request)
        return router.handle(request, send)

    return handle_request


def _async_patch(original: Callable[[Any, Any], Awaitable[Any]]) -> Callable[[Any, Any], Any]:
    async def handle_async_request(self: Any, request: Any) -> Any:
        __tracebackhide__ = hide_for_replay_errors
        if _sending.get():
            return await original(self, request)
        send = _guarded_async(functools.partial(_send_async, original, self))
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
    """Patch the transport classes of httpx or httpx2 (`name`), and hook their subclasses."""
    module = importlib.import_module(name)
    for base_name, method, wrap in _METHODS:
        base = getattr(module, base_name)
        for cls in _transport_classes(base):
            _patch_class(cls, method, wrap)
        _hook_subclasses(base, method, wrap)


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


_on_import = PatchOnImport(_patch_imported, _lock)


def _patched() -> bool:
    return bool(_routers or _guards or _holds)


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
    with _lock:
        _first_in()
        _holds += 1


def release() -> None:
    """Undo one `hold`: with no router left either, the original transports come back."""
    global _holds
    with _lock:
        if _holds == 0:
            raise RuntimeError("replay.patch.release() without a hold")
        _holds -= 1
        _last_out()


def install(router: Router) -> None:
    """Make `router` the innermost router of this context (and active in the process),
    patching the transports if needed."""
    with _lock:
        _first_in()
        _routers.append(router)
    _context.set((*_context.get(), router))


def install_bottom(router: Router) -> None:
    """Install `router` as a guard: every request on its way to the network passes it, also
    one that a cassette session records (the network guard)."""
    with _lock:
        _first_in()
        _guards.append(router)


def uninstall(router: Router) -> None:
    """Remove `router`; the last one out restores the original transports."""
    stack = _context.get()
    if router in stack:  # (left from another context, it stays there, inactive: no matter)
        _context.set(tuple(other for other in stack if other is not router))
    with _lock:
        if router in _routers:
            _routers.remove(router)
        if router in _guards:
            _guards.remove(router)
        _fronts.pop(id(router), None)
        _last_out()
