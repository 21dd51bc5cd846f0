"""Where a body's events end, in raw body bytes, whatever its framing: the one answer that
faults and every counter of events use.

`EventEnds(framing)` is fed a stream's bytes as they come (as a program reads them: `replay
record`'s progress counter) and returns, for each event a piece completes, the stream offset
just past it: past an SSE event's blank line, an NDJSON line's LF, a JSON-array element's
closing bracket (the comma after it belongs to the next), an AWS event-stream message's CRC.
`event_ends(response)` is the same over a recorded response, its framing `detect`ed (the
faults' "after N events"): exact for a body as sent; for a compressed one (Content-Encoding)
an event ends at the end of the raw chunk whose decoding completed it (chunk granularity).
"""

from __future__ import annotations

import re

from replay.framing import Framing, detect, parser
from replay.framing.decoding import Body, decoded_chunks, encodings
from replay.framing.ndjson import NDJSONParser
from replay.framing.sse import SSEParser

__all__ = ["EventEnds", "event_ends"]

_LINE = re.compile(rb"[^\r\n]*(?:\r\n?|\n)|[^\r\n]+")  # a line with its terminator, or a part


class EventEnds:
    """Incremental: `feed()` a stream's bytes, get the offsets just past the events they
    complete (offsets count every byte fed since the start).

    Raises (from `feed`): `EventStreamError` (a ValueError) for a damaged event stream.
    """

    def __init__(self, kind: Framing) -> None:
        self.kind = kind
        self._parser = parser(kind)
        self._offset = 0  # bytes fed before the current piece

    def feed(self, data: bytes) -> list[int]:
        """The offsets just past each event `data` completes, in order."""
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
        return [self._offset] * len(self._parser.close())


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
