"""The httpx / httpx2 shell of a cassette session: what a patched transport's request does.

`replay.patch` patches the request methods of every httpx and httpx2 transport class and
hands each request, with the real send, to the session of its context, which calls here:
a request to an ignored host goes live as it is; otherwise the session answers it (replay,
through `replay.playback`), or it is recorded (through `replay.record`), or refused.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from replay.errors import hide_for_replay_errors
from replay.model import Request
from replay.playback import play_async, play_sync

if TYPE_CHECKING:
    from replay.patch import AsyncSend, Send
    from replay.session import CassetteSession

__all__ = ["ahandle", "handle"]


def handle(session: CassetteSession, request: Any, send: Send) -> Any:
    """Replay, record or refuse a sync httpx / httpx2 request for `session`."""
    __tracebackhide__ = hide_for_replay_errors
    if session.ignores(request.url):
        return send(request)
    schedule = session.schedule()
    request.read()
    played = session.answer(Request.from_httpx(request))
    if played is not None:
        return play_sync(request, played, schedule, session.clock)
    from replay.record import record_sync  # (with asyncio: a replay never needs it)

    return record_sync(request, send, session.tape(), clock=session.record_clock)


async def ahandle(session: CassetteSession, request: Any, send: AsyncSend) -> Any:
    """Async twin of `handle`."""
    __tracebackhide__ = hide_for_replay_errors
    if session.ignores(request.url):
        return await send(request)
    schedule = session.schedule()
    await request.aread()
    played = session.answer(Request.from_httpx(request))
    if played is not None:
        return await play_async(request, played, schedule, session.clock)
    from replay.record import record_async

    return await record_async(request, send, session.tape(), clock=session.record_clock)
