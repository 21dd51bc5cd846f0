"""Sans-IO, incremental parser for AWS event streams (`application/vnd.amazon.eventstream`).

The framing of Bedrock's `ConverseStream` and `InvokeModelWithResponseStream` (and of
every other AWS streaming API): binary messages, each

    total length (u32 BE) | headers length (u32 BE) | CRC32 of those 8 bytes (u32 BE)
    headers | payload | CRC32 of everything before it (u32 BE)

A header is a name (u8 length, then the name), a type (u8) and a value: 0 and 1 (true,
false) have none, 2 a byte, 3 a u16, 4 a u32, 5 and 8 (a timestamp) a u64, 6 and 7 (bytes,
a UTF-8 string) a u16 length then the bytes, 9 a UUID of 16 bytes. Messages are split
anywhere across chunks; the parser keeps only the bytes of the message being read (at most
`MAX_MESSAGE` bytes), so memory is bounded whatever the stream. A CRC that does not match, or
a length no message can have, raises `replay.errors.EventStreamError`.

Each message becomes a `replay.framing.sse.Event` named by its `:event-type` header (an
`:exception-type` for a message whose `:message-type` is `exception`, its `:error-code`
for an `error` one) whose `data` is its payload (JSON, in Bedrock), read as UTF-8.

`encode` makes a message (string headers only), with correct CRCs; `reencode` gives a
recorded message another payload (its headers kept byte for byte) with fresh CRCs; `spans`
says where each message of a body starts and how long its parts are.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Mapping, Sequence

from replay.errors import EventStreamError
from replay.framing.bulk import building
from replay.framing.jsonarray import byte_ends
from replay.framing.sse import Event, Row

__all__ = [
    "CONTENT_TYPE",
    "MAX_MESSAGE",
    "EventStreamParser",
    "byte_ends",
    "encode",
    "headers_of",
    "is_prelude",
    "parse",
    "read_whole",
    "reencode",
    "scan",
    "spans",
]

CONTENT_TYPE = "application/vnd.amazon.eventstream"
#: The largest message read (botocore's own bound: 24 MiB of payload, 128 KiB of headers).
MAX_MESSAGE = 24 * 1024 * 1024 + 128 * 1024 + 16
_PRELUDE = 12
_MINIMUM = 16  # a prelude and the message CRC, no headers, no payload
_FIXED = {0: 0, 1: 0, 2: 1, 3: 2, 4: 4, 5: 8, 8: 8, 9: 16}  # value sizes by header type
_STRING_TYPES = (6, 7)


class EventStreamParser:
    """Incremental event-stream parser: `feed()` bytes, get back the events they complete.

    One parser reads one stream; call `close()` at end of stream.
    """

    def __init__(self) -> None:
        self._pending: list[bytes] = []  # pieces of the message being read
        self._size = 0  # bytes in `_pending`
        self._need = _PRELUDE  # bytes the message being read needs (its prelude, at first)
        self._offset = 0  # bytes fed before the current chunk
        self._closed = False

    @property
    def complete(self) -> bool:
        """Whether the stream read so far ends between messages."""
        return self._size == 0

    def feed(self, data: bytes) -> list[Event]:
        """Consume the next chunk of the stream; return the events it completes, in order.

        Raises:
            EventStreamError: a CRC does not match, or a length is impossible.
        """
        if self._closed:
            raise RuntimeError("feed() called after close()")
        return [Event(*row[1:]) for row in self.rows(data)]

    def close(self) -> list[Event]:
        """Signal end of stream: a message cut short is dropped, so this returns `[]`.
        Idempotent."""
        self._closed = True
        return []

    def rows(self, data: bytes) -> list[Row]:
        """`feed`'s events as rows, each with the stream offset of the byte completing it."""
        rows: list[Row] = []
        base, self._offset = self._offset, self._offset + len(data)
        position = 0
        while position < len(data):
            take = min(self._need - self._size, len(data) - position)
            self._pending.append(data[position : position + take])
            self._size += take
            position += take
            if self._size < self._need:
                break
            held = b"".join(self._pending)
            self._pending = [held]
            if self._need == _PRELUDE:
                self._need = _total(held, base + position - self._size)
                continue
            rows.append((base + position - 1, *_message(held, base + position - self._size)))
            self._pending, self._size, self._need = [], 0, _PRELUDE
        return rows


def is_prelude(head: bytes) -> bool:
    """Whether `head` opens with a valid prelude (its CRC matches, its lengths fit)."""
    if len(head) < _PRELUDE:
        return False
    total, headers, crc = struct.unpack_from(">III", head)
    return bool(
        zlib.crc32(head[:8]) == crc and _MINIMUM <= total <= MAX_MESSAGE and headers <= total - 16
    )


def _total(prelude: bytes, at: int) -> int:
    total, headers, crc = struct.unpack_from(">III", prelude)
    if zlib.crc32(prelude[:8]) != crc:
        raise EventStreamError(f"the message at byte {at} has a prelude whose CRC does not match")
    if not _MINIMUM <= total <= MAX_MESSAGE or headers > total - _MINIMUM:
        raise EventStreamError(
            f"the message at byte {at} claims {total} bytes with {headers} of headers"
        )
    return int(total)


