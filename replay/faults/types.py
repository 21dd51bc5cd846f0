"""The fault values of `replay.faults` (import them from there): what each fault does to a
recorded response, as a pure function, and how it names itself.

`Fault.transform` maps an `Outcome` (the response to play, where silences were injected,
whether a status answered instead) to another; `Fault.apply` is its pure view on a response.
The arithmetic on responses is in `replay.faults.reshape`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Literal

import attrs

from replay.errors import ConfigurationError
from replay.faults import reshape
from replay.model import Chunk, Request, Response, StreamEnd

__all__ = [
    "JSON_CONTENT",
    "Cut",
    "Fault",
    "Inside",
    "Jitter",
    "Outcome",
    "Predicate",
    "Rechunk",
    "Resume",
    "Slow",
    "Stall",
    "Status",
    "count",
    "default_error_body",
    "positive",
]

Predicate = Callable[[Request], bool]
#: Where inside an event a fault may fall (`inside=`).
Inside = Literal["prelude", "headers", "payload"]


@attrs.frozen(kw_only=True)
class Outcome:
    """What one attempt at an interaction plays: a response, where silences were injected,
    and the status fault that answered instead of the recording, if one did.

    Args:
        response: the response to play.
        stalls: body offsets after which a stall's silence comes (chunk boundaries).
        answered_by: a `Status` fault that replaced the recording for this attempt.
    """

    response: Response
    stalls: tuple[int, ...] = ()
    answered_by: Status | None = None

    def stall_steps(self) -> tuple[int, ...]:
        """The indices of the chunks that come after a silence (the chunk count: the end)."""
        return tuple(reshape.chunk_at_offset(self.response, b) for b in self.stalls)


def _targets(fault: Fault) -> str:
    parts = []
    if fault.index is not None:
        parts.append(f"interaction {fault.index}")
    if fault.where is not None:
        parts.append(f"requests where {getattr(fault.where, '__name__', repr(fault.where))}")
    return " and ".join(parts) or "every interaction"


def _spec(name: str, positional: Sequence[object], keywords: Mapping[str, object]) -> str:
    words = [repr(value) for value in positional]
    words += [f"{key}={value!r}" for key, value in keywords.items()]
    return f"{name}({', '.join(words)})"


@attrs.frozen(kw_only=True, repr=False)
class Fault:
    """A fault: which interactions it targets, and how it changes what they play.

    Args:
        index: only the interaction at this position in the cassette.
        where: only interactions whose request (as sent, redacted) satisfies this.
    """

    index: int | None = None
    where: Predicate | None = attrs.field(default=None, eq=False)

    def applies_to(self, index: int, request: Request) -> bool:
        """True when this fault targets interaction `index`, asked for by `request`."""
        if self.index is not None and self.index != index:
            return False
        return self.where is None or bool(self.where(request))

    def apply(self, response: Response, attempt: int = 0) -> Response:
        """The response that attempt `attempt` (0: the first) plays instead of `response`."""
        return self.transform(Outcome(response=response), attempt).response

    def transform(self, outcome: Outcome, attempt: int) -> Outcome:
        """`apply`, carrying the bookkeeping of injected silences along."""
        raise NotImplementedError

    def describe(self) -> str:
        """What the fault does, in words, and to which interactions."""
        return f"{self._what()} ({_targets(self)})"

    def _what(self) -> str:
        raise NotImplementedError

    def _arguments(self) -> tuple[list[object], dict[str, object]]:
        raise NotImplementedError

    def __repr__(self) -> str:
        positional, keywords = self._arguments()
        if self.index is not None:
            keywords["index"] = self.index
        if self.where is not None:
            keywords["where"] = _Raw(getattr(self.where, "__qualname__", repr(self.where)))
        return _spec(type(self).__name__.lower(), positional, keywords)


class _Raw(str):
    def __repr__(self) -> str:
        return str(self)


def count(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigurationError(f"{name} must be a whole number >= 0, not {value!r}")
    return value


def positive(value: object, name: str, *, allow_zero: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigurationError(f"{name} must be a number, not {value!r}")
    if not (value >= 0 if allow_zero else value > 0) or math.isinf(value):
        least = ">= 0" if allow_zero else "> 0"
        raise ConfigurationError(f"{name} must be a finite number {least}, not {value!r}")
    return float(value)


@attrs.frozen(kw_only=True, repr=False)
class Cut(Fault):
    """The connection drops after `after_events` events (or inside the next one, at the
    point `inside` names) or after `after_bytes` body bytes."""

    after_events: int | None = None
    after_bytes: int | None = None
    inside: str | None = None

    def offset(self, response: Response) -> int:
        """The body offset at which the connection drops."""
        if self.after_bytes is not None:
            return min(self.after_bytes, len(response.body))
        return reshape.offset_after_events(response, self.after_events or 0, self.inside)

    def transform(self, outcome: Outcome, attempt: int) -> Outcome:
        offset = self.offset(outcome.response)
        stalls = tuple(b for b in outcome.stalls if b <= offset)
        return attrs.evolve(
            outcome, response=reshape.cut_at(outcome.response, offset), stalls=stalls
        )

    def _what(self) -> str:
        if self.after_bytes is not None:
            return f"cut the connection after {self.after_bytes} body bytes"
        return f"cut the connection after {self.after_events} events{_within(self.inside)}"

    def _arguments(self) -> tuple[list[object], dict[str, object]]:
        if self.after_bytes is not None:
            return [], {"after_bytes": self.after_bytes}
        return [], _inside({"after_events": self.after_events}, self.inside)


@attrs.frozen(kw_only=True, repr=False)
class Resume(Fault):
    """The first attempt at a stream of more than `after_events` events drops after that
    many; the client's resume (SSE `Last-Event-ID`, Responses `starting_after`) is answered
    with the rest of the same recording (`replay.faults.resume`)."""

    after_events: int

    def transform(self, outcome: Outcome, attempt: int) -> Outcome:
        response = outcome.response
        if attempt > 0:
            return outcome
        ends = reshape.event_ends(response) if response.chunks else []
        if len(ends) <= self.after_events:  # nothing left to resume (or not a stream)
            return outcome
        offset = ends[self.after_events - 1] if self.after_events else 0
        stalls = tuple(b for b in outcome.stalls if b <= offset)
        return attrs.evolve(outcome, response=reshape.cut_at(response, offset), stalls=stalls)

    def _what(self) -> str:
        return f"drop after {self.after_events} events, and answer the resume from the recording"

    def _arguments(self) -> tuple[list[object], dict[str, object]]:
        return [], {"after_events": self.after_events}


def _within(inside: str | None) -> str:
    """How `describe` says where inside the next event a fault falls."""
    return "" if inside is None else f", inside the next one's {inside}"


def _inside(keywords: dict[str, object], inside: str | None) -> dict[str, object]:
    """`keywords` with `inside=` when it is set (a spec leaves out what is the default)."""
    return keywords if inside is None else {**keywords, "inside": inside}


@attrs.frozen(kw_only=True, repr=False)
class Stall(Fault):
    """`seconds` of silence after `after_events` events (or inside the next one, at the point
    `inside` names); the rest comes that much later."""

    after_events: int
    seconds: float
    inside: str | None = None

    def transform(self, outcome: Outcome, attempt: int) -> Outcome:
        offset = reshape.offset_after_events(outcome.response, self.after_events, self.inside)
        response, _ = reshape.silence_at(outcome.response, offset, self.seconds)
        return attrs.evolve(outcome, response=response, stalls=(*outcome.stalls, offset))

    def _what(self) -> str:
        return f"stall {self.seconds:g} s after {self.after_events} events{_within(self.inside)}"

    def _arguments(self) -> tuple[list[object], dict[str, object]]:
        keywords: dict[str, object] = {"after_events": self.after_events, "seconds": self.seconds}
        return [], _inside(keywords, self.inside)


JSON_CONTENT = ("content-type", "application/json")


def default_error_body(code: int) -> bytes:
    error = {"message": f"replay fault: status {code}", "type": "replay_fault", "code": code}
    return json.dumps({"type": "error", "error": error}).encode()


@attrs.frozen(kw_only=True, repr=False)
class Status(Fault):
    """Answer `code` (with `headers` and `body`) for the first `times` attempts (None: all)."""

    code: int
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes = b""
    times: int | None = None

    def fires(self, attempt: int) -> bool:
        """True when attempt `attempt` (0: the first) gets this status."""
        return self.times is None or attempt < self.times

    def response(self, recorded: Response) -> Response:
        """The status response, as quick as the recorded headers were."""
        at = recorded.headers_at
        return Response(
            status=self.code,
            headers=self.headers,
            headers_at=at,
            chunks=[Chunk(at, self.body)] if self.body else [],
            end=StreamEnd(at=at),
        )

    def transform(self, outcome: Outcome, attempt: int) -> Outcome:
        if not self.fires(attempt):
            return outcome
        return Outcome(response=self.response(outcome.response), answered_by=self)

    def _what(self) -> str:
        when = "always" if self.times is None else f"for the first {self.times} attempt(s)"
        return f"answer status {self.code} {when}"

    def _arguments(self) -> tuple[list[object], dict[str, object]]:
        keywords: dict[str, object] = {}
        headers = self.headers
        if self.body == default_error_body(self.code) and headers[-1:] == (JSON_CONTENT,):
            headers = headers[:-1]  # what `status()` adds to its default body
        if headers:
            names = [name.lower() for name, _ in headers]
            unique = len(set(names)) == len(names)
            keywords["headers"] = dict(headers) if unique else headers
        if self.body != default_error_body(self.code):
            keywords["body"] = self.body
        if self.times is not None:
            keywords["times"] = self.times
        return [self.code], keywords


@attrs.frozen(kw_only=True, repr=False)
class Rechunk(Fault):
    """The same bytes in chunks of `size` bytes, of random sizes drawn from `seed`, or one
    chunk per event ("events"; with `inside`, each event in two, split at that point)."""

    size: int | Literal["random", "events"]
    seed: int = 0
    inside: str | None = None

    def transform(self, outcome: Outcome, attempt: int) -> Outcome:
        if self.size == "events":
            response = reshape.rechunk_events(outcome.response, self.inside)
        else:
            response = reshape.rechunk(outcome.response, self.size, self.seed)
        return attrs.evolve(outcome, response=response)

    def _what(self) -> str:
        if self.size == "random":
            return f"rechunk into random sizes (seed {self.seed})"
        if self.size == "events":
            split = "" if self.inside is None else f", each split inside its {self.inside}"
            return f"rechunk into one chunk per event{split}"
        return f"rechunk into {self.size}-byte chunks"

    def _arguments(self) -> tuple[list[object], dict[str, object]]:
        if self.size == "random":
            return ["random"], {"seed": self.seed}
        if self.size == "events":
            return ["events"], _inside({}, self.inside)
        return [self.size], {}


@attrs.frozen(kw_only=True, repr=False)
class Slow(Fault):
    """Every recorded time (headers, chunks, end) multiplied by `factor`."""

    factor: float

    def transform(self, outcome: Outcome, attempt: int) -> Outcome:
        return attrs.evolve(outcome, response=reshape.scale(outcome.response, self.factor))

    def _what(self) -> str:
        return f"slow down {self.factor:g}x"

    def _arguments(self) -> tuple[list[object], dict[str, object]]:
        return [self.factor], {}


@attrs.frozen(kw_only=True, repr=False)
class Jitter(Fault):
    """Each chunk moved by a random time within ±`ms` milliseconds (from `seed`)."""

    ms: float
    seed: int = 0

    def transform(self, outcome: Outcome, attempt: int) -> Outcome:
        response = reshape.jitter(outcome.response, self.ms / 1000, self.seed)
        return attrs.evolve(outcome, response=response)

    def _what(self) -> str:
        return f"jitter ±{self.ms:g} ms (seed {self.seed})"

    def _arguments(self) -> tuple[list[object], dict[str, object]]:
        return [self.ms], {"seed": self.seed}
