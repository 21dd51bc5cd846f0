"""What the three dialects share: reading a stream into events, reporting violations, and
laying synthetic events out on a timeline.

Validation runs in two layers. `read()` turns any accepted input into events plus the
violations only bytes can show (invalid UTF-8, a stream that stops mid-event or with a
transport error). Each dialect then walks the events as a small state machine, reporting
into a `Report`. A truncated stream is reported once, as `stream.truncated`; the dialects
skip their end-of-stream rules (missing terminal event, unclosed blocks) for it, so a cut
never shows up as a pile of consequences.

Building runs the other way: a dialect lists its events as `Step`s, `build()` spaces them
(first at `ttft`, deltas `1 / tokens_per_second` apart, bookkeeping a few ms apart) and
wraps them in an `Interaction`.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol, TypeAlias

import attrs

from replay import framing
from replay.dialects.making import json_schema, stable_id, tokenize
from replay.dialects.rules import Severity, severity_of
from replay.engine.ends import CUT_NAME
from replay.errors import ConfigurationError
from replay.framing import eventstream, invoke, jsonarray
from replay.framing.decoding import decoded_chunks
from replay.framing.sse import parse
from replay.model import MAX_SECONDS, Chunk, Interaction, Request, Response, StreamEnd
from replay.redact import deep_json

__all__ = [
    "CREATED",
    "EventLike",
    "Parsed",
    "Report",
    "Step",
    "StreamLike",
    "ToolCall",
    "Violation",
    "adds_up",
    "build",
    "check_failure",
    "check_timing",
    "compact",
    "json_request",
    "json_schema",
    "payload",
    "payloads",
    "read",
    "sse",
    "stable_id",
    "tokenize",
    "truncate",
]

_EOL = re.compile(r"\r\n?|\n")  # the SSE line terminators

SMALL_GAP = 0.005  # seconds between bookkeeping events, as the APIs send them back to back
CREATED = 1735722153  # the fixed Unix time every synthetic stream claims to be from
CUT_MESSAGE = (
    "peer closed connection without sending complete message body (incomplete chunked read)"
)


class EventLike(Protocol):
    """What validation reads of an event: `replay.framing.sse.Event` and `TimedEvent` both fit."""

    @property
    def event(self) -> str: ...
    @property
    def data(self) -> str: ...


StreamLike: TypeAlias = bytes | Interaction | Response | Sequence[EventLike]


@attrs.frozen
class Violation:
    """One broken rule: its stable name, what was wrong, and at which event (0-based).

    `severity` is the rule's (see `replay.dialects.SEVERITIES`) unless given.
    """

    rule: str
    message: str
    index: int | None = None
    severity: Severity = attrs.field(kw_only=True)

    @severity.default
    def _severity_of_rule(self) -> Severity:
        return severity_of(self.rule)


def _copy(arguments: Mapping[str, object]) -> dict[str, object]:
    return dict(arguments)


@attrs.frozen
class ToolCall:
    """A function call a synthetic stream makes: its name and JSON-able arguments.

    `id` defaults to one derived from the name and arguments, so streams are reproducible.
    """

    name: str
    arguments: Mapping[str, object] = attrs.field(factory=dict, converter=_copy)
    id: str | None = None

    @property
    def arguments_json(self) -> str:
        """The arguments as the APIs stream them: compact JSON."""
        return json.dumps(self.arguments, separators=(",", ":"), ensure_ascii=False)

    def call_id(self, prefix: str) -> str:
        """`id`, or a stable one with the dialect's prefix (`call_`, `toolu_`)."""
        return self.id or stable_id(prefix, self.name, self.arguments_json)


@attrs.frozen
class Parsed:
    """A stream read for validation: its events and the byte-level violations found."""

    events: tuple[EventLike, ...]
    violations: tuple[Violation, ...] = ()
    #: The recording ended because the client closed the response, not by a server's error;
    #: the stream may yet be whole (a client closes after the last event).
    client_stop: bool = False

    @property
    def truncated(self) -> bool:
        """True when the stream did not end cleanly after a complete event."""
        return any(v.rule == "stream.truncated" for v in self.violations)


def read(stream: StreamLike) -> Parsed:
    """Events and byte-level violations of raw bytes, an Interaction, a Response or events."""
    if isinstance(stream, Interaction):
        stream = stream.response
    if isinstance(stream, (bytes, bytearray, memoryview)):
        body = bytes(stream)
        return _read_body(body, framing.sniff(body[: framing.SNIFF_BYTES]))
    if isinstance(stream, Response):
        body = b"".join(data for _, data in decoded_chunks(stream))
        parsed = _read_body(body, framing.detect(stream))
        end = stream.end
        if end.error is not None or end.truncated:
            client_stop = end.error is None and end.stopped_by == "client" and not parsed.truncated
            why = f"{end.error}: {end.message}" if end.error else _STOPS[end.stopped_by or ""]
            violation = Violation("stream.truncated", f"the stream ended with {why}", None)
            violations = (*_without_truncation(parsed), violation)
            parsed = attrs.evolve(parsed, violations=violations, client_stop=client_stop)
        return parsed
    return Parsed(events=tuple(stream))