def _message(message: bytes, at: int) -> tuple[str, str, str, int | None]:
    (crc,) = struct.unpack_from(">I", message, len(message) - 4)
    if zlib.crc32(message[:-4]) != crc:
        raise EventStreamError(f"the message at byte {at} has a CRC that does not match")
    (length,) = struct.unpack_from(">I", message, 4)
    headers = headers_of(message[_PRELUDE : _PRELUDE + length], at)
    payload = message[_PRELUDE + length : -4].decode("utf-8", errors="replace")
    kind = str(headers.get(":message-type", "event"))
    name = {"exception": ":exception-type", "error": ":error-code"}.get(kind, ":event-type")
    return str(headers.get(name, kind)), payload, "", None


def headers_of(raw: bytes, at: int = 0) -> dict[str, object]:
    """A message's headers, by name: strings as `str`, bytes as `bytes`, the rest as `int`
    (a boolean as `bool`).

    Raises:
        EventStreamError: a header runs past the end, or has an unknown type.
    """
    headers: dict[str, object] = {}
    position = 0
    try:
        while position < len(raw):
            size = raw[position]
            name = raw[position + 1 : position + 1 + size].decode("utf-8", errors="replace")
            kind = raw[position + 1 + size]
            position += 2 + size
            if kind in _STRING_TYPES:
                (length,) = struct.unpack_from(">H", raw, position)
                data = raw[position + 2 : position + 2 + length]
                position += 2 + length
                value: object = data.decode("utf-8", errors="replace") if kind == 7 else data
            elif kind in _FIXED:
                value = (
                    kind == 0
                    if kind < 2
                    else int.from_bytes(raw[position : position + _FIXED[kind]], "big")
                )
                position += _FIXED[kind]
            else:
                raise EventStreamError(f"the message at byte {at} has a header of type {kind}")
            headers[name] = value
    except (IndexError, struct.error):
        raise EventStreamError(f"the message at byte {at} has headers cut short") from None
    if position > len(raw):
        raise EventStreamError(f"the message at byte {at} has headers cut short")
    return headers


def encode(headers: Mapping[str, str], payload: bytes) -> bytes:
    """One message with string `headers` and `payload`, its CRCs computed."""
    raw = b"".join(
        bytes([len(name.encode())])
        + name.encode()
        + b"\x07"
        + struct.pack(">H", len(value.encode()))
        + value.encode()
        for name, value in headers.items()
    )
    prelude = struct.pack(">II", _MINIMUM + len(raw) + len(payload), len(raw))
    prelude += struct.pack(">I", zlib.crc32(prelude))
    body = prelude + raw + payload
    return body + struct.pack(">I", zlib.crc32(body))


def reencode(message: bytes, payload: bytes) -> bytes:
    """`message` (one whole message) with `payload` instead of its own: its headers kept
    byte for byte (of every type), its lengths, prelude CRC and message CRC computed anew.

    Raises:
        EventStreamError: `message` is not one whole message (its lengths do not fit).
    """
    if len(message) < _MINIMUM:
        raise EventStreamError(f"a message has at least {_MINIMUM} bytes, not {len(message)}")
    total, length = struct.unpack_from(">II", message)
    if total != len(message) or length > total - _MINIMUM:
        raise EventStreamError(f"not one whole message: it claims {total} bytes")
    prelude = struct.pack(">II", _MINIMUM + length + len(payload), length)
    prelude += struct.pack(">I", zlib.crc32(prelude))
    body = prelude + message[_PRELUDE : _PRELUDE + length] + payload
    return body + struct.pack(">I", zlib.crc32(body))


def spans(body: bytes) -> list[tuple[int, int, int]]:
    """Each whole message of `body` as (start, total length, headers length), in order,
    read from the preludes alone (no CRC checked: `scan` does that); a message cut short
    by the end of `body` is left out."""
    found: list[tuple[int, int, int]] = []
    start = 0
    while start + _PRELUDE <= len(body):
        total, length = struct.unpack_from(">II", body, start)
        if total < _MINIMUM or start + total > len(body):
            break
        found.append((start, int(total), int(length)))
        start += total
    return found


def scan(pieces: Sequence[bytes]) -> list[Row]:
    """Read a complete stream, given as its chunks, at once: every event, each with the
    offset of the byte completing it (see `byte_ends`).

    Raises:
        EventStreamError: as `EventStreamParser.feed` does.
    """
    parser = EventStreamParser()
    rows: list[Row] = []
    with building():
        for piece in pieces:
            rows += parser.rows(piece)
    return rows


def parse(data: bytes) -> list[Event]:
    """Parse a complete stream at once: feed everything, then close."""
    rows = scan([data])
    with building():
        return [Event(*row[1:]) for row in rows]


def read_whole(body: bytes) -> tuple[tuple[Event, ...], str | None, bool]:
    """A whole body's events up to a damaged message, what is damaged (None when nothing
    is), and whether the body ends inside a message."""
    parser = EventStreamParser()
    try:
        return tuple(parser.feed(body)), None, not parser.complete
    except EventStreamError as error:
        problem = str(error)
    events: list[Event] = []
    parser = EventStreamParser()
    start = 0
    while start + _PRELUDE <= len(body):  # (a damaged stream only: message by message)
        total = struct.unpack_from(">I", body, start)[0]
        message = body[start : start + max(total, _PRELUDE)]
        try:
            events += parser.feed(message)
        except EventStreamError:  # the damaged message: the events before it stand
            break
        start += len(message)
    return tuple(events), problem, False
