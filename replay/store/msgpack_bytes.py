"""msgpack's encoding, byte by byte, as the walker reads it (`replay.store.walk`): the type a
value's first byte says, the lengths its header holds, and where a column of bins lies.

Read from the document's bytes without building anything (on a file, with `os.pread`).
"""

from __future__ import annotations

import io
import os
from typing import TYPE_CHECKING, Any, BinaryIO, TypeAlias

if TYPE_CHECKING:
    import mmap

__all__ = [
    "BIN_HEADER",
    "EXT_CODE_AT",
    "KINDS",
    "LENGTH_BYTES",
    "READ_SIZE",
    "Document",
    "bin_places",
    "sized_length",
    "stream",
]

Document: TypeAlias = "bytes | mmap.mmap"
"""A msgpack document's bytes: in memory, or a file mapped read-only."""

#: How many bytes an Unpacker reads at a time: from bytes in memory, and from a file.
READ_SIZE = 4096
FILE_READ_SIZE = 64 * 1024
#: A column is left in the file (`bin_places`) when its payloads are this long on average, as
#: its first `_SAMPLED` show (else it is built: short ones cost more to read one by one).
_LEFT_FROM = 1024
_SAMPLED = 1024
BIN_HEADER = {0xC4: 1, 0xC5: 2, 0xC6: 4}  # the bytes of a bin's length, by its first byte


def _kinds() -> tuple[str, ...]:
    """The type msgpack builds for a value, by its first byte (as `type(value).__name__`)."""
    kinds = []
    for first in range(256):
        if first <= 0x7F or first >= 0xE0 or 0xCC <= first <= 0xD3:
            kind = "int"
        elif first <= 0x8F or first in (0xDE, 0xDF):
            kind = "dict"
        elif first <= 0x9F or first in (0xDC, 0xDD):
            kind = "list"
        elif first <= 0xBF or 0xD9 <= first <= 0xDB:
            kind = "str"
        elif first in (0xC4, 0xC5, 0xC6):
            kind = "bytes"
        elif first in (0xCA, 0xCB):
            kind = "float"
        else:
            kind = {0xC0: "NoneType", 0xC1: "reserved", 0xC2: "bool", 0xC3: "bool"}.get(
                first, "ext"
            )
        kinds.append(kind)
    return tuple(kinds)


KINDS = _kinds()
EXT_CODE_AT = {0xC7: 2, 0xC8: 3, 0xC9: 5, 0xD4: 1, 0xD5: 1, 0xD6: 1, 0xD7: 1, 0xD8: 1}
LENGTH_BYTES = {0xC4: 1, 0xC5: 2, 0xC6: 4, 0xD9: 1, 0xDA: 2, 0xDB: 4, 0xDC: 2, 0xDD: 4}


def sized_length(data: Document, at: int, kind: str) -> int:
    """The length of the str, bin or list (`kind`) at `at`, read from its header."""
    first = data[at]
    if first in LENGTH_BYTES:
        size = LENGTH_BYTES[first]
        return int.from_bytes(data[at + 1 : at + 1 + size], "big")
    return first & (0x1F if kind == "str" else 0x0F)


def bin_places(
    fileno: int, start: int, at: int, end: int, count: int
) -> tuple[list[int], list[int], int] | None:
    """Where each of the `count` bins from `at` (of the list at `start`) lies in the file
    `fileno` of `end` bytes, their lengths, and where the list ends: if each is a bin
    within the file and they are long (see `_LEFT_FROM`); None if not."""
    offsets: list[int] = []
    lengths: list[int] = []
    for index in range(count):
        header = os.pread(fileno, 5, at)
        width = BIN_HEADER.get(header[0]) if header else None
        if width is None or len(header) < 1 + width:
            return None
        length = int.from_bytes(header[1 : 1 + width], "big")
        at += 1 + width
        if at + length > end:
            return None  # (building it says: truncated)
        offsets.append(at)
        lengths.append(length)
        at += length
        if index + 1 == _SAMPLED and at - start < _LEFT_FROM * _SAMPLED:
            return None
    if at - start < _LEFT_FROM * count:
        return None
    return offsets, lengths, at


class _FileReader:
    """A file read from a position of its own (`os.pread`), for an Unpacker: many readers
    share one descriptor, and what they read is not kept mapped."""

    __slots__ = ("fileno", "position")

    def __init__(self, fileno: int, position: int) -> None:
        self.fileno = fileno
        self.position = position

    def read(self, size: int) -> bytes:
        data = os.pread(self.fileno, size, self.position)
        self.position += len(data)
        return data


def stream(data: Document, position: int, fileno: int | None) -> tuple[BinaryIO | Any, int]:
    """What an Unpacker reads `data` from, at `position` (the file `fileno` when it is
    given: `data` maps it), and how many bytes it should read at a time."""
    if fileno is not None:
        return _FileReader(fileno, position), FILE_READ_SIZE
    source = io.BytesIO(data)  # shares the bytes: nothing is copied
    source.seek(position)
    return source, READ_SIZE
