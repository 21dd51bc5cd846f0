"""The httpx / httpx2 shell of a cassette session: what a patched transport's request does.

`replay.adapters.patch` patches the request methods of every httpx and httpx2 transport class and
hands each request, with the real send, to the session of its context, which calls here.
The engine's exchange decides its life (`replay.engine.exchange`): a request to an ignored
host goes live as it is; otherwise it is replayed (`play_sync` / `play_async`, below: the
engine's `Playing` body as a response of the request's own library, its recorded end raised
as that library's exception), recorded (through `replay.adapters.record`), or refused. The replay
transports (`replay.adapters.playback`) come here too, as a desk that replays every request.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from replay.adapters.httpmod import async_stream, error_class, module_of, sync_stream
from replay.adapters.httpx_capture import request_from_httpx
from replay.adapters.routes import AsyncSend, Send
from replay.engine.exchange import Desk, Live, Replay, route
from replay.engine.playing import Fail, Playing
from replay.errors import hide_for_replay_errors
from replay.model import Response

__all__ = ["ahandle", "handle", "play_async", "play_sync"]


def handle(session: Desk, request: Any, send: Send) -> Any:
    """Replay, record or refuse a sync httpx / httpx2 request for `session`."""
    __tracebackhide__ = hide_for_replay_errors
    way = route(session, request.url)
    if isinstance(way, Live):
        return send(request)
    request.read()
    decided = way.decide(request_from_httpx(request))
    if isinstance(decided, Replay):
        return play_sync(request, decided)
    from replay.adapters.record import recorded_sync  # (with asyncio: a replay never needs it)

    return recorded_sync(request, send, decided)


async def ahandle(session: Desk, request: Any, send: AsyncSend) -> Any:
    """Async twin of `handle`."""
    __tracebackhide__ = hide_for_replay_errors
    way = route(session, request.url)
    if isinstance(way, Live):
        return await send(request)
    await request.aread()
    decided = way.decide(request_from_httpx(request))
    if isinstance(decided, Replay):
        return await play_async(request, decided)
    from replay.adapters.record import recorded_async

    return await recorded_async(request, send, decided)


# -- replay -----------------------------------------------------------------------------------


def _read_timeout(request: Any) -> float | None:
    timeout = request.extensions.get("timeout")
    read = timeout.get("read") if isinstance(timeout, dict) else None
    return float(read) if isinstance(read, (int, float)) else None


def _library(request: Any) -> tuple[ModuleType, Fail]:
    """The module of `request` (httpx or httpx2) and how its recorded ends are raised,
    cached by the request's class (asked once per replayed request)."""
    kind = type(request)
    found = _LIBRARIES.get(kind)
    if found is None:
        module = module_of(request)

        def fail(name: str, message: str) -> BaseException:
            return error_class(module, name)(message)

        found = _LIBRARIES[kind] = (module, fail)
    return found


_LIBRARIES: dict[type, tuple[ModuleType, Fail]] = {}


def _response(module: ModuleType, recorded: Response, stream: Any) -> Any:
    try:
        # The usual ASCII headers as they are: the library encodes them as ASCII, which is
        # what latin-1 makes of them too.
        return module.Response(status_code=recorded.status, headers=recorded.headers, stream=stream)
    except UnicodeEncodeError:  # a latin-1 header value beyond ASCII
        headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in recorded.headers]
        return module.Response(status_code=recorded.status, headers=headers, stream=stream)


def _body(request: Any, replay: Replay) -> tuple[ModuleType, Playing]:
    module, fail = _library(request)
    read_timeout = None if replay.instant else _read_timeout(request)
    return module, replay.body(fail, read_timeout)


def play_sync(request: Any, replay: Replay) -> Any:
    """An httpx/httpx2 response (of the request's library) playing `replay`, its headers
    returned at their recorded time; a stall that outlasts the request's read timeout ends
    it as the library's `ReadTimeout`."""
    module, body = _body(request, replay)
    body.head()
    return _response(module, replay.played.response, sync_stream(module, body))


async def play_async(request: Any, replay: Replay) -> Any:
    """Async twin of `play_sync`."""
    module, body = _body(request, replay)
    await body.ahead()
    return _response(module, replay.played.response, async_stream(module, body))
