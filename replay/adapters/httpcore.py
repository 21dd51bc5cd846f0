"""httpcore (and httpcore2) used directly: its pools and connections, routed as httpx's are.

A program may send through httpcore without httpx: `httpcore.ConnectionPool().request(...)`,
`.stream(...)`, `handle_request`, their async twins, or a connection of its own. The patch
(`patches`, for `replay.adapters.patch`) replaces the request method of those classes: a
request with a session (or a network block) in its context becomes the httpx request
(httpcore2: httpx2) it would have been, goes through the httpx shell (`replay.adapters.httpx`:
replayed, recorded with its chunk timing, or refused) and the guards at the bottom of the
patch stack, and its answer becomes an httpcore response again; a replayed end is raised as
httpcore's exception of the same name. The real send is the class's own method, made with
the routing bypassed (as httpx's transports make theirs, so that an httpx transport's own pool
is never routed twice). With no session and no block, the method runs as it was.
"""

from __future__ import annotations

import functools
import importlib
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from types import ModuleType
from typing import Any

from replay.adapters.httpmod import async_stream, module_of, sync_stream
from replay.adapters.patch import guarded, guarded_async
from replay.adapters.routes import SENDING, bypassed, current
from replay.errors import hide_for_replay_errors

__all__ = ["LIBRARIES", "patches"]

#: Each httpcore module replay routes, and the httpx module its requests become.
LIBRARIES = {"httpcore": "httpx", "httpcore2": "httpx2"}

#: The classes whose request methods are patched (pools first; a pool's connections are sent
#: through with the routing bypassed).
_CLASSES = ("ConnectionPool", "HTTPConnection", "HTTP11Connection", "HTTP2Connection")


def patches() -> list[tuple[type, str, Any]]:
    """The patches of the request methods of every imported httpcore module's pools and
    connections not patched yet (see `replay.adapters.patch`)."""
    found: list[tuple[type, str, Any]] = []
    for name in LIBRARIES:
        core = sys.modules.get(name)
        if core is None:
            continue
        for base in _CLASSES:
            cls: Any
            for cls, method, wrap in (
                (getattr(core, base, None), "handle_request", _sync_patch),
                (getattr(core, f"Async{base}", None), "handle_async_request", _async_patch),
            ):
                original = cls.__dict__.get(method) if isinstance(cls, type) else None
                if original is not None and not getattr(original, "_replay_patch", False):
                    patched: Any = wrap(core, original)
                    patched._replay_patch = True
                    found.append((cls, method, patched))
    return found


def _httpx_of(core: ModuleType) -> ModuleType:
    return importlib.import_module(LIBRARIES.get(core.__name__, "httpx"))


def _sync_patch(core: ModuleType, original: Callable[[Any, Any], Any]) -> Callable[..., Any]:
    def handle_request(self: Any, request: Any) -> Any:
        __tracebackhide__ = hide_for_replay_errors
        if SENDING.get():
            return original(self, request)
        network = functools.partial(_send, core, original, self)
        send, router = guarded(network), current()
        if router is None and send is network:  # no session, no block: as it was
            return original(self, request)
        asked = _httpx_request(_httpx_of(core), request, b"".join(request.stream))
        answer = send(asked) if router is None else router.handle(asked, send)
        return _core_response(core, answer, _SyncBody(core, answer))

    return handle_request


def _async_patch(
    core: ModuleType, original: Callable[[Any, Any], Awaitable[Any]]
) -> Callable[..., Any]:
    async def handle_async_request(self: Any, request: Any) -> Any:
        __tracebackhide__ = hide_for_replay_errors
        if SENDING.get():
            return await original(self, request)
        network = functools.partial(_asend, core, original, self)
        send, router = guarded_async(network), current()
        if router is None and send is network:
            return await original(self, request)
        body = b"".join([piece async for piece in request.stream])
        asked = _httpx_request(_httpx_of(core), request, body)
        answer = await (send(asked) if router is None else router.ahandle(asked, send))
        return _core_response(core, answer, _AsyncBody(core, answer))

    return handle_async_request


