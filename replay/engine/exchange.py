"""The exchange: one request's life at a cassette session, decided once for every shell.

    route(desk, url)        → LIVE (an ignored host: sent as it is, unrecorded) | Exchange
    Exchange.decide(request) → Replay (what plays, on which schedule and clock)
                             | Record (a recording started now, finished however the send ends)

A shell (httpx / httpx2, aiohttp, requests; later urllib3, http.client, websockets) converts
its library's request into a `replay.model.Request` between the two calls (reading its body
only when it does not go live), then plays `Replay.body(...)` (`replay.engine.playing`) or
sends through `Record.sent` / `Record.asent` and hands the body to a reader. The session
behind the `Desk` decides what replays and what records (record modes, matching, faults);
the exchange holds what each shell did its own way: the order of the decisions, the
schedule taken when the request is sent, the read timeout a stall turns into, the finish of
a recording whose send failed.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Final, Protocol, TypeVar

from replay.clock import Clock, Schedule
from replay.engine.player import Played
from replay.engine.playing import Replay
from replay.errors import hide_for_replay_errors
from replay.model import Request

if TYPE_CHECKING:
    from replay.engine.recorder import Recording

__all__ = ["LIVE", "Desk", "Exchange", "Live", "Record", "Replay", "route"]

T = TypeVar("T")


class Desk(Protocol):
    """What the exchange asks of a cassette session (`replay.session.lifecycle.CassetteSession`),
    or of a replay transport (`replay.adapters.playback`), which replays every request."""

    #: The clock replays wait on.
    clock: Clock

    def ignores(self, url: object) -> bool:
        """Whether a request to `url` goes live, untouched and unrecorded."""
        ...

    def schedule(self) -> Schedule | None:
        """The deadlines of a response whose request is sent now (None at instant speed)."""
        ...

    def answer(self, request: Request) -> Played | None:
        """What replays `request`, or None: record it (raises when neither may be)."""
        ...

    def start_recording(self, request: Request) -> Recording:
        """A recording of the response to `request`, sent now."""
        ...


class Live:
    """The request goes to the network as it is, unrecorded (`LIVE`)."""

    __slots__ = ()


#: The one `Live`.
LIVE: Final = Live()


class Record:
    """The request is recorded: its `recording` started when it was sent."""

    __slots__ = ("recording",)

    def __init__(self, recording: Recording) -> None:
        self.recording = recording

    def sent(self, send: Callable[[], T]) -> T:
        """`send()`, the real send; a send that fails (no headers) ends the recording."""
        try:
            return send()
        except BaseException as error:
            self.recording.finish(error=error)
            raise

    async def asent(self, sending: Awaitable[T]) -> T:
        """Async twin of `sent`: awaits `sending`."""
        try:
            return await sending
        except BaseException as error:
            self.recording.finish(error=error)
            raise


class Exchange:
    """A request that does not go live, from when it is sent (its schedule starts then)."""

    __slots__ = ("desk", "schedule")

    def __init__(self, desk: Desk) -> None:
        self.desk = desk
        self.schedule = desk.schedule()

    def decide(self, request: Request) -> Replay | Record:
        """Replay `request` or record it (the session's record mode and cassette decide).

        Raises:
            CassetteMismatchError: nothing replays it and the record mode does not record.
        """
        __tracebackhide__ = hide_for_replay_errors
        desk = self.desk
        played = desk.answer(request)
        if played is None:
            return Record(desk.start_recording(request))
        return Replay(played, self.schedule, desk.clock)


def route(desk: Desk, url: object) -> Live | Exchange:
    """`LIVE` for a request to an ignored host (`url`: its text, or an object whose `str`
    is); else its exchange, its schedule starting now."""
    if desk.ignores(url):
        return LIVE
    return Exchange(desk)
