"""Faults applied at replay: streams that break on demand, reproducibly.

    import replay
    from replay import faults

    with replay.use_cassette("chat.msgpack", faults=[faults.cut(after_events=5)]):
        ...   # the connection drops after the fifth event, as a real drop does

Each fault is a frozen value, reproducible from its arguments (random ones take a `seed`),
whose `repr` is the spec that `parse` reads back (`replay run --fault "cut(after_events=5)"`)
and whose `describe()` says in words what it does (used in reports).

    cut(after_events=N | after_bytes=N)   the connection drops there: the client library's
                                          own RemoteProtocolError, after exactly those bytes
    stall(after_events=N, seconds=S)      S seconds of silence; a client read timeout shorter
                                          than the silence raises the library's ReadTimeout
    status(code, headers=, body=, times=K) answer `code` instead, for the first K attempts
                                          at the interaction (None: always), then the recording
    rechunk(size=1 | "random", seed=)     the same bytes, other chunk boundaries
    rechunk("events")                     the same bytes, one chunk per event
    resume(after_events=N)                the first attempt at a stream drops after N events;
                                          the client's resume (SSE Last-Event-ID, Responses
                                          starting_after) gets the rest of the recording
    slow(factor)                          every recorded time multiplied by `factor`
    jitter(ms, seed=)                     each chunk moved by up to ±ms, kept in order
    close(after_events=N, code=), delay(event=N, seconds=S)  WebSocket conversations' (`frames`)

Targets: `index=` (the interaction's position in the cassette) and `where=` (a predicate on
the `replay.Request` as sent, redacted); a fault with neither applies to every interaction.

How they combine: for each attempt at an interaction, a `status` fault that fires answers
instead of the recording, and nothing else applies; otherwise every stream fault targeting
the interaction transforms the recorded response, in the order given (`Fault.apply` is that
pure function). An event is what the body's framing makes one (`replay.framing.boundaries`):
an SSE event, an NDJSON line, a JSON-array element, an AWS event-stream message. `cut` and
`stall` after N events, and `rechunk("events")`, fall at event boundaries; given `inside=`
("prelude", "headers" or "payload") they fall inside the next event instead: in an AWS
event-stream message, halfway through its prelude, its headers or its payload; in any
other framing, in the middle of the event's bytes. For a compressed body `after_events`
counts at chunk granularity (and `inside=` falls at the event's end) and `after_bytes`
counts raw (compressed) bytes. Times are recorded seconds: like every recorded gap, a stall
is scaled by the replay speed (none at instant speed), but whether the client's read timeout
fires is decided as live, by comparing the timeout with the recorded silence.
"""

from __future__ import annotations

import ast
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal, Union

from replay.errors import ConfigurationError
from replay.faults.frames import close, delay
from replay.faults.reshape import INSIDE
from replay.faults.resplit import resplit  # (the same bytes split where parsers break)
from replay.faults.types import (
    JSON_CONTENT,
    Cut,
    Fault,
    Inside,
    Jitter,
    Outcome,
    Predicate,
    Rechunk,
    Resume,
    Slow,
    Stall,
    Status,
    count,
    default_error_body,
    positive,
)
from replay.model import MAX_SECONDS, Request, Response

__all__ = [
    "Cut",
    "Fault",
    "FaultLike",
    "Injector",
    "Inside",
    "Jitter",
    "Outcome",
    "Rechunk",
    "Resume",
    "Slow",
    "Stall",
    "Status",
    "coerce",
    "cut",
    "jitter",
    "parse",
    "rechunk",
    "resume",
    "slow",
    "stall",
    "status",
]


def _target(index: int | None, where: Predicate | None) -> dict[str, Any]:
    if index is not None:
        count(index, "index")
    if where is not None and not callable(where):
        raise ConfigurationError(f"where must be a callable(Request) -> bool, not {where!r}")
    return {"index": index, "where": where}


def _inside(inside: str | None) -> str | None:
    if inside is not None and inside not in INSIDE:
        names = ", ".join(map(repr, INSIDE))
        raise ConfigurationError(f"inside must be one of {names} (or None), not {inside!r}")
    return inside