_STOPS = {
    "client": "the client closing it early",
    "session": "the session ending while it still streamed",
}


def without_truncation(parsed: Parsed) -> tuple[Violation, ...]:
    """The violations of `parsed` but `stream.truncated`."""
    return _without_truncation(parsed)


def _without_truncation(parsed: Parsed) -> tuple[Violation, ...]:
    return tuple(v for v in parsed.violations if v.rule != "stream.truncated")


def _read_body(body: bytes, kind: framing.Framing | None = None) -> Parsed:
    """Events and byte-level violations of a body: SSE, a JSON array, or an event stream."""
    if kind == "eventstream":
        return _read_eventstream(body)
    array = kind == "json-array"
    cut = _array_cut(body) if array else None
    events = tuple(jsonarray.parse(body) if array else parse(body))
    violations: list[Violation] = []
    text = body.decode("utf-8", errors="replace")
    truncated = _ends_mid_event(text) if cut is None else bool(cut)
    try:
        body.decode("utf-8")
    except UnicodeDecodeError as error:
        # A character cut short by the end of a truncated body is part of the truncation.
        if not (truncated and error.end == len(body)):
            # The bad byte belongs to the event after those complete before it.
            index = len((jsonarray.parse if array else parse)(body[: error.start]))
            message = f"byte {error.start} is not valid UTF-8 ({error.reason})"
            violations.append(
                Violation("stream.utf8", message, index if index < len(events) else None)
            )
    if truncated:
        message = cut or "the stream ends inside an event (no blank line after its last field)"
        violations.append(Violation("stream.truncated", message, None))
    return Parsed(events=events, violations=tuple(violations))


def _read_eventstream(body: bytes) -> Parsed:
    """The messages of an AWS event stream, up to a damaged one (`stream.eventstream`) or to
    one cut short by the end (`stream.truncated`)."""
    events, problem, cut = eventstream.read_whole(body)
    events = invoke.unwrap_events(events)  # a Bedrock `chunk`: the model's event it holds
    if problem is not None:
        return Parsed(events, (Violation("stream.eventstream", problem, len(events)),))
    message = "the stream ends inside a message (its bytes fall short of its length)"
    return Parsed(events, (Violation("stream.truncated", message, None),) if cut else ())


def _array_cut(body: bytes) -> str:
    """Why a JSON-array body is cut short ("" when its `]` closes it)."""
    parser = jsonarray.JSONArrayParser()
    parser.rows(body)
    return "" if parser.complete else "the stream ends before the `]` that closes its JSON array"


def _ends_mid_event(text: str) -> bool:
    # The lines after the last blank line never got dispatched; any field among them
    # (anything but a comment) means an event was started and not finished.
    *complete, partial = _EOL.split(text)
    tail = [partial]
    for line in reversed(complete):
        if not line:
            break
        tail.append(line)
    return any(line and not line.startswith(":") for line in tail)


class Report:
    """Violations collected while one dialect walks one stream."""

    def __init__(self, dialect: str) -> None:
        self.dialect = dialect
        self.violations: list[Violation] = []

    def add(self, rule: str, message: str, index: int | None = None) -> None:
        """Record that `rule` (without the dialect prefix) is broken at event `index`."""
        self.violations.append(Violation(f"{self.dialect}.{rule}", message, index))


def json_object(text: str) -> dict[str, object] | None:
    """`text` parsed, when it is a JSON object; else None.

    Text that cannot open an object (JSON allows only spaces, tabs and line breaks before
    its `{`) is not handed to the parser: its exception costs some microseconds, seconds
    over the million events of a long stream.
    """
    if not text.lstrip(" \t\n\r").startswith("{"):
        return None
    try:
        value = deep_json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def payload(event: EventLike, index: int, report: Report) -> dict[str, object] | None:
    """The event's data as a JSON object, or None (reported as `<dialect>.json`)."""
    value = json_object(event.data)
    if value is not None:
        return value
    report.add("json", f"the data is not a JSON object: {event.data[:60]!r}", index)
    return None


def payloads(events: Sequence[EventLike], report: Report) -> list[dict[str, object] | None]:
    """Each event's data as a JSON object, or None (reported as `<dialect>.json`)."""
    return [payload(event, index, report) for index, event in enumerate(events)]


