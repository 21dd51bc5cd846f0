"""Sans-IO, incremental parser for newline-delimited JSON streams (NDJSON, JSON Lines).

The framing of Ollama's `/api/chat` and `/api/generate` and of other line-delimited JSON
APIs: each line is one JSON value, one event. Bytes are cut at LF (a CR before it is
dropped); only the trailing partial line is kept, as a list of pieces joined once when its
LF arrives, so total work stays linear however the stream is chunked. A line is decoded as
UTF-8 only when whole (LF never occurs inside a multi-byte character), so a character split
across `feed()` calls decodes whole. Blank lines are skipped. Unlike SSE, a last line without
its LF is still an event: `close()` returns it (JSON Lines allows it).

Each line becomes a `replay.framing.sse.Event` whose `data` is the line and whose `event` name says
what the line is (`event_name`): its JSON `type` when it has one, `done` for a final line
(`"done": true`, as Ollama ends), else `message`.

A recorded stream is read whole by `scan` (the body cut at every LF at once, each line read
as `feed()` reads it), each event tagged with the number of its LF; `line_ends` says which
chunk holds each LF.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from replay.framing.bulk import building
from replay.framing.sse import Event, Row, _segments
from replay.redact import deep_json

__all__ = ["NDJSONParser", "event_name", "line_ends", "parse", "scan"]

_BOM = "\ufeff"


def event_name(line: str) -> str:
    """The name an NDJSON line's event gets: its JSON `type`, `done`, or `message`."""
    try:
        value = deep_json.loads(line)
    except ValueError:
        return "message"
    if not isinstance(value, dict):
        return "message"
    kind = value.get("type")
    if isinstance(kind, str) and kind:
        return kind
    return "done" if value.get("done") is True else "message"


class NDJSONParser:
    """Incremental NDJSON parser: `feed()` bytes, get back the events (lines) they complete.

    One parser reads one stream; call `close()` at end of stream.
    """

    def __init__(self) -> None:
        self._pending: list[bytes] = []  # pieces of the current, unterminated line
        self._started = False  # True once the first line (maybe opening with a BOM) was read
        self._closed = False

    def feed(self, data: bytes) -> list[Event]:
        """Consume the next chunk of the stream; return the events it completes, in order."""
        if self._closed:
            raise RuntimeError("feed() called after close()")
        events: list[Event] = []
        start = 0
        while (end := data.find(b"\n", start)) != -1:
            line = data[start:end]
            if self._pending:
                self._pending.append(line)
                line = b"".join(self._pending)
                self._pending.clear()
            self._line(line, events)
            start = end + 1
        if start < len(data):
            self._pending.append(data[start:])
        return events

    def close(self) -> list[Event]:
        """Signal end of stream: the last line, if it had no LF, is returned. Idempotent."""
        events: list[Event] = []
        if not self._closed:
            self._closed = True
            if self._pending:
                line = b"".join(self._pending)
                self._pending.clear()
                self._line(line, events)
        return events

    def _line(self, raw: bytes, events: list[Event]) -> None:
        text = _text(raw, first=not self._started)
        self._started = True
        if text is not None:
            events.append(Event(event=event_name(text), data=text))


def _text(raw: bytes, *, first: bool) -> str | None:
    """A line's text (its CR dropped, a BOM opening the stream too); None for a blank line."""
    text = raw.decode("utf-8", errors="replace")
    if first:
        text = text.removeprefix(_BOM)
    text = text.removesuffix("\r")
    return text if text.strip() else None


def scan(pieces: Sequence[bytes]) -> list[Row]:
    """Read a complete stream, given as its chunks, at once: every event (line), each with
    the number of the LF that ended it (a last line without one: the number of LFs, past
    every chunk in `line_ends`). What `NDJSONParser` gives fed the same chunks, then closed.
    """
    rows: list[Row] = []
    first = 0
    with building():
        for segment in _segments(pieces):  # (each but the last ends with an LF)
            lines = segment.split(b"\n")
            for number, raw in enumerate(lines, first):
                text = _text(raw, first=number == 0)
                if text is not None:
                    rows.append((number, event_name(text), text, "", None))
            first += len(lines) - 1  # the "" after a segment's last LF is no line
    return rows


def line_ends(pieces: Sequence[bytes]) -> list[int]:
    """How many LFs the stream holds by the end of each of its chunks: the LF numbered `n`
    by `scan` is in chunk `bisect_right(line_ends(pieces), n)`."""
    return list(itertools.accumulate(map(bytes.count, pieces, itertools.repeat(b"\n"))))


def parse(data: bytes) -> list[Event]:
    """Parse a complete stream at once: feed everything, then close."""
    rows = scan([data])
    with building():
        return [Event(*row[1:]) for row in rows]