def cut(
    *,
    after_events: int | None = None,
    after_bytes: int | None = None,
    inside: Inside | None = None,
    index: int | None = None,
    where: Predicate | None = None,
) -> Cut:
    """Drop the connection after `after_events` events, or after `after_bytes` bytes.

    The client reads exactly that much of the body, then gets its library's
    `RemoteProtocolError`. A body with fewer events or bytes is cut at its end. With
    `inside` ("prelude", "headers", "payload"; with `after_events` only), the drop comes
    inside the next event instead, at that point of an AWS event-stream message (in the
    middle of an event of any other framing).
    """
    if (after_events is None) == (after_bytes is None):
        raise ConfigurationError("cut() takes exactly one of after_events= and after_bytes=")
    if after_events is not None:
        count(after_events, "after_events")
    if after_bytes is not None:
        count(after_bytes, "after_bytes")
        if inside is not None:
            raise ConfigurationError("inside= goes with after_events=, not after_bytes=")
    return Cut(
        after_events=after_events,
        after_bytes=after_bytes,
        inside=_inside(inside),
        **_target(index, where),
    )


def stall(
    *,
    after_events: int,
    seconds: float,
    inside: Inside | None = None,
    index: int | None = None,
    where: Predicate | None = None,
) -> Stall:
    """Go silent for `seconds` after `after_events` events (0: before the first); with
    `inside`, inside the next event instead (as `cut` places it).

    A client whose read timeout is shorter than the silence gets its library's
    `ReadTimeout` that many seconds into it (scaled by the speed, like every wait).
    """
    count(after_events, "after_events")
    return Stall(
        after_events=after_events,
        seconds=_bounded(positive(seconds, "seconds"), "seconds", MAX_SECONDS),
        inside=_inside(inside),
        **_target(index, where),
    )


def status(
    code: int,
    *,
    headers: Mapping[str, str] | Iterable[tuple[str, str]] = (),
    body: bytes | str | None = None,
    times: int | None = None,
    index: int | None = None,
    where: Predicate | None = None,
) -> Status:
    """Answer with status `code` instead of the recording, for the first `times` attempts.

    Args:
        code: the status, e.g. 429, 500, 529.
        headers: response headers, e.g. `{"retry-after": "0"}`.
        body: the body (str is sent as UTF-8); None: a small JSON error naming the fault,
            with `content-type: application/json` unless `headers` give one.
        times: how many attempts at each targeted interaction get the status before the
            recording plays (None: every attempt). A faulted attempt does not use the
            interaction up, so a client's retry of the same request gets the recording.
    """
    if isinstance(code, bool) or not isinstance(code, int) or not 100 <= code <= 599:
        raise ConfigurationError(f"status code must be an int from 100 to 599, not {code!r}")
    if times is not None and count(times, "times") == 0:
        raise ConfigurationError("times must be at least 1 (or None: every attempt)")
    items = headers.items() if isinstance(headers, Mapping) else headers
    pairs = tuple((str(name), str(value)) for name, value in items)
    if body is None:
        body = default_error_body(code)
        if not any(name.lower() == "content-type" for name, _ in pairs):
            pairs += (JSON_CONTENT,)
    elif isinstance(body, str):
        body = body.encode()
    elif not isinstance(body, bytes):
        raise ConfigurationError(f"body must be bytes or str, not {type(body).__name__}")
    return Status(code=code, headers=pairs, body=body, times=times, **_target(index, where))


