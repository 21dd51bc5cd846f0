"""Sans-IO, incremental parser for a stream sent as one JSON array of objects.

The framing of Gemini's `streamGenerateContent` without `alt=sse` (and of Google's other
REST streams): the body is `[`, then objects separated by commas (`[{...},\\r\\n{...}]`),
then `]`, each object an event, split anywhere across chunks. The parser keeps only the
bytes of the element being read, as a list of pieces joined once when it is whole, so
memory is bounded by the largest element and total work is linear however the stream is
chunked. Only ASCII bytes (brackets, braces, quotes, backslashes, commas) steer it, so it
reads the raw bytes: a multi-byte character split across `feed()` calls is decoded whole,
with its element. An element whole inside one chunk is read by the C JSON decoder at once;
one split across chunks, bracket by bracket (a whole string at a time).

An object or array element is an event as soon as its closing bracket arrives (what a
streaming JSON reader sees); any other value (a string, a number) when the comma or `]`
after it does. An element cut short by the end of the stream is no event (`close()`
returns nothing), and `complete` says whether the array was closed. A body that does not
open with `[` (after white space and a byte-order mark) has no events.

Each element becomes a `replay.framing.sse.Event` whose `data` is the element's text
(white space around it dropped) and whose `event` is named as an NDJSON line's is
(`replay.framing.ndjson.event_name`: its JSON `type`, else `message`).

A recorded stream is read whole by `scan`, each event tagged with the offset of the byte
that completed it; `byte_ends` says which chunk holds each offset.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Sequence

from replay.framing.bulk import building
from replay.framing.ndjson import event_name
from replay.framing.sse import Event, Row

__all__ = ["JSONArrayParser", "byte_ends", "parse", "scan"]

# What steers the parser outside strings: a whole string at once (skipped in C), else a
# bracket, a brace, a comma, or the quote opening a string that goes on past the chunk.
_OUTSIDE = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{},"]', re.DOTALL)
_INSIDE = re.compile(rb'["\\]')  # what ends or escapes inside a string
_SPACE = b" \t\r\n"
_NEXT = re.compile(r"[ \t\r\n]*(?=[\[{])")  # white space before a container
_DECODER = json.JSONDecoder()
_BOM = b"\xef\xbb\xbf"


class JSONArrayParser:
    """Incremental JSON-array parser: `feed()` bytes, get back the events they complete.

    One parser reads one stream; call `close()` at end of stream.
    """

    def __init__(self) -> None:
        self._phase = "before"  # "before" the `[`, "inside" the array, "after" its `]`
        self._head = b""  # bytes seen before the `[` (a BOM may be split)
        self._depth = 0  # nesting, the array itself being 1
        self._in_string = False
        self._escape = False  # the byte before was a backslash inside a string
        self._pending: list[bytes] = []  # pieces of the current element
        self._holding = False  # the current element is held (not yet an event)
        self._offset = 0  # bytes fed before the current chunk
        self._closed = False

    @property
    def complete(self) -> bool:
        """Whether the array's closing `]` has been read."""
        return self._phase == "after"

    @property
    def is_array(self) -> bool:
        """False once the body has shown it does not open with `[`."""
        return self._phase != "broken"

    def feed(self, data: bytes) -> list[Event]:
        """Consume the next chunk of the stream; return the events it completes, in order."""
        if self._closed:
            raise RuntimeError("feed() called after close()")
        return [Event(*row[1:]) for row in self.rows(data)]

    def close(self) -> list[Event]:
        """Signal end of stream: an element cut short is dropped, so this returns `[]`.
        Idempotent."""
        self._closed = True
        self._pending.clear()
        return []

    def rows(self, data: bytes) -> list[Row]:
        """`feed`'s events as rows, each with the stream offset of the byte completing it."""
        rows: list[Row] = []
        base, self._offset = self._offset, self._offset + len(data)
        position = 0
        if self._phase == "before":
            position = self._open(data)
        if self._phase != "inside":
            return rows
        start = position  # where the held part of this chunk begins
        size = len(data)
        text: str | None = None
        while position < size:
            if self._in_string:
                position = self._string(data, position)
                continue
            if self._holding and self._depth == 1:  # an element may start here
                text = data.decode("latin-1") if text is None else text
                end = _whole_container(text, position)
                if end is not None:  # an object or array, whole in this chunk
                    self._emit(data[start:end], base + end - 1, rows)
                    position = end
                    continue
            found = _OUTSIDE.search(data, position)
            if found is None:
                break
            at, position = found.span()
            byte = data[at]
            if byte == 0x22:  # '"': a whole string, or one cut by the chunk's end
                self._in_string = position - at == 1
            elif byte in b"[{":
                self._depth += 1
            elif byte in b"]}":
                self._depth -= 1
                if self._depth == 1 and self._holding:  # a container element closes
                    self._emit(data[start:position], base + at, rows)
                elif self._depth == 0:  # the array closes
                    self._end_scalar(data[start:at], base + at, rows)
                    self._phase = "after"
                    return rows
            elif byte == 0x2C and self._depth == 1:  # ',' between elements
                self._end_scalar(data[start:at], base + at, rows)
                self._holding, start = True, position
        if self._holding:
            self._pending.append(data[start:])
        return rows

    def _open(self, data: bytes) -> int:
        """Read up to the array's `[`; the position in `data` after it (or its end)."""
        held = len(self._head)
        head = self._head + data
        text = head.lstrip(_SPACE)
        if text.startswith(_BOM):
            text = text[len(_BOM) :].lstrip(_SPACE)
        if not text or _BOM.startswith(text):  # nothing yet, or a BOM cut short
            self._head = text
            return len(data)
        if text[:1] != b"[":
            self._phase = "broken"
            return len(data)
        self._phase, self._depth, self._holding, self._head = "inside", 1, True, b""
        return len(head) - len(text) + 1 - held

    def _string(self, data: bytes, position: int) -> int:
        """Go on through a string from `position`; the position after what was read."""
        if self._escape:
            self._escape = False
            return position + 1
        found = _INSIDE.search(data, position)
        if found is None:
            return len(data)
        if data[found.start()] == 0x22:
            self._in_string = False
        else:
            self._escape = True
        return found.end()

    def _emit(self, tail: bytes, offset: int, rows: list[Row]) -> None:
        self._pending.append(tail)
        raw = b"".join(self._pending)
        self._pending.clear()
        self._holding = False
        text = raw.decode("utf-8", errors="replace").strip(" \t\r\n")
        if text:
            rows.append((offset, event_name(text), text, "", None))

    def _end_scalar(self, tail: bytes, offset: int, rows: list[Row]) -> None:
        """A `,` or `]` ends the element held (one not closed by a bracket): an event
        unless it is only white space."""
        if self._holding:
            self._emit(tail, offset, rows)


