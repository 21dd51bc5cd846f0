"""Sans-IO, incremental parser for Server-Sent Events (WHATWG HTML, "event stream interpretation").

Design: bytes go through an incremental UTF-8 decoder (errors="replace"), so a multi-byte
character split across ``feed()`` calls decodes whole. The decoded text is cut into lines
with one C-level regex split; only the trailing partial line is kept, as a list of pieces
joined once when its terminator arrives, so total work stays linear however the stream is
chunked. A CR ends its line at once (an event it completes is returned by that very
``feed()``); ``_skip_lf`` then swallows an LF opening the next chunk, so a CRLF split
across two chunks is still one line ending. Each complete line is interpreted exactly as
the spec says; nothing is ever held back once its terminator has been seen.

A recorded stream is read whole by ``scan``: the body decoded and cut into lines at once,
the lines interpreted by the same loop as ``feed()``'s, and each event tagged with the
number of the line ending that dispatched it; ``line_ends`` counts the line endings each
chunk begins, which is all that is needed to know which chunk completed each event. (The
chunk-by-chunk parser would cost a Python call per chunk: seconds for a million chunks.)
"""

from __future__ import annotations

import codecs
import itertools
import re
from collections.abc import Iterator, Sequence

import attrs

from replay.framing.bulk import building

__all__ = ["Event", "Row", "SSEParser", "line_ends", "parse", "scan"]

_EOL = re.compile(r"\r\n?|\n")
_BOM = "\ufeff"

#: An event as ``scan`` gives it: the number of the line ending that dispatched it
#: (0-based, counting every line ending of the stream), then its type, data, id and retry.
Row = tuple[int, str, str, str, int | None]


@attrs.frozen
class Event:
    """One dispatched server-sent event.

    ``id`` is the last event ID buffer at dispatch time (it persists across events);
    ``retry`` is the value set by a valid ``retry:`` field in this event's block, else None.
    """

    event: str = "message"
    data: str = ""
    id: str = ""
    retry: int | None = None


#: The most digits a `retry:` field may have to be used; the spec says to ignore a field a
#: client cannot use, and Python refuses to convert strings of over 4,300 digits.
_RETRY_DIGITS = 18


class SSEParser:
    """Incremental event-stream parser: ``feed()`` bytes, get back the events they complete.

    One parser interprets one stream; call ``close()`` at end of stream.
    """

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._started = False  # True once the first character (maybe a BOM) was seen
        self._closed = False
        self._skip_lf = False  # previous chunk ended with CR: drop one LF opening the next
        self._pending: list[str] = []  # pieces of the current, unterminated line
        self._data: list[str] = []  # data field values of the current block
        self._event_type = ""
        self._last_id_buffer = ""
        self._last_event_id = ""
        self._retry: int | None = None

    @property
    def last_event_id(self) -> str:
        """The spec's "last event ID string": the last event ID buffer as of the last
        blank line (what a client would send as ``Last-Event-ID`` when reconnecting)."""
        return self._last_event_id

    def feed(self, data: bytes) -> list[Event]:
        """Consume the next chunk of the stream; return the events it completes, in order."""
        if self._closed:
            raise RuntimeError("feed() called after close()")
        text = self._decoder.decode(data)
        if not text:
            return []
        if not self._started:
            self._started = True
            text = text.removeprefix(_BOM)
        if self._skip_lf and text:
            self._skip_lf = False
            text = text.removeprefix("\n")
        if not text:
            return []
        lines = _EOL.split(text)
        partial = lines.pop()  # "" when the text ends with a line ending
        if lines and self._pending:
            self._pending.append(lines[0])
            lines[0] = "".join(self._pending)
            self._pending.clear()
        if partial:
            self._pending.append(partial)
        else:
            self._skip_lf = text.endswith("\r")
        return [Event(*row[1:]) for row in self._interpret(lines)]

    def close(self) -> list[Event]:
        """Signal end of stream. Any incomplete line and undispatched event are discarded,
        as the spec requires, so this returns ``[]``. Idempotent."""
        if not self._closed:
            self._closed = True
            self._decoder.decode(b"", final=True)
            self._pending.clear()
            self._data.clear()
            self._event_type = ""
            self._retry = None
        return []

    def _interpret(self, lines: list[str], first: int = 0) -> list[Row]:
        """Interpret complete `lines`, in order; the events their blank lines dispatch
        (each with the number of its line, counted from `first`).

        The hot loop of reading a recorded stream: the state is kept in locals, and the
        usual lines (`data:` and blank) are taken first, inline.
        """
        rows: list[Row] = []
        data = self._data
        kind, retry = self._event_type, self._retry
        for number, line in enumerate(lines, first):
            if not line:  # a blank line: dispatch the block
                self._last_event_id = self._last_id_buffer
                if data:
                    rows.append(
                        (number, kind or "message", "\n".join(data), self._last_id_buffer, retry)
                    )
                    data.clear()
                kind, retry = "", None
            elif line.startswith("data:"):
                data.append(line[6:] if line[5:6] == " " else line[5:])
            elif line[0] != ":":  # (a comment is ignored)
                kind, retry = self._field(line, kind, retry)
        self._event_type, self._retry = kind, retry
        return rows

    def _field(self, line: str, kind: str, retry: int | None) -> tuple[str, int | None]:
        """Apply a field line other than `data:`; the block's event type and retry after it."""
        name, colon, value = line.partition(":")
        if colon and value[:1] == " ":
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            kind = value
        elif name == "id":
            if "\0" not in value:  # an id containing NULL is ignored
                self._last_id_buffer = value
        elif (
            name == "retry" and value.isascii() and value.isdigit() and len(value) <= _RETRY_DIGITS
        ):
            retry = int(value)  # (a longer one is a value no client can use: ignored)
        # any other field name is ignored
        return kind, retry


