"""Walking a msgpack document in time and memory bounded by its size (`store`'s reader).

msgpack builds whatever a file declares, and an empty map is one byte on disk and some 70
bytes of Python objects: handed to `unpackb` whole, a crafted 20 MB file takes gigabytes and
seconds before any check sees it. A `Walker` never lets msgpack build what it has not
asked for:

- The skeleton (maps, down to each field) is walked in Python. A value is built only once
  its first byte says it has the expected type; anything else, and every unknown key, is
  skipped unbuilt (`Unpacker.skip`, in C). A map holds at most `MAX_FIELDS` entries.
- Lists (header pairs, chunk columns) are built in C, element by element, by Unpackers that
  cannot build a container (their length limits are 0, or 2 for header pairs, which a hook
  turns into tuples) nor, in a column, a string: so each element costs at most some 50
  bytes beyond the bytes it holds.
- Before a list is built, its declared length is charged against a budget proportional to
  the file's size (`MAX_EXPANSION`); a file that would go past it is refused.

The document is the file's bytes, or (a long file) a read-only memory map of it with the
file's descriptor: the Unpackers then read it with `os.pread`, a piece at a time, and the
map's pages are touched only where the skeleton looks. A column of long payloads is then not
built at all: `places` finds where each payload lies (every element a bin, whole within the
file), and the loader leaves them in the file, to be read when played.

When anything fails, `_load.check_document` (one pass in C that builds nothing) tells first
what `unpackb` would have: a truncated file, stray bytes after the document, values nested
too deep, reserved bytes.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import msgpack

from replay.store.msgpack_bytes import (
    EXT_CODE_AT,
    FILE_READ_SIZE,
    KINDS,
    LENGTH_BYTES,
    Document,
    bin_places,
    sized_length,
    stream,
)
from replay.store.spool import FileBytes

__all__ = [
    "MAX_EXPANSION",
    "MAX_FIELDS",
    "MIN_BUDGET",
    "BadElement",
    "Document",
    "LoadError",
    "Skipped",
    "Walker",
]

#: Bytes of objects a load may build per byte of the file. A cassette of real streams needs
#: 1 to 3 (its bytes are mostly payloads), one of many requests with empty answers up to 7
#: (a header costs some 200 bytes); one of only one- or two-byte chunks would need 8 and more,
#: and past `MIN_BUDGET` (some 300,000 such chunks) it is refused; a crafted one needs 80.
MAX_EXPANSION = 8
#: What any file may build, however small.
MIN_BUDGET = 32 * 1024 * 1024
#: The most entries a map may have (a cassette's maps have at most six fields).
MAX_FIELDS = 64

#: A list of at most this many elements and bytes that was built by another Unpacker is
#: skipped by the skeleton's (cheaper than a new Unpacker); a longer one is gone past by a
#: seek (skipping holds each element's bytes whole in the Unpacker's buffer).
_SKIPPED_COLUMN = 256
_SKIPPED_BYTES = 64 * 1024


class LoadError(Exception):
    """A file that is not a cassette: what is wrong, and where in the document."""


class BadElement(Exception):
    """An element of a list that the list cannot hold (`kind`: as `_chunks.kind_of` names it)."""

    def __init__(self, index: int, kind: str) -> None:
        super().__init__(index, kind)
        self.index = index
        self.kind = kind


class _Refused(Exception):
    """Raised by an Unpacker's hook: a value that cannot be where it was found."""


def _refuse(*_value: object) -> Any:
    raise _Refused


def _pair(items: list[Any]) -> tuple[str, str]:
    if len(items) == 2 and type(items[0]) is str and type(items[1]) is str:
        return (items[0], items[1])
    raise _Refused


class Skipped:
    """A value left unbuilt, by the name of its type (`kind`)."""

    __slots__ = ("kind",)

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def __repr__(self) -> str:
        return f"Skipped({self.kind!r})"