def rechunk(
    size: int | Literal["random", "events"] = 1,
    *,
    seed: int = 0,
    inside: Inside | None = None,
    index: int | None = None,
    where: Predicate | None = None,
) -> Rechunk:
    """Re-split the body into `size`-byte chunks, random sizes ("random", from `seed`), or
    one chunk per event ("events"; with `inside`, each event in two chunks, split at that
    point of it, as `cut` places it: an AWS event-stream message inside its prelude, its
    headers or its payload).

    Each recorded chunk still completes at its recorded time (its bytes spread over the
    gap before it); random sizes run from 1 byte to twice the mean recorded chunk.
    """
    if size not in ("random", "events") and (count(size, "size") == 0):
        raise ConfigurationError("size must be at least 1 byte (or 'random', or 'events')")
    if inside is not None and size != "events":
        raise ConfigurationError("inside= goes with rechunk('events')")
    return Rechunk(
        size=size, seed=count(seed, "seed"), inside=_inside(inside), **_target(index, where)
    )


def resume(
    *, after_events: int, index: int | None = None, where: Predicate | None = None
) -> Resume:
    """Drop a stream after `after_events` events and answer the client's resume from the
    same recording: test a resume path on a cassette recorded without a drop.

    The first attempt at each targeted stream that has more events than that drops there
    (the client library's `RemoteProtocolError`, as `cut`). A request that resumes it, an
    SSE client's with `Last-Event-ID: <id>` (the request otherwise the one that opened
    the stream) or an OpenAI Responses client's `GET /v1/responses/{id}?stream=true&
    starting_after=N`, is answered with the recorded headers, then the recorded events
    after the one of that `id:` or `sequence_number`, at their recorded pace, then the
    recorded end. The resume is answered without other faults.
    """
    return Resume(after_events=count(after_events, "after_events"), **_target(index, where))


def slow(factor: float, *, index: int | None = None, where: Predicate | None = None) -> Slow:
    """Stretch every recorded time by `factor` (2: twice as slow; 0.5: twice as fast)."""
    return Slow(factor=positive(factor, "factor"), **_target(index, where))


def jitter(
    ms: float, *, seed: int = 0, index: int | None = None, where: Predicate | None = None
) -> Jitter:
    """Move each chunk by a random time within ±`ms` milliseconds, drawn from `seed`."""
    ms = _bounded(positive(ms, "ms", allow_zero=True), "ms", MAX_SECONDS * 1000)
    return Jitter(ms=ms, seed=count(seed, "seed"), **_target(index, where))


def _bounded(value: float, name: str, most: float) -> float:
    """`value`, unless it is past `most` (a week: what a recorded time may reach)."""
    if value > most:
        raise ConfigurationError(
            f"{name} must be at most {most:g} (one week: the longest a recorded time may "
            f"be), not {value!r}"
        )
    return value


_FACTORIES: dict[str, Callable[..., Fault]] = {
    "cut": cut,
    "stall": stall,
    "status": status,
    "rechunk": rechunk,
    "resplit": resplit,
    "resume": resume,
    "slow": slow,
    "jitter": jitter,
    **{"close": close, "delay": delay},  # (a WebSocket conversation's: `replay.faults.frames`)
}

FaultLike = Union[Fault, str]  # noqa: UP007 - a runtime alias, and 3.10 lacks `type`


def parse(spec: str) -> Fault:
    """The fault a spec such as `"cut(after_events=5)"` or `"status(429, times=1)"` names.

    The syntax is a call, `NAME(value, key=value, ...)` (or a bare `NAME`), whose values are
    Python literals, read with `ast.literal_eval`: nothing is evaluated. `where=` cannot be
    written in a spec.

    Raises:
        ConfigurationError: naming the spec: not that syntax, an unknown fault, a bad value.
    """
    try:
        node = ast.parse(spec.strip(), mode="eval").body
    except (SyntaxError, ValueError, MemoryError, RecursionError):  # (too deep, NUL: as bad)
        raise _bad(spec, "write NAME(key=value, ...), e.g. cut(after_events=5)") from None
    if isinstance(node, ast.Name):
        node = ast.Call(func=node, args=[], keywords=[])
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        raise _bad(spec, "write NAME(key=value, ...), e.g. cut(after_events=5)")
    factory = _FACTORIES.get(node.func.id)
    if factory is None:
        raise _bad(spec, f"unknown fault {node.func.id!r}: use one of {', '.join(_FACTORIES)}")
    try:
        args = [ast.literal_eval(arg) for arg in node.args]
        kwargs = {kw.arg: ast.literal_eval(kw.value) for kw in node.keywords if kw.arg}
    except (ValueError, TypeError):  # not a literal, or an unhashable dict key
        raise _bad(spec, "values must be literals (numbers, strings, dicts…)") from None
    if len(kwargs) != len(node.keywords) or "where" in kwargs:
        raise _bad(spec, "**arguments and where= cannot be written in a spec")
    try:
        return factory(*args, **kwargs)
    except (TypeError, ValueError) as error:  # ConfigurationError is a ValueError too
        raise _bad(spec, str(error)) from None


