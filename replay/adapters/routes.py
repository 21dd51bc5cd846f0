"""Which cassette session a request belongs to: the routers of each context, and the sends
replay makes itself (which no router sees again).

`replay.adapters.patch` installs the routers and the patches; the patched sends and the adapters ask
here for the router of their context (`current`, `routed`), and the reader threads carry the
sessions of the client that handed them a body (`carried`, `start_unrouted`). See
`replay.adapters.patch` for the rules of routing per context.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import threading
import weakref
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, Protocol, TypeVar

from replay.errors import AmbiguousSessionError

__all__ = [
    "CONTEXT",
    "FRONTS",
    "INHERITED",
    "LOCK",
    "ROUTERS",
    "SENDING",
    "AsyncSend",
    "Router",
    "Send",
    "Stack",
    "bypassed",
    "carried",
    "current",
    "routed",
    "routers_here",
    "set_front",
    "start_unrouted",
]

T = TypeVar("T")

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


LOCK = threading.RLock()  # (re-entered when an import under it ends a pending one)
ROUTERS: list[Router] = []  # every installed router, in the order they came
FRONTS: dict[int, Router] = {}  # id(router) -> the router that answers in its place

Stack = tuple[Router, ...]
CONTEXT: contextvars.ContextVar[Stack] = contextvars.ContextVar("replay_routers", default=())
INHERITED: weakref.WeakKeyDictionary[threading.Thread, Stack] = weakref.WeakKeyDictionary()


def _alive(stack: Stack) -> Router | None:
    for router in reversed(stack):
        if router in ROUTERS:
            return router
    return None


def routers_here() -> Stack:
    """The routers of this context: its own, else those its thread was started with."""
    stack = CONTEXT.get()
    if _alive(stack) is None:
        stack = INHERITED.get(threading.current_thread(), ())
    return stack


def current() -> Router | None:
    """The router of this context, or the only active one; None when there is none.

    Raises:
        AmbiguousSessionError: several routers are active and none belongs to this context.
    """
    router = _session()
    return None if router is None else FRONTS.get(id(router), router)


def routed() -> Any | None:
    """The cassette session of this context, for an adapter: None when there is none, and
    inside replay's own sends (`bypassed`), which a session already handled.

    Raises:
        AmbiguousSessionError: several sessions are active and none belongs to this context.
    """
    return None if SENDING.get() else _session()


def _session() -> Router | None:
    router = _alive(routers_here())
    if router is None:
        active = list(ROUTERS)
        if len(active) > 1:
            raise AmbiguousSessionError([_name(candidate) for candidate in active])
        router = active[0] if active else None
    return router


def _name(router: Router) -> str:
    return str(getattr(router, "path", None) or type(router).__name__)


def set_front(router: Router, front: Router | None) -> None:
    """Let `front` answer in `router`'s place wherever `router` is current (None: stop)."""
    with LOCK:
        if front is None:
            FRONTS.pop(id(router), None)
        else:
            FRONTS[id(router)] = front


def carried(fn: Callable[..., T]) -> Callable[..., T]:
    """`fn`, made to run in this context's sessions wherever it is called, as a thread
    started here would (`fn` itself when there are none): for work handed to a thread
    that lives on, such as a pool's."""
    stack = routers_here()
    return functools.partial(_run_with, stack, fn) if stack else fn


def start_unrouted(thread: threading.Thread) -> None:
    """Start `thread` carrying no session, whichever the starting context or thread has:
    a worker that lives on, each job bringing its own (`carried`)."""
    contextvars.Context().run(thread.start)
    INHERITED.pop(thread, None)  # noted from the starting thread's own, if it was started so


def _run_with(stack: Stack, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    token = CONTEXT.set(stack)
    try:
        return fn(*args, **kwargs)
    finally:
        CONTEXT.reset(token)


#: True inside a send that a router already handled (or replay's own send): transports
#: nested in it (a wrapper's inner transport, a sync twin) send as if unpatched.
SENDING: contextvars.ContextVar[bool] = contextvars.ContextVar("replay_sending", default=False)


@contextlib.contextmanager
def bypassed() -> Iterator[None]:
    """Within the block, transports send as if unpatched: for replay's own sends, which a
    session has already handled (the thread reading a recording)."""
    token = SENDING.set(True)
    try:
        yield
    finally:
        SENDING.reset(token)
