"""The Stepper: what comes next in a replayed response, given the time.

A replayed response is a sequence of steps: its status line and headers (`Head`), each body
chunk (`Data`), then its recorded end (`End`: EOF, or the name of the error that ended it),
each due at its recorded time. Step `i` is due at the absolute deadline
`start + at_i / speed`, so one late wake-up never adds up over a long stream; under a speed
policy (`replay.clock.policy`), at `start` plus the time the policy plays step `i` at (its
`timeline`, taken once for the response). At instant speed there is no schedule: every step
is due at once and no clock is read.

The Stepper is pure: it neither reads a clock nor waits. Each shell (sync and async
transports, `replay serve`, `replay play`) asks `next(now)` and gets either the step, or
`Wait(seconds)` to sleep its own way (`time.sleep`, `anyio.sleep`, virtual time) before
asking again. A stall fault's silence that outlasts the client's read timeout turns the
step after it into `End("ReadTimeout")`, due when the client's read would give up. On a
schedule, a step further away (on the clock, the recorded gap scaled by the speed) than the
client's read timeout when the client asks for it is `End("ReadTimeout")` too, due
`read_timeout` seconds after the ask: what the client's own read would have done live.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import attrs

from replay.clock import Clock, Schedule
from replay.engine.ends import TIMEOUT_NAME
from replay.model import Chunks, Response

if TYPE_CHECKING:
    from replay.clock.policy import SpeedPolicy

__all__ = [
    "GAP_TIMEOUT_MESSAGE",
    "STALL_TIMEOUT_MESSAGE",
    "Data",
    "End",
    "Head",
    "Step",
    "Stepper",
    "Wait",
    "played_times",
    "read_timeouts",
    "recorded_steps",
]

#: The message of the ReadTimeout a stall raises.
STALL_TIMEOUT_MESSAGE = "The read operation timed out (a replay stall outlasted the read timeout)"
#: The message of the ReadTimeout of a recorded gap longer than the client's read timeout.
GAP_TIMEOUT_MESSAGE = "The read operation timed out (the next recorded chunk came later)"


@attrs.frozen
class Wait:
    """Nothing is due yet: ask again in `seconds`."""

    seconds: float


@attrs.frozen
class Head:
    """The status line and headers are due."""


@attrs.frozen
class Data:
    """A body chunk is due."""

    data: bytes


@attrs.frozen
class End:
    """The body ends: cleanly (`error` None), or with the named error of the client library."""

    error: str | None = None
    message: str = ""


Step = Wait | Head | Data | End

_HEAD = Head()
_EOF = End()


def read_timeouts(
    response: Response, stall_steps: Sequence[int], read_timeout: float | None
) -> dict[int, float]:
    """The chunk steps a stall makes the client's read time out at, and when (recorded s).

    A step after a stall times out when the silence before it (from the previous chunk, or
    the headers) is longer than `read_timeout`; the read gives up `read_timeout` into it.
    """
    if read_timeout is None or not stall_steps:
        return {}
    times = response.chunks.times
    timeouts = {}
    for step in stall_steps:
        before = times[step - 1] if step else response.headers_at
        at = times[step] if step < len(times) else response.end.at
        if at - before > read_timeout:
            timeouts[step] = before + read_timeout
    return timeouts


class Stepper:
    """The steps of one replayed response, each at its deadline.

    Args:
        response: what is played (faults already applied).
        schedule: the deadlines (`Schedule.starting_now`); None at instant speed.
        timeouts: from `read_timeouts`: chunk steps replaced by the library's ReadTimeout,
            due at the given recorded time.
        read_timeout: the client's read timeout (clock seconds; None: none): with a
            schedule, a step further away than this when asked for ends the response as
            the library's ReadTimeout, that long after the ask.
        salt: what a policy's jitter draws from with its seed (the interaction's position).
    """

    __slots__ = (
        "_count",
        "_give_up",
        "_next",
        "_payloads",
        "_played",
        "_timeouts",
        "_times",
        "closed",
        "instant",
        "read_timeout",
        "response",
        "schedule",
    )

    def __init__(
        self,
        response: Response,
        schedule: Schedule | None = None,
        *,
        timeouts: dict[int, float] | None = None,
        read_timeout: float | None = None,
        salt: int = 0,
    ) -> None:
        self.response = response
        self.schedule = schedule
        #: True when nothing ever waits (no schedule, no clock reads).
        self.instant = schedule is None
        self.closed = False
        self._times = response.chunks.times
        self._payloads = response.chunks.payloads
        self._count = len(self._payloads)
        self._timeouts = timeouts or {}
        self._next = -1  # -1: the headers; 0.._count-1: chunks; _count: the end; past: done
        self.read_timeout = None if schedule is None else read_timeout
        self._give_up: float | None = None  # the clock reading at which the read times out
        #: Under a policy, when each step plays (seconds since the send; the headers first).
        self._played: list[float] | None = None
        if schedule is not None and schedule.policy is not None:
            self._played = played_times(response, schedule.policy, self._timeouts, salt)

    @property
    def finished(self) -> bool:
        """True once the end was handed out, or the stepper was closed."""
        return self.closed or self._next > self._count

    def next(self, now: float | None = None) -> Step:
        """The next step if it is due at clock reading `now`, else how long to wait.

        `now=None` takes the next step whatever the time: at instant speed, or once the
        shell has waited the `Wait` it was given (waiting once, then taking the step, keeps
        a clock that moves by other rules, such as virtual time, from being re-asked).
        After the end (or `close`), every call returns a clean `End`.
        """
        index = self._next
        if self.closed or index > self._count:
            return _EOF
        if self.schedule is not None and now is not None:
            wait = self._wait(index, now)
            if wait is not None:
                return wait
        if self._give_up is not None:  # the client's read timed out before the step was due
            self._next = self._count + 1
            return End(TIMEOUT_NAME, GAP_TIMEOUT_MESSAGE)
        self._next = index + 1
        if index < 0:
            return _HEAD
        if self._timeouts and index in self._timeouts:
            self._next = self._count + 1
            return End(TIMEOUT_NAME, STALL_TIMEOUT_MESSAGE)
        if index < self._count:
            return Data(self._payloads[index])
        end = self.response.end
        return _EOF if end.error is None else End(end.error, end.message)

    def _wait(self, index: int, now: float) -> Wait | None:
        """How long to wait at clock reading `now` for step `index`, or for the client's
        read to time out (when the step is further away than its read timeout)."""
        assert self.schedule is not None
        if self._give_up is not None:
            return Wait(self._give_up - now) if now < self._give_up else None
        if self._played is None:
            delay = self.schedule.delay(self._at(index), now)
        else:
            delay = self.schedule.start + self._played[index + 1] - now
        if delay <= 0:
            return None
        timeout = self.read_timeout
        if timeout is not None and delay > timeout:
            self._give_up = now + timeout
            return Wait(timeout)
        return Wait(delay)

    def rest_at_once(self) -> Sequence[bytes] | None:
        """At instant speed, with no timeout and nothing taken yet but the headers: all the
        payloads, handed out at once (the shell then asks `next()` for the end); else None.

        The per-chunk cost of an instant replay is then that of iterating a tuple.
        """
        if not self.instant or self._timeouts or self._next != 0:
            return None
        self._next = self._count
        return self._payloads

    def close(self) -> None:
        """Stop: the client went away; nothing more is handed out."""
        self.closed = True

    def _at(self, index: int) -> float:
        if index < 0:
            return self.response.headers_at
        at = self._times[index] if index < self._count else self.response.end.at
        if self._timeouts:
            return self._timeouts.get(index, at)
        return at


def recorded_steps(response: Response, timeouts: dict[int, float] | None = None) -> list[float]:
    """The recorded time of each step of `response` (its headers, each chunk, its end), a
    stall's read timeout in place of the step it ends (`read_timeouts`)."""
    times = [response.headers_at, *response.chunks.times, response.end.at]
    for step, at in (timeouts or {}).items():
        times[step + 1] = at
    return times


