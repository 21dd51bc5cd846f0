"""A replay (`Replay`: what plays, on which schedule and clock) and its one body for every
shell (`Playing`): its chunks as they are due, sync or async, and its recorded end raised as
the shell's own exception.

At instant speed without a stall nothing waits, no clock is read and no Stepper is built
(the usual replay in a test suite then never imports `replay.engine.stepper`, whose attrs
classes cost 1.5 ms a run): the body is its payloads, then its end. Otherwise the Stepper
says what is due and the body waits on the exchange's clock, `clock.sleep` or `asleep`
(real time, virtual time); at instant speed with a stall but no read timeout, the payloads
are handed out at once all the same (a Stepper step a chunk cost 1.3 µs, a tuple's 0.8).
A closed body hands out nothing more, and no end.
"""

from __future__ import annotations

import collections
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator, Sequence
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from replay.clock import Clock, Schedule
    from replay.engine.player import Played
    from replay.engine.stepper import Step, Stepper

__all__ = ["Fail", "Playing", "Replay"]

#: Builds the shell's own exception for a recorded end: (error name, message) -> exception.
Fail = Callable[[str, str], BaseException]


def _stepping() -> ModuleType:
    """`replay.engine.stepper`, imported by the first body that steps."""
    from replay.engine import stepper

    return stepper


class Replay:
    """What answers a request: `played`, on `schedule` (None: instant speed), waited on `clock`."""

    __slots__ = ("clock", "played", "schedule")

    def __init__(self, played: Played, schedule: Schedule | None, clock: Clock) -> None:
        self.played = played
        self.schedule = schedule
        self.clock = clock

    @property
    def instant(self) -> bool:
        """True when nothing waits and no stall plays: the payloads, then the end."""
        return self.schedule is None and not self.played.stall_steps

    def stepper(self, read_timeout: float | None) -> Stepper:
        """The Stepper of the response; a stall longer than `read_timeout` (the client's, in
        seconds; None: none) ends it as a read timeout, and so does (on a schedule) a step
        further away than that when the client asks for it."""
        steps = _stepping()  # (an instant replay never needs it)
        played = self.played
        timeouts = None
        if played.stall_steps:
            timeouts = steps.read_timeouts(played.response, played.stall_steps, read_timeout)
        stepper: Stepper = steps.Stepper(
            played.response,
            self.schedule,
            timeouts=timeouts,
            read_timeout=read_timeout,
            salt=played.index,
        )
        return stepper

    def body(self, fail: Fail, read_timeout: float | None) -> Playing:
        """The replayed body (its headers not yet taken: `Playing.head`); a recorded error
        ends it raised as `fail(name, message)`, the shell's library's own exception."""
        return Playing(self, fail, read_timeout)


class Playing:
    """The body of one replayed response (see the module's docstring).

    Iterate it (`for`, `async for`) for its chunks; the recorded error ends it raised as
    `fail(name, message)`. Sync: `head()` waits for the headers, then the chunks; async: `ahead()`.
    """

    __slots__ = ("_chunks", "_clock", "_end", "_fail", "_rest", "_steps", "closed", "stepper")

    def __init__(self, replay: Replay, fail: Fail, read_timeout: float | None) -> None:
        self._fail = fail
        self._clock = replay.clock
        self._chunks: AsyncGenerator[bytes, None] | None = None
        self.closed = False
        response = replay.played.response
        self.stepper: Stepper | None = None
        if replay.instant:
            self._rest: Iterator[bytes] = iter(response.chunks.payloads)
            self._end = response.end
        else:
            self.stepper = replay.stepper(read_timeout)
            self._steps = _stepping()

    @property
    def instant(self) -> bool:
        """True when nothing waits (no schedule): the client's reads take the chunks."""
        return self.stepper is None or self.stepper.instant

    def head(self) -> None:
        """Wait until the headers are due (sync); headers later than the client's read
        timeout raise its read timeout instead."""
        if self.stepper is not None:
            self._data_or_end(self._steps.step_sync(self.stepper, self._clock))

    async def ahead(self) -> None:
        """Async twin of `head`."""
        if self.stepper is not None:
            self._data_or_end(await self._steps.step_async(self.stepper, self._clock))

    # -- sync ------------------------------------------------------------------------------

    def __iter__(self) -> Iterator[bytes]:
        stepper = self.stepper
        if stepper is None:
            return self._instant()
        rest = stepper.rest_at_once()
        return self._stepped() if rest is None else self._at_once(stepper, rest)

    def _instant(self) -> Iterator[bytes]:
        yield from self._rest  # the per-chunk cost of a tuple's iteration
        self._raise_end()

    def _at_once(self, stepper: Stepper, payloads: Sequence[bytes]) -> Iterator[bytes]:
        for data in payloads:
            if stepper.closed:
                return
            yield data
        self._data_or_end(stepper.next())

    def _stepped(self) -> Iterator[bytes]:
        stepper, clock, step_sync = self.stepper, self._clock, self._steps.step_sync
        while (data := self._data_or_end(step_sync(stepper, clock))) is not None:
            yield data

    def close(self) -> None:
        """The client went away: nothing more is handed out, not even the end."""
        self.closed = True
        if self.stepper is not None:
            self.stepper.close()
        else:
            collections.deque(self._rest, maxlen=0)  # what is left will not be handed out

    # -- async -----------------------------------------------------------------------------

    def __aiter__(self) -> AsyncIterator[bytes]:
        if self.stepper is not None:
            return self  # an iterator class: nothing for the event loop to finalize
        # An async generator is a third cheaper a chunk than an iterator class's coroutines;
        # `aclose` closes it (let go half read, it would otherwise be left to the event loop
        # to finalize, with a ResourceWarning under trio).
        self._chunks = self._ainstant()
        return self._chunks

    async def _ainstant(self) -> AsyncGenerator[bytes, None]:
        for data in self._rest:
            yield data
        self._raise_end()

    async def __anext__(self) -> bytes:
        assert self.stepper is not None
        step = await self._steps.step_async(self.stepper, self._clock)
        data = self._data_or_end(step)
        if data is None:
            raise StopAsyncIteration
        return data

    async def aclose(self) -> None:
        """Async twin of `close`."""
        self.close()
        if self._chunks is not None:  # (it awaits nothing: it ends at once)
            await self._chunks.aclose()

    # -- the end ---------------------------------------------------------------------------

    def _raise_end(self) -> None:
        """Raise the recorded error as the shell's own, unless the body was closed."""
        end = self._end
        if end.error is not None and not self.closed:
            raise self._fail(end.error, end.message)

    def _data_or_end(self, step: Step) -> bytes | None:
        """A chunk's bytes; None at a clean end; the recorded error raised."""
        steps = self._steps
        if isinstance(step, steps.Data):
            data: bytes = step.data
            return data
        if isinstance(step, steps.End) and step.error is not None:
            raise self._fail(step.error, step.message)
        return None
