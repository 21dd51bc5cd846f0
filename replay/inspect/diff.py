"""`replay diff`: how two cassettes' streams differ, event by event, in text and in timing.

Interactions are paired by position (#0 with #0, #1 with #1, …). For each pair:

- the request: method and URL, and the body (compared as JSON when both bodies are JSON);
- the status, and how the body ended (`eof`, `truncated`, `closed after end`, or the
  transport error's name in the cassette's vocabulary, `replay.engine.ends`: an older
  recording's aiohttp or urllib3 name compares as the name it would be stored under now);
- the events: difflib over `(event name, data)` pairs, giving runs of events changed,
  removed or added (near-linear in place of difflib where it would be slow: events
  repeated by the thousand, see `replay.inspect.align`). Data that is JSON is compared without
  the fields every recording changes (`VOLATILE_FIELDS`: ids, timestamps, random padding,
  signatures), so that two recordings of one answer compare equal; `ignore_fields=()`
  compares it byte for byte;
- the texts: what the stream says, by dialect (text, reasoning or thinking, each tool call
  as `name(arguments)`), joined from its deltas;
- a WebSocket conversation's frames are its events (`replay.inspect.frames_view`: the
  direction and event type of each, its payload), compared as a stream's are, and what
  each turn's deltas say as its texts;
- the timing: time to the first event, total duration, median and largest gap between
  events, for A and for B.

Timing is summarised, never counted as a difference: two recordings of one answer differ in
timing every time, as they do in ids. `CassetteDiff.differs` is true when anything else
differs; `replay diff` exits 1 then, 0 otherwise. Headers are not compared (dates and
request ids always differ). The body of a response that is not a stream is compared as
bytes (decoded, if compressed). The text form is made by `format_diff` (in
`replay.inspect.diff_text`); the values both speak are in `replay.inspect.diff_values`.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Literal

import attrs

from replay import framing
from replay.dialects import closed_after_end
from replay.dialects.texts import stream_texts
from replay.engine.ends import CLOSED_AFTER_END, stored_name
from replay.inspect import align
from replay.inspect.diff_text import DATA_WIDTH as DATA_WIDTH
from replay.inspect.diff_text import format_diff
from replay.inspect.diff_values import CassetteDiff, EventChange, InteractionDiff, TextDiff, Timing
from replay.inspect.frames_view import frame_events, frame_texts
from replay.matching.keys import json_key
from replay.model import Interaction, Response, TimedEvent
from replay.store.cassette import Cassette

__all__ = [
    "HIDDEN",
    "VOLATILE_FIELDS",
    "CassetteDiff",
    "EventChange",
    "InteractionDiff",
    "TextDiff",
    "Timing",
    "diff",
    "diff_files",
    "format_diff",
    "pairs",
]

VOLATILE_FIELDS: frozenset[str] = frozenset(
    {
        "id",
        "item_id",
        "event_id",
        "response_id",
        "call_id",
        "created",
        "created_at",
        "system_fingerprint",
        "obfuscation",
        "signature",
    }
)
"""JSON keys `diff` does not compare by default: ids, timestamps, random padding and
signatures, which differ between any two recordings of the same answer."""
HIDDEN = "*"
"""What an ignored field's value shows as."""

# --- comparing ----------------------------------------------------------------------------


def diff_files(
    a: str | Path, b: str | Path, *, ignore_fields: Collection[str] = VOLATILE_FIELDS
) -> CassetteDiff:
    """Compare the cassettes in files `a` and `b` (see `diff`).

    Raises:
        FileNotFoundError: a file does not exist.
        CassetteFormatError: a file is not a cassette this version reads.
    """
    return diff(Cassette.load(a), Cassette.load(b), ignore_fields=ignore_fields)


def diff(
    a: Cassette, b: Cassette, *, ignore_fields: Collection[str] = VOLATILE_FIELDS
) -> CassetteDiff:
    """Compare cassettes `a` and `b`, interaction by interaction, in order.

    Args:
        a, b: the cassettes.
        ignore_fields: JSON keys whose values are not compared, at any depth of an event's
            data (they show as "…"); pass () to compare the data byte for byte.
    """
    ignore = frozenset(ignore_fields)
    return CassetteDiff(
        tuple(_diff_pair(index, one, other, ignore) for index, one, other in pairs(a, b))
    )


def pairs(a: Cassette, b: Cassette) -> list[tuple[int, Interaction | None, Interaction | None]]:
    """The interactions of `a` and `b` as `diff` pairs them: `(index, a's, b's)` for each
    position, None where one cassette has fewer interactions."""
    count = max(len(a.interactions), len(b.interactions))
    return [
        (index, _at(a.interactions, index), _at(b.interactions, index)) for index in range(count)
    ]


def _at(interactions: Sequence[Interaction], index: int) -> Interaction | None:
    return interactions[index] if index < len(interactions) else None


def _diff_pair(
    index: int, a: Interaction | None, b: Interaction | None, ignore: frozenset[str]
) -> InteractionDiff:
    if a is None or b is None:
        return InteractionDiff(index=index, a=a, b=b)
    events_a, events_b = _events_of(a), _events_of(b)
    notes = [*_request_notes(a, b), *_response_notes(a, b)]
    if events_a is None or events_b is None:
        body_a, body_b = _body(a.response), _body(b.response)
        if body_a != body_b:
            notes.append(f"body differs: {len(body_a)} bytes in A, {len(body_b)} in B")
    compared = _Compared(ignore)
    compared_a = [compared.event(event) for event in events_a or ()]
    compared_b = [compared.event(event) for event in events_b or ()]
    return InteractionDiff(
        index=index,
        a=a,
        b=b,
        notes=tuple(notes),
        events_a=tuple(compared_a),
        events_b=tuple(compared_b),
        changes=_event_changes(compared_a, compared_b),
        texts=_text_diffs(_texts(a, events_a), _texts(b, events_b)),
        timing_a=_timing(a, events_a),
        timing_b=_timing(b, events_b),
    )