class Walker:
    """A position in a msgpack document's bytes, and what may be built from there.

    Args:
        data: the document (the whole file).
        fileno: the file `data` maps, if it does: what the Unpackers read.
    """

    def __init__(self, data: Document, fileno: int | None = None) -> None:
        self.data = data
        self.fileno = fileno
        self._file_bytes: FileBytes | None = None
        self.budget = max(MIN_BUDGET, MAX_EXPANSION * len(data))
        self.spent = 0
        limit = len(data)
        # The skeleton's Unpacker: values of any length; lists only as header pairs.
        self._skeleton: dict[str, Any] = {
            "max_buffer_size": max(limit, FILE_READ_SIZE),
            "max_str_len": limit,
            "max_bin_len": limit,
            "max_array_len": 2,
            "max_map_len": 0,
            "max_ext_len": 0,
            "list_hook": _pair,
            "object_hook": _refuse,
            "ext_hook": _refuse,
        }
        # A column's: bytes of any length, numbers, nil and booleans; nothing else.
        self._column = {**self._skeleton, "max_str_len": 0, "max_array_len": 0}
        self._column["list_hook"] = _refuse
        self._base = 0
        self.unpacker = self._unpacker(0, self._skeleton)

    def file_bytes(self) -> FileBytes:
        """The file, for payloads left in it (one descriptor for all of them)."""
        assert self.fileno is not None
        if self._file_bytes is None:
            self._file_bytes = FileBytes(self.fileno)
        return self._file_bytes

    def _unpacker(self, position: int, limits: dict[str, Any]) -> msgpack.Unpacker:
        source, read_size = stream(self.data, position, self.fileno)
        return msgpack.Unpacker(source, read_size=read_size, **limits)

    @property
    def position(self) -> int:
        """Where the next value starts."""
        position: int = self._base + self.unpacker.tell()
        return position

    def seek(self, position: int) -> None:
        """Go on from `position`."""
        self._base = position
        self.unpacker = self._unpacker(position, self._skeleton)

    def charge(self, count: int, cost: int, where: str) -> None:
        """Account for `count` values of `cost` bytes each, before building them.

        Raises:
            LoadError: they would take the file past its budget.
        """
        self.spent += count * cost
        if self.spent > self.budget:
            raise LoadError(
                f"{where}: loading the file would take more than "
                f"{self.budget // (1024 * 1024)} MiB, {MAX_EXPANSION} times its size: "
                "refused as a likely crafted file (replay.store.walk.MAX_EXPANSION)"
            )

    # -- the skeleton ------------------------------------------------------------------------

    def kind(self, position: int) -> str:
        """The type of the value at `position`, found without building it."""
        first = self.data[position]
        kind = KINDS[first]
        if kind == "ext":
            return "Timestamp" if self.data[position + EXT_CODE_AT[first]] == 0xFF else "ExtType"
        return kind

    def next_kind(self) -> str:
        """The type of the value that comes next, found without building it."""
        return self.kind(self._base + self.unpacker.tell())

    def scalar(self) -> Any:
        """The value that comes next if it is no list, map or extension type (those are
        skipped, unbuilt: a `Skipped` stands for them)."""
        kind = KINDS[self.data[self._base + self.unpacker.tell()]]
        if kind in ("list", "dict", "ext"):
            kind = self.next_kind()
            self.unpacker.skip()
            return Skipped(kind)
        return self.unpacker.unpack()

    def skip(self) -> None:
        """Pass the next value, building nothing."""
        self.unpacker.skip()

    def map_length(self, where: str) -> int:
        """The number of entries of the map that comes next.

        Raises:
            LoadError: it is no map (skipped), or a map of more than `MAX_FIELDS` entries.
        """
        kind = self.kind(self._base + self.unpacker.tell())
        if kind != "dict":
            self.unpacker.skip()
            raise LoadError(f"{where}: expected dict, found {kind}")
        count: int = self.unpacker.read_map_header()
        if count > MAX_FIELDS:
            raise LoadError(f"{where}: {count} fields, where a cassette has at most {MAX_FIELDS}")
        return count

    def fields(
        self,
        where: str,
        readers: dict[str, Callable[[Walker, str, str], Any]],
        found: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Read the map that comes next into `found` (default: a new dict): each field of
        `readers` by its reader (given this walker, `where` and the key); the others, and
        keys that are not strings of at most 255 bytes (fixstr or str 8: every key a
        cassette knows is one, whichever a writer chose), skipped unbuilt. A key given
        twice keeps its last value, as with `unpackb`.

        Raises:
            LoadError: it is no map, or a map of more than `MAX_FIELDS` entries.
        """
        found = {} if found is None else found
        data = self.data
        for _ in range(self.map_length(where)):
            unpacker = self.unpacker  # a reader may go on with another one
            first = data[self._base + unpacker.tell()]
            if 0xA0 <= first <= 0xBF or first == 0xD9:  # fixstr, str 8: at most 255 bytes
                key = unpacker.unpack()
                read = readers.get(key)
            else:
                unpacker.skip()
                read = None
            if read is None:
                unpacker.skip()
            else:
                found[key] = read(self, where, key)
        return found

    # -- lists -------------------------------------------------------------------------------

    def list_or_skip(self, where: str) -> tuple[int, int] | Skipped:
        """`list_length` of the list that comes next; for anything else, a `Skipped` (passed)."""
        kind = self.next_kind()
        if kind != "list":
            self.unpacker.skip()
            return Skipped(kind)
        return self.list_length(where)

    def list_length(self, where: str) -> tuple[int, int]:
        """The length of the list that comes next and the size of its header.

        Raises:
            LoadError: it is no list.
        """
        position = self._base + self.unpacker.tell()
        kind = self.kind(position)
        if kind != "list":
            raise LoadError(f"{where}: expected list, found {kind}")
        first = self.data[position]
        if first <= 0x9F:
            return first & 0x0F, 1
        size = LENGTH_BYTES[first]
        return int.from_bytes(self.data[position + 1 : position + 1 + size], "big"), 1 + size

    def pairs(self, count: int) -> tuple[Any, ...]:
        """The list of `count` elements that comes next, whose lists of two strings become
        tuples (anything else a scalar may be is built as it is).

        Raises:
            BadElement: an element is another list, or a map or an extension type.
        """
        if count == 0:
            self.unpacker.skip()
            return ()
        return self._elements(self.unpacker, self._skeleton, count)

    def column(self, count: int) -> tuple[Any, ...]:
        """The list of `count` elements that comes next, each bytes, a number, nil or a
        boolean.

        Raises:
            BadElement: an element is a string, a list, a map or an extension type.
        """
        if count == 0:
            self.unpacker.skip()
            return ()
        start = self.position
        unpacker = self._unpacker(start, self._column)
        elements = self._elements(unpacker, self._column, count)
        self._go_past(count, start, start + unpacker.tell())
        return elements

    def _go_past(self, count: int, start: int, end: int) -> None:
        """Go on after a list of `count` elements (from `start` to `end`) the skeleton's
        Unpacker has not read."""
        if count <= _SKIPPED_COLUMN and end - start <= _SKIPPED_BYTES:
            self.unpacker.skip()  # cheaper than a new Unpacker for a short list
        else:
            self.seek(end)

    def _elements(
        self, unpacker: msgpack.Unpacker, limits: dict[str, Any], count: int
    ) -> tuple[Any, ...]:
        start = self._base + self.unpacker.tell()
        unpacker.read_array_header()
        try:
            return tuple(itertools.islice(unpacker, count))
        except UnicodeDecodeError:
            raise
        except (ValueError, _Refused, msgpack.UnpackException):
            pass
        # Again, element by element, to tell which one it was (on the way to an error only).
        again = self._unpacker(start, limits)
        again.read_array_header()
        built: list[Any] = []
        try:
            built.extend(itertools.islice(again, count))
        except (ValueError, _Refused, msgpack.UnpackException) as exc:
            index = len(built)
            raise BadElement(index, self._element_kind(start, index)) from exc
        raise AssertionError("an element failed once only")  # pragma: no cover

    def element_at(self, position: int, index: int) -> int:
        """Where the element `index` of the list at `position` starts (found building
        nothing; on the way to an error only)."""
        skipper = self._unpacker(position, {"max_buffer_size": self._skeleton["max_buffer_size"]})
        skipper.read_array_header()
        for _ in range(index):
            skipper.skip()
        at: int = position + skipper.tell()
        return at

    def _element_kind(self, position: int, index: int) -> str:
        at = self.element_at(position, index)
        kind = self.kind(at)
        if kind not in ("str", "bytes", "list"):
            return kind
        return f"{kind} of length {sized_length(self.data, at, kind)}"

    def places(self, count: int, size: int) -> tuple[list[int], list[int]] | None:
        """Where the payloads of the list of `count` elements that comes next (its header
        `size` bytes) lie in the file, and their lengths, if each is a bin within the file
        and they are long (`_msgpack_bytes.bin_places`); found reading only their headers, and past
        them. None if not (nothing was read: the list is to be built, which says what is
        wrong with it, if anything).

        The headers are read with `os.pread`, not from the map: a page of it touched brings
        its neighbours in (some 64 KiB), and so would the whole column.
        """
        assert self.fileno is not None
        start = self.position
        found = bin_places(self.fileno, start, start + size, len(self.data), count)
        if found is None:
            return None
        offsets, lengths, end = found
        self.seek(end)
        return offsets, lengths

    def float64s(self, count: int, size: int) -> tuple[float, ...] | None:
        """The list of `count` elements that comes next (its header `size` bytes), if they
        are all msgpack float64 (as replay writes times); None if not.

        Each value 9 bytes apart opening with the float64 marker (0xCB) means each is one.
        """
        if count == 0:
            self.unpacker.skip()
            return ()
        start = self.position
        body = start + size
        end = body + 9 * count
        if len(self.data) < end or self.data[body:end:9].count(0xCB) != count:
            return None
        values: tuple[float, ...] = msgpack.unpackb(
            memoryview(self.data)[start:end], use_list=False
        )
        self._go_past(count, start, end)
        return values
