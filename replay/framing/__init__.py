"""Whether a response is a stream, in which framing, and its timed events: decided here only.

A framing is how a body is cut into events: `sse` (Server-Sent Events, `replay.framing.sse`),
`ndjson` (one JSON value per line, `replay.framing.ndjson`) or `json-array` (one JSON array
whose objects arrive one after another, Gemini's `streamGenerateContent` without `alt=sse`:
`replay.framing.jsonarray`) or `eventstream` (AWS's binary messages, Bedrock's
`ConverseStream`: `replay.framing.eventstream`, found by its content type, or by a first
prelude whose CRC matches; an `InvokeModelWithResponseStream` `chunk` is read as the
model's event it holds, `replay.framing.invoke`). `detect` asks the content type first;
when it names neither SSE nor NDJSON (missing, as some recorders strip headers, plain
`application/json`, or wrong), it looks at the start of the decoded body: SSE field lines
that make an event, lines that are each a JSON object (two at least, so that a one-line JSON
answer is not a stream), or a `[` opening two objects at least (so that a JSON answer holding
one object in an array is not a stream: a one-element Gemini array is read as a plain
answer).

`replay show`, `replay diff`, `Response.events()` and `replay.inspect.timing` all go through
here, so they agree on what a stream is and how many events it has.
"""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from replay.framing import eventstream, invoke, jsonarray, ndjson, sse
from replay.framing.bulk import building
from replay.framing.decoding import Body, decoded_chunks, encodings
from replay.redact import deep_json

if TYPE_CHECKING:
    from replay.framing.timed_event import TimedEvent

__all__ = [
    "NDJSON_TYPES",
    "SNIFF_BYTES",
    "SSE_TYPES",
    "Framing",
    "Parser",
    "count",
    "detect",
    "events",
    "framing_of_type",
    "is_stream",
    "parser",
    "sniff",
]

Framing = Literal["sse", "ndjson", "json-array", "eventstream"]
Parser = (
    sse.SSEParser | ndjson.NDJSONParser | jsonarray.JSONArrayParser | eventstream.EventStreamParser
)

#: Content types (without parameters, lowercase) that declare each framing.
SSE_TYPES: frozenset[str] = frozenset({"text/event-stream"})
NDJSON_TYPES: frozenset[str] = frozenset(
    {
        "application/x-ndjson",
        "application/ndjson",
        "application/jsonl",
        "application/x-jsonl",
        "application/jsonlines",
        "application/x-jsonlines",
        "application/json-lines",
    }
)
#: How much of a decoded body `detect` looks at when the content type does not decide.
SNIFF_BYTES = 64 * 1024

_SSE_FIELD = re.compile(r"(?:data|event|id|retry)(?::|$)")
_NDJSON_LINES = 2  # complete lines that must each be a JSON object


def framing_of_type(content_type: str | None) -> Framing | None:
    """The framing a Content-Type header declares, or None."""
    media_type = (content_type or "").split(";")[0].strip().lower()
    if media_type in SSE_TYPES:
        return "sse"
    if media_type in NDJSON_TYPES:
        return "ndjson"
    if media_type == eventstream.CONTENT_TYPE:
        return "eventstream"
    return None


def detect(response: Body) -> Framing | None:
    """The framing of `response`'s body: by its content type, else by how the body starts.

    None for a response that is not a stream, and for a body that cannot be decoded when
    its content type does not say it is a stream.
    """
    declared = framing_of_type(response.header("content-type"))
    if declared is not None or not response.chunks:
        return declared
    try:
        return sniff(_head(response))
    except ValueError:  # damaged, unknown or oversized encoding: nothing to tell from
        return None


def is_stream(response: Body) -> bool:
    """Whether `response` is a stream of events (SSE, NDJSON or a JSON array); see `detect`."""
    return detect(response) is not None


def _head(response: Body) -> bytes:
    pieces: list[bytes] = []
    size = 0
    for _, data in decoded_chunks(response):
        pieces.append(data)
        size += len(data)
        if size >= SNIFF_BYTES:
            break
    return b"".join(pieces)[:SNIFF_BYTES]