def scan(pieces: Sequence[bytes]) -> list[Row]:
    """Read a complete stream, given as its chunks, at once: every event it dispatches,
    each with the number of the line ending that dispatched it (see `line_ends` for the
    chunk that line ending is in). What `SSEParser` gives fed the same chunks, then closed.
    """
    parser = SSEParser()
    rows: list[Row] = []
    first = 0
    with building():
        for number, segment in enumerate(_segments(pieces)):
            text = segment.decode("utf-8", errors="replace")
            text = text if number else text.removeprefix(_BOM)
            lines = _EOL.split(text) if "\r" in text else text.split("\n")
            lines.pop()  # "" after a segment's last LF; at the end, the unterminated line
            rows += parser._interpret(lines, first)
            first += len(lines)
    return rows


def _segments(pieces: Sequence[bytes], size: int = 1 << 20) -> Iterator[bytes]:
    """The stream in segments of about `size` bytes or more, each cut just after an LF: no
    line ending and no character is cut in two (an LF is one byte, never inside a UTF-8
    character), so each decodes as it would in the whole; and only one segment's bytes,
    text and lines are held at a time, never the whole body joined."""
    held: list[bytes] = []
    count = 0
    for piece in pieces:
        held.append(piece)
        count += len(piece)
        if count >= size and b"\n" in piece:
            joined = b"".join(held)
            cut = joined.rfind(b"\n") + 1
            yield joined[:cut]
            rest = joined[cut:]  # (part of this piece only: no byte is joined a third time)
            held, count = [rest], len(rest)
    yield b"".join(held)


def line_ends(pieces: Sequence[bytes]) -> list[int]:
    """How many line endings the stream has begun by the end of each of its chunks.

    The line ending numbered `n` by `scan` is in chunk `bisect_right(line_ends(pieces), n)`.
    A line ending is an LF, a CR, or a CR LF (one, even when its CR ends one chunk and
    its LF opens a later one). These are ASCII bytes, which UTF-8 never uses inside a
    character, so they are counted in the raw bytes.
    """
    lf = b"\n"
    counts = list(map(bytes.count, pieces, itertools.repeat(lf)))
    if any(map(bytes.__contains__, pieces, itertools.repeat(b"\r"))):
        counts = [
            lfs + piece.count(b"\r") - piece.count(b"\r\n")
            for lfs, piece in zip(counts, pieces, strict=True)
        ]
        for index in itertools.compress(
            range(len(pieces)), map(bytes.startswith, pieces, itertools.repeat(lf))
        ):
            if _byte_before(pieces, index) == b"\r":
                counts[index] -= 1  # the LF of a CR LF split between two chunks
    return list(itertools.accumulate(counts))


def _byte_before(pieces: Sequence[bytes], index: int) -> bytes:
    """The last byte of the stream before chunk `index` (b"" at its start). (Each call
    looks back over the empty chunks since the last one that is not: linear in all.)"""
    for earlier in range(index - 1, -1, -1):
        if pieces[earlier]:
            return pieces[earlier][-1:]
    return b""


def parse(data: bytes) -> list[Event]:
    """Parse a complete stream at once: what `SSEParser` gives fed it, then closed."""
    rows = scan([data])
    with building():
        return [Event(*row[1:]) for row in rows]
