"""Where a body's events end, in raw body bytes, whatever its framing: the one answer that
faults and every counter of events use.

`EventEnds(framing)` is fed a stream's bytes as they come (as a program reads them: `replay
record`'s progress counter; without a framing, it tells it from the stream's start) and
returns, for each event a piece completes, the stream offset just past it: past an SSE
event's blank line, an NDJSON line's LF, a JSON-array element's closing bracket (the comma
after it belongs to the next), an AWS event-stream message's CRC.
`event_ends(response)` is the same over a recorded response, its framing `detect`ed (the
faults' "after N events"): exact for a body as sent; for a compressed one (Content-Encoding)
an event ends at the end of the raw chunk whose decoding completed it (chunk granularity).
"""

from __future__ import annotations

import re

from replay.framing import SNIFF_BYTES, Framing, detect, parser, sniff
from replay.framing.decoding import Body, decoded_chunks, encodings
from replay.framing.ndjson import NDJSONParser
from replay.framing.sse import SSEParser

__all__ = ["EventEnds", "event_ends"]

_LINE = re.compile(rb"[^\r\n]*(?:\r\n?|\n)|[^\r\n]+")  # a line with its terminator, or a part
_FIRST_LOOK = 256  # bytes held before the start of a stream of unknown framing is looked at


class EventEnds:
    """Incremental: `feed()` a stream's bytes, get the offsets just past the events they
    complete (offsets count every byte fed since the start); `close()` at its end.

    Args:
        kind: the framing (`replay.framing.framing_of_type` of the Content-Type); None: told
            from the stream's start as `replay.framing.sniff` tells it from a recorded body's,
            looked at again each time the bytes held double, up to `SNIFF_BYTES`. Until it
            is told no event is counted, then those of the start at once; a start that shows
            no framing has none.

    Raises (from `feed`): `EventStreamError` (a ValueError) for a damaged event stream.
    """

    def __init__(self, kind: Framing | None = None) -> None:
        self.kind = kind
        self._parser = None if kind is None else parser(kind)
        self._offset = 0  # bytes read before the current piece
        self._head: list[bytes] | None = [] if kind is None else None  # held, while unknown
        self._held = 0
        self._look_at = _FIRST_LOOK  # sniff once this many bytes are held

    def feed(self, data: bytes) -> list[int]:
        """The offsets just past each event `data` completes, in order."""
        if self._parser is None:
            return self._sniff(data, final=False)
        base, self._offset = self._offset, self._offset + len(data)
        reader = self._parser
        if isinstance(reader, (SSEParser, NDJSONParser)):
            # Line by line, so that an event ends just past its own line ending.
            ends: list[int] = []
            for line in _LINE.finditer(data):
                ends.extend([base + line.end()] * len(reader.feed(line.group())))
            return ends
        return [row[0] + 1 for row in reader.rows(data)]

    def close(self) -> list[int]:
        """The end of the stream: an event it completes (an NDJSON line without its LF)
        ends at the last byte fed."""
        ends = self._sniff(b"", final=True) if self._parser is None else []
        if self._parser is None:
            return ends
        return ends + [self._offset] * len(self._parser.close())

    def _sniff(self, data: bytes, *, final: bool) -> list[int]:
        """Hold `data` while the framing is unknown; once the start tells it, read it all."""
        if self._head is None:  # the start showed no framing
            return []
        self._head.append(data)
        self._held += len(data)
        if not final and self._held < min(self._look_at, SNIFF_BYTES):
            return []
        head = b"".join(self._head)
        self._head = [head]
        kind = sniff(head[:SNIFF_BYTES])
        if kind is None:
            if final or self._held >= SNIFF_BYTES:
                self._head = None
            self._look_at = 2 * self._held
            return []
        self.kind, self._parser, self._head = kind, parser(kind), None
        return self.feed(head)


def event_ends(response: Body, kind: Framing | None = None) -> list[int]:
    """The raw body offset just past each event of `response`, in order.

    Args:
        kind: the framing; by default `replay.framing.detect`'s, and SSE when it has none (a body
            that is no stream then has no events).

    Raises:
        DecodingError: (a ValueError) a compressed body cannot be decoded.
        EventStreamError: (a ValueError) an event stream's CRC or lengths are damaged.
    """
    counter = EventEnds(kind or detect(response) or "sse")
    payloads = response.chunks.payloads
    if not encodings(response):
        ends = [end for piece in payloads for end in counter.feed(piece)]
        return ends + counter.close()
    ends = []
    offset = 0
    sizes = (*map(len, payloads), 0)  # one decoded piece per raw chunk, then the flush
    for (_, data), size in zip(decoded_chunks(response), sizes, strict=True):
        offset += size
        ends.extend([offset] * len(counter.feed(data)))
    return ends + [offset] * len(counter.close())