# -- httpcore ⇄ httpx ---------------------------------------------------------------------------


def _httpx_request(module: ModuleType, request: Any, body: bytes) -> Any:
    """The httpx request an httpcore `request` (its body read: `body`) stands for, its
    headers as they are (none added)."""
    return module.Request(
        method=request.method.decode("ascii"),
        url=module.URL(bytes(request.url).decode("ascii")),
        headers=request.headers,
        stream=module.ByteStream(body),
        extensions=dict(request.extensions),
    )


def _core_request(core: ModuleType, request: Any) -> Any:
    """The httpcore request of an httpx `request` (read), as httpx's own transport makes it."""
    url = request.url
    return core.Request(
        method=request.method,
        url=core.URL(scheme=url.raw_scheme, host=url.raw_host, port=url.port, target=url.raw_path),
        headers=request.headers.raw,
        content=request.read(),  # (a ByteStream: read here, sync even for an async send)
        extensions=request.extensions,
    )


def _send(core: ModuleType, original: Callable[[Any, Any], Any], owner: Any, request: Any) -> Any:
    """The real send of an httpx `request` through `owner` (a pool or connection)."""
    with bypassed():
        sent = original(owner, _core_request(core, request))
    return _httpx_response(module_of(request), sent, sync_stream(module_of(request), _Sent(sent)))


async def _asend(
    core: ModuleType, original: Callable[[Any, Any], Awaitable[Any]], owner: Any, request: Any
) -> Any:
    """Async twin of `_send`."""
    with bypassed():
        sent = await original(owner, _core_request(core, request))
    return _httpx_response(module_of(request), sent, async_stream(module_of(request), _Sent(sent)))


def _httpx_response(module: ModuleType, sent: Any, stream: Any) -> Any:
    return module.Response(
        status_code=sent.status, headers=sent.headers, stream=stream, extensions=sent.extensions
    )


def _core_response(core: ModuleType, answer: Any, body: Any) -> Any:
    extensions = {"http_version": b"HTTP/1.1", **answer.extensions}
    return core.Response(
        answer.status_code, headers=answer.headers.raw, content=body, extensions=extensions
    )


class _Sent:
    """An httpcore response's body, as the stream of the httpx response made of it."""

    def __init__(self, sent: Any) -> None:
        self.sent = sent

    def __iter__(self) -> Iterator[bytes]:
        return self.sent.iter_stream()  # type: ignore[no-any-return]

    def close(self) -> None:
        self.sent.close()

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self.sent.aiter_stream()  # type: ignore[no-any-return]

    async def aclose(self) -> None:
        await self.sent.aclose()


def _core_error(core: ModuleType, error: BaseException) -> BaseException:
    """httpcore's exception of the name of httpx's `error` (a cut when it has none)."""
    found = getattr(core, type(error).__name__, None)
    if not (isinstance(found, type) and issubclass(found, Exception)):
        found = core.RemoteProtocolError
    made: BaseException = found(str(error))
    return made


class _SyncBody:
    """The shell's httpx response, as an httpcore response's stream (raw bytes; httpx's
    errors raised as httpcore's)."""

    def __init__(self, core: ModuleType, answer: Any) -> None:
        self.core, self.answer = core, answer

    def __iter__(self) -> Iterator[bytes]:
        try:
            yield from self.answer.iter_raw()
        except module_of(self.answer).RequestError as error:
            raise _core_error(self.core, error) from error

    def close(self) -> None:
        self.answer.close()


class _AsyncBody:
    """Async twin of `_SyncBody`."""

    def __init__(self, core: ModuleType, answer: Any) -> None:
        self.core, self.answer = core, answer

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for piece in self.answer.aiter_raw():
                yield piece
        except module_of(self.answer).RequestError as error:
            raise _core_error(self.core, error) from error

    async def aclose(self) -> None:
        await self.answer.aclose()