class _Compared:
    """Events as compared: the values of `ignore`d keys of their JSON data hidden, the data
    re-encoded. Each distinct data is worked out once (a long stream repeats many)."""

    def __init__(self, ignore: frozenset[str]) -> None:
        self._ignore = ignore
        self._data: dict[str, str] = {}

    def event(self, event: TimedEvent) -> TimedEvent:
        """`event` as compared (itself when its data stays as it is)."""
        if not self._ignore:
            return event
        data = self._data.get(event.data)
        if data is None:
            data = self._data[event.data] = self._without(event.data)
        if data == event.data:
            return event
        return TimedEvent(at=event.at, event=event.event, data=data, id=event.id, retry=event.retry)

    def _without(self, data: str) -> str:
        if data.lstrip(" \t\n\r")[:1] not in _JSON_STARTS:
            return data  # no JSON value: spare the parser's exception
        try:
            value = json.loads(data)
            return json.dumps(_hide(value, self._ignore), ensure_ascii=False, separators=(",", ":"))
        except (ValueError, RecursionError):  # not JSON, or nested past the parser: as text
            return data


# What a JSON value can start with (Python's json reads NaN and Infinity too); "" is none.
_JSON_STARTS = frozenset('{["-0123456789tfnNI')


def _hide(value: object, ignore: frozenset[str]) -> object:
    if isinstance(value, dict):
        return {k: HIDDEN if k in ignore else _hide(v, ignore) for k, v in value.items()}
    if isinstance(value, list):
        return [_hide(item, ignore) for item in value]
    return value


def _event_changes(a: Sequence[TimedEvent], b: Sequence[TimedEvent]) -> tuple[EventChange, ...]:
    # difflib's runs while they are cheap; near-linear ones for long repetitive streams.
    return tuple(
        EventChange(_KINDS[tag], a_start, a_end, b_start, b_end)
        for tag, a_start, a_end, b_start, b_end in align.opcodes(_keys(a), _keys(b))
        if tag != "equal"
    )


def _text_diffs(a: Mapping[str, str], b: Mapping[str, str]) -> tuple[TextDiff, ...]:
    names = {**a, **b}  # A's order, then what only B says
    return tuple(
        TextDiff(name, a.get(name, ""), b.get(name, ""))
        for name in names
        if a.get(name, "") != b.get(name, "")
    )


_KINDS: dict[str, Literal["changed", "removed", "added"]] = {
    "replace": "changed",
    "delete": "removed",
    "insert": "added",
}


def _timing(interaction: Interaction, events: list[TimedEvent] | None) -> Timing:
    timing = Timing.of(interaction.response, events)
    if interaction.frames:  # a conversation lasts until its last frame
        return attrs.evolve(timing, total=max(timing.total, interaction.frames[-1].at))
    return timing


def _texts(interaction: Interaction, events: list[TimedEvent] | None) -> dict[str, str]:
    if interaction.frames is not None:
        return frame_texts(interaction.frames)
    return stream_texts(events or [])


def _events_of(interaction: Interaction) -> list[TimedEvent] | None:
    """The events of a stream, or a WebSocket conversation's frames as events
    (`replay.inspect.frames_view`: direction and type, payload)."""
    if interaction.frames is not None:
        return frame_events(interaction.frames)
    return _events(interaction.response)


def _events(response: Response) -> list[TimedEvent] | None:
    """The events of a stream (SSE or NDJSON); None for a response that is not one, or
    does not decode."""
    kind = framing.detect(response)
    if kind is None:
        return None
    try:
        return framing.events(response, kind)
    except ValueError:
        return None


def _keys(events: Sequence[TimedEvent]) -> list[tuple[str, str]]:
    return [(event.event, event.data) for event in events]


def _body(response: Response) -> bytes:
    try:
        return b"".join(data for _, data in response.decoded_chunks())
    except ValueError:
        return response.body


def _request_notes(a: Interaction, b: Interaction) -> list[str]:
    notes = []
    line_a = f"{a.request.method} {a.request.url}"
    line_b = f"{b.request.method} {b.request.url}"
    if line_a != line_b:
        notes.append(f"request: {line_a} in A, {line_b} in B")
    if json_key(a.request.body) != json_key(b.request.body):  # as matching compares them
        notes.append("request body differs")
    return notes


def _response_notes(a: Interaction, b: Interaction) -> list[str]:
    notes = []
    if a.response.status != b.response.status:
        notes.append(f"status: {a.response.status} in A, {b.response.status} in B")
    if _end_name(a) != _end_name(b):
        notes.append(f"end: {_end_name(a)} in A, {_end_name(b)} in B")
    return notes


def _end_name(interaction: Interaction) -> str:
    end = interaction.response.end
    if end.error is not None:
        return stored_name(end.error)
    if end.truncated:
        return CLOSED_AFTER_END if closed_after_end(interaction) else "truncated"
    return "eof"
