"""The httpx / httpx2 shell of a cassette session: what a patched transport's request does.

`replay.patch` patches the request methods of every httpx and httpx2 transport class and
hands each request, with the real send, to the session of its context, which calls here.
The engine's exchange decides its life (`replay.engine.exchange`): a request to an ignored
host goes live as it is; otherwise it is replayed (through `replay.playback`), recorded
(through `replay.record`), or refused. This shell only reads the request and converts it.
"""

from __future__ import annotations

from typing import Any

from replay._routes import AsyncSend, Send
from replay.engine.exchange import Desk, Live, Replay, route
from replay.errors import hide_for_replay_errors
from replay.model import Request
from replay.playback import play_async, play_sync

__all__ = ["ahandle", "handle"]


def handle(session: Desk, request: Any, send: Send) -> Any:
    """Replay, record or refuse a sync httpx / httpx2 request for `session`."""
    __tracebackhide__ = hide_for_replay_errors
    way = route(session, request.url)
    if isinstance(way, Live):
        return send(request)
    request.read()
    decided = way.decide(Request.from_httpx(request))
    if isinstance(decided, Replay):
        return play_sync(request, decided)
    from replay.record import recorded_sync  # (with asyncio: a replay never needs it)

    return recorded_sync(request, send, decided)


async def ahandle(session: Desk, request: Any, send: AsyncSend) -> Any:
    """Async twin of `handle`."""
    __tracebackhide__ = hide_for_replay_errors
    way = route(session, request.url)
    if isinstance(way, Live):
        return await send(request)
    await request.aread()
    decided = way.decide(Request.from_httpx(request))
    if isinstance(decided, Replay):
        return await play_async(request, decided)
    from replay.record import recorded_async

    return await recorded_async(request, send, decided)