def played_times(
    response: Response, policy: SpeedPolicy, timeouts: dict[int, float] | None = None, salt: int = 0
) -> list[float]:
    """When each step of `response` plays under `policy` (seconds since the send; the
    headers, each chunk, the end), `salt` drawn from by its jitter: what the Stepper waits
    for, and what `replay show --timeline` draws."""
    ttft = first = None
    if policy.needs_ttft or policy.needs_first_event:
        from replay.inspect import timing  # (only for a policy that needs the events)

        try:
            ttft = _first_token(response) if policy.needs_ttft else None
            first = timing.first_event(response) if policy.needs_first_event else None
        except ValueError:  # a body that does not decode: no events (the first chunk's time)
            pass
    times = recorded_steps(response, timeouts)
    return policy.timeline(times, ttft=ttft, first_event=first, salt=salt)


def _first_token(response: Response) -> float | None:
    """`replay.inspect.timing.ttft(response)`, reading no more of a long stream than it
    must: the events of its first 64 chunks, then 4 times more, until a token is found."""
    from replay.inspect import timing

    chunks, size = response.chunks, 64
    while size < len(chunks):
        start = Chunks(chunks.times[:size], chunks.payloads[:size])
        try:
            tokens = timing.token_events(attrs.evolve(response, chunks=start))
        except ValueError:  # (a compressed body cut short): read the whole
            break
        if tokens:
            return tokens[0].at
        size *= 4
    return timing.ttft(response)


def step_sync(stepper: Stepper, clock: Clock) -> Step:
    """The next step of `stepper`, once due: waits on `clock` (sync) when it must.

    The wait is taken once, then the step: the clock is not asked again (a clock that moves
    by its own rules, as virtual time does, cannot make this spin).
    """
    step = stepper.next(None if stepper.instant else clock.now())
    if isinstance(step, Wait):
        clock.sleep(step.seconds)
        step = stepper.next()
    return step


async def step_async(stepper: Stepper, clock: Clock) -> Step:
    """Async twin of `step_sync`: waits with `clock.asleep`."""
    step = stepper.next(None if stepper.instant else clock.now())
    if isinstance(step, Wait):
        await clock.asleep(step.seconds)
        step = stepper.next()
    return step