def _bad(spec: str, problem: str) -> ConfigurationError:
    return ConfigurationError(f"bad fault {spec[:80] + '…' * (len(spec) > 80)!r}: {problem}")


def coerce(faults: Iterable[FaultLike]) -> tuple[Fault, ...]:
    """Faults from faults and specs (parsed); raises ConfigurationError for anything else."""
    if isinstance(faults, (str, Fault)):
        faults = [faults]
    result = []
    for fault in faults:
        if isinstance(fault, str):
            fault = parse(fault)
        elif not isinstance(fault, Fault):
            raise ConfigurationError(f"not a fault: {fault!r} (use replay.faults.cut(...), …)")
        result.append(fault)
    return tuple(result)


class Injector:
    """The faults of one transport or session, and how many attempts each interaction had.

    Thread-safe: attempts are counted under a lock; the transforms are pure.
    """

    def __init__(self, faults: Iterable[FaultLike]) -> None:
        self.faults = coerce(faults)
        self._attempts: dict[int, int] = {}
        self._injected = [0] * len(self.faults)  # attempts each fault changed
        self._lock = threading.Lock()

    def attempts(self, index: int) -> int:
        """How many requests interaction `index` has answered (faulted or not)."""
        return self._attempts.get(index, 0)

    def injected(self) -> tuple[Fault, ...]:
        """The faults applied to at least one attempt (what is recorded gets none)."""
        return tuple(fault for fault, n in zip(self.faults, self._injected, strict=True) if n)

    def resumes(self) -> tuple[Resume, ...]:
        """The `resume` faults: they answer a resume request the cassette has no answer for."""
        return tuple(fault for fault in self.faults if isinstance(fault, Resume))

    def report(self) -> list[str]:
        """The faults injected (spec and words), the attempts each interaction had, then the
        faults never injected: for reports."""
        counted = list(zip(self.faults, self._injected, strict=True))
        lines = [f"{fault!r}: {fault.describe()}" for fault, n in counted if n]
        if self._attempts:
            counts = ", ".join(f"#{i}: {n}" for i, n in sorted(self._attempts.items()))
            lines.append(f"attempts per interaction: {counts}")
        lines += [
            f"{fault!r}: {fault.describe()}: not injected (nothing it targets was replayed)"
            for fault, n in counted
            if not n
        ]
        return lines

    def outcome(self, index: int, request: Request, response: Response) -> Outcome:
        """What this attempt at interaction `index` (asked for by `request`) plays."""
        with self._lock:
            attempt = self._attempts.get(index, 0)
            self._attempts[index] = attempt + 1
        targeted = [
            (n, fault) for n, fault in enumerate(self.faults) if fault.applies_to(index, request)
        ]
        firing = [(n, f) for n, f in targeted if isinstance(f, Status) and f.fires(attempt)]
        streams = [(n, f) for n, f in targeted if not isinstance(f, Status)]
        # A status that fires answers alone; otherwise every stream fault applies, in order.
        applied = firing[:1] or streams
        with self._lock:
            for n, _ in applied:
                self._injected[n] += 1
        outcome = Outcome(response=response)
        for _, fault in applied:
            try:
                outcome = fault.transform(outcome, attempt)
            except ValueError as exc:  # the model's: a time moved past `MAX_SECONDS`
                raise ConfigurationError(f"fault {fault!r} on interaction {index}: {exc}") from None
        return outcome