def _whole_container(text: str, position: int) -> int | None:
    """Where the object or array opening at `position` (after white space) ends, when it is
    whole and valid JSON in `text` (a chunk read as Latin-1: one character per byte, so the
    offsets are the bytes'); None otherwise (the scanner then reads it piece by piece). The
    fast path: the C decoder reads a whole element at once."""
    found = _NEXT.match(text, position)
    if found is None:
        return None
    try:
        return _DECODER.raw_decode(text, found.end())[1]
    except (ValueError, RecursionError):  # nested past the C decoder's stack: piece by piece
        return None


def scan(pieces: Sequence[bytes]) -> list[Row]:
    """Read a complete stream, given as its chunks, at once: every event, each with the
    offset of the byte completing it (see `byte_ends`). What `JSONArrayParser` gives fed the
    same chunks, then closed."""
    parser = JSONArrayParser()
    rows: list[Row] = []
    with building():
        for piece in pieces:
            rows += parser.rows(piece)
    return rows


def byte_ends(pieces: Sequence[bytes]) -> list[int]:
    """How many bytes the stream holds by the end of each chunk: the byte at offset `n` is
    in chunk `bisect_right(byte_ends(pieces), n)`."""
    return list(itertools.accumulate(map(len, pieces)))


def parse(data: bytes) -> list[Event]:
    """Parse a complete stream at once: feed everything, then close."""
    rows = scan([data])
    with building():
        return [Event(*row[1:]) for row in rows]