def adds_up(usage: Mapping[str, object], part: str, other: str, total: str) -> bool:
    """Whether `usage[part] + usage[other] == usage[total]`, all of them integers."""
    counts = [usage.get(part), usage.get(other), usage.get(total)]
    ints = [count for count in counts if isinstance(count, int)]
    return len(ints) == 3 and ints[0] + ints[1] == ints[2]


@attrs.frozen
class Step:
    """One event of a synthetic stream before it is numbered, encoded and timed."""

    name: str
    payload: Mapping[str, object]
    is_delta: bool = False


def truncate(steps: Sequence[Step], ending: Step | None) -> tuple[list[Step], bool]:
    """The steps of a stream failing just after its middle delta, and whether it is cut.

    With `ending` (an in-band failure event) the stream ends with it; without, the next
    event is cut in half and the connection drops (see `build`).
    """
    deltas = [index for index, step in enumerate(steps) if step.is_delta]
    keep = deltas[(len(deltas) - 1) // 2] + 1 if deltas else 1
    if ending is None:
        return list(steps[: keep + 1]), True
    return [*steps[:keep], ending], False


def check_timing(ttft: float, tokens_per_second: float) -> None:
    """Raise ConfigurationError unless both are usable numbers."""
    if not 0 <= ttft <= MAX_SECONDS:
        raise ConfigurationError(
            f"ttft must be a number of seconds from 0 to {MAX_SECONDS:g} (a week), not {ttft!r}"
        )
    if not 0 < tokens_per_second < math.inf:
        raise ConfigurationError(
            f"tokens_per_second must be a positive number, not {tokens_per_second!r}"
        )


def check_failure(failure: str | None, allowed: Sequence[str | None]) -> None:
    """Raise ConfigurationError unless `failure` is one the dialect knows."""
    if failure not in allowed:
        names = ", ".join(repr(name) for name in allowed)
        raise ConfigurationError(f"failure must be one of {names}, not {failure!r}")


def build(
    request: Request,
    steps: Sequence[Step],
    encode: Callable[[int, Step], bytes],
    *,
    ttft: float,
    tokens_per_second: float,
    cut: bool = False,
    content_type: str = "text/event-stream; charset=utf-8",
) -> Interaction:
    """Encode and time `steps` (one chunk each) and pair them with `request`.

    The first chunk arrives at `ttft`; a delta `1 / tokens_per_second` after its
    predecessor, any other event a few milliseconds after. With `cut`, only the first half
    of the last event arrives and the body ends with a RemoteProtocolError. The response
    says `content_type` (SSE unless told).
    """
    check_timing(ttft, tokens_per_second)
    token_gap = 1 / tokens_per_second
    small_gap = min(SMALL_GAP, token_gap)
    chunks: list[Chunk] = []
    at = ttft
    for number, step in enumerate(steps):
        if number:
            at += token_gap if step.is_delta else small_gap
        if at + small_gap > MAX_SECONDS:  # a slow pace over many events (and a cut's end)
            raise ConfigurationError(
                f"the stream would last {at:g} s, past the {MAX_SECONDS:g} s (a week) a "
                "recording may: raise tokens_per_second"
            )
        chunks.append(Chunk(round(at, 6), encode(number, step)))
    end = StreamEnd(round(at, 6))
    if cut:
        last = chunks.pop()
        text = last.data.decode()  # cut between characters, as a server's write would
        chunks.append(Chunk(last.at, text[: len(text) // 2].encode()))
        end = StreamEnd(round(at + small_gap, 6), error=CUT_NAME, message=CUT_MESSAGE)
    response = Response(
        status=200,
        headers=[("content-type", content_type)],
        headers_at=round(min(ttft, small_gap), 6),
        chunks=chunks,
        end=end,
    )
    return Interaction(request, response)


def json_request(url: str, body: Mapping[str, object], headers: Mapping[str, str]) -> Request:
    """A POST of `body` as JSON, with the headers an SDK would send."""
    pairs = [("content-type", "application/json"), ("accept", "application/json")]
    pairs += headers.items()
    return Request(
        method="POST", url=url, headers=pairs, body=json.dumps(body, separators=(",", ":")).encode()
    )


def compact(payload: Mapping[str, object]) -> str:
    """`payload` on one line, compact, UTF-8 left unescaped: how the APIs send JSON."""
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False)


def sse(name: str | None, data: str) -> bytes:
    """One SSE event: an optional `event:` line, one `data:` line, the blank line."""
    head = f"event: {name}\n" if name is not None else ""
    return f"{head}data: {data}\n\n".encode()