def sniff(head: bytes) -> Framing | None:
    """The framing the start of a decoded body shows, or None."""
    if eventstream.is_prelude(head):
        return "eventstream"
    text = head.decode("utf-8", errors="replace").removeprefix("\ufeff")
    lines = [line for line in re.split(r"\r\n?|\n", text) if line.strip()]
    if not lines:
        return None
    first = lines[0]
    if (first.startswith(":") or _SSE_FIELD.match(first)) and sse.parse(head):
        return "sse"
    if first.startswith("[") and _array_of_objects(head):
        return "json-array"
    complete = text.count("\n")  # lines after the last LF may be cut by SNIFF_BYTES
    if complete >= _NDJSON_LINES and all(map(_is_object, lines[:_NDJSON_LINES])):
        return "ndjson"
    return None


def _is_object(line: str) -> bool:
    try:
        return isinstance(deep_json.loads(line), dict)
    except ValueError:
        return False


def _array_of_objects(head: bytes) -> bool:
    """Whether `head` opens a JSON array whose first two elements are objects."""
    elements = jsonarray.parse(head)
    return len(elements) >= _NDJSON_LINES and all(
        _is_object(event.data) for event in elements[:_NDJSON_LINES]
    )


def parser(framing: Framing) -> Parser:
    """A new incremental parser for `framing`."""
    if framing == "json-array":
        return jsonarray.JSONArrayParser()
    if framing == "eventstream":
        return eventstream.EventStreamParser()
    return sse.SSEParser() if framing == "sse" else ndjson.NDJSONParser()


def events(response: Body, framing: Framing | None = None) -> list[TimedEvent]:
    """The body's events, each at the arrival time of the chunk that completed it.

    Args:
        response: the response; a compressed body (Content-Encoding) is decoded first.
        framing: how to cut the body; by default `detect`'s answer, and SSE when it has
            none (a body that is no event stream then has no events).

    Raises:
        DecodingError: (a ValueError) the body cannot be decoded, or decodes past the limit.
        EventStreamError: (a ValueError) an event stream's CRC or lengths are damaged.
    """
    chosen = framing or detect(response) or "sse"
    times, pieces = _columns(response)
    # The body is read whole (`scan`), then each event is given the time of the chunk that
    # holds the line ending completing it: what a parser fed chunk by chunk would tell,
    # without a Python call per chunk.
    if chosen == "json-array":
        return _timed(jsonarray.scan(pieces), jsonarray.byte_ends(pieces), times, response.end.at)
    if chosen == "eventstream":  # a Bedrock `chunk` read as the model's event it holds
        rows = invoke.unwrap(eventstream.scan(pieces))
        return _timed(rows, jsonarray.byte_ends(pieces), times, response.end.at)
    module = sse if chosen == "sse" else ndjson
    return _timed(module.scan(pieces), module.line_ends(pieces), times, response.end.at)


def count(response: Body, framing: Framing | None = None) -> int:
    """How many events `events` gives, without making them (`replay show`'s column).

    Raises:
        DecodingError: (a ValueError) as `events` raises it.
    """
    chosen = framing or detect(response) or "sse"
    module = {"sse": sse, "ndjson": ndjson, "json-array": jsonarray, "eventstream": eventstream}[
        chosen
    ]
    return len(module.scan(_columns(response)[1]))


def _columns(response: Body) -> tuple[Sequence[float], Sequence[bytes]]:
    """The decoded body's pieces and the time of each (see `decoded_chunks`)."""
    if not encodings(response):
        return response.chunks.times, response.chunks.payloads
    pairs = list(decoded_chunks(response))
    return [at for at, _ in pairs], [data for _, data in pairs]


def _timed(
    rows: list[sse.Row], ends: list[int], times: Sequence[float], end_at: float
) -> list[TimedEvent]:
    from replay.framing.timed_event import TimedEvent

    # Each row's chunk, then its time, in C-level passes (a line ending past every chunk:
    # the end of the body, as `close()` would give it).
    lines = [row[0] for row in rows]
    chunks = map(bisect.bisect_right, itertools.repeat(ends), lines)
    ats = map([*times, end_at].__getitem__, chunks)
    with building():
        return [
            TimedEvent(at=at, event=kind, data=data, id=event_id, retry=retry)
            for at, (_, kind, data, event_id, retry) in zip(ats, rows, strict=True)
        ]
