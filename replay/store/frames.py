"""A WebSocket conversation's frames in the cassette file, and their checks on load.

An interaction that is a WebSocket conversation has a "frames" map beside its request and
response, four parallel columns as a response's chunks are (see docs/cassette-format.md):

    "frames": {"at": [float, ...],      seconds since the upgrade request was sent
               "client": [bool, ...],   sent by the client (else by the server)
               "op": [int, ...],        RFC 6455 opcode: 1 text, 2 binary, 8 close, 9 ping, 10 pong
               "data": [bin, ...]}      the payload, uncompressed

Files without it (every HTTP interaction, and every file written before WebSockets were
recorded) load as before; a reader that does not know the field ignores it, as readers
ignore unknown keys: the conversation then reads as a GET answered 101, with no body.
"""

from __future__ import annotations

from typing import Any

from replay.model.chunks import time_problem
from replay.model.frames import OPCODE_OF, OPCODES, Frame
from replay.store.walk import BadElement, LoadError, Skipped, Walker

__all__ = ["flags", "frames_document", "frames_of"]

#: What an element of a column costs in memory (as `replay.store.load` charges it).
_ELEMENT = 56


def frames_document(frames: tuple[Frame, ...]) -> dict[str, Any]:
    """The "frames" map of the file for `frames`."""
    return {
        "at": [float(frame.at) for frame in frames],
        "client": [frame.sender == "client" for frame in frames],
        "op": [OPCODE_OF[frame.kind] for frame in frames],
        "data": [frame.data for frame in frames],
    }


def frames_of(value: object, where: str) -> tuple[Frame, ...]:
    """The frames the file's "frames" map `value` (found at `where`) holds.

    Raises:
        LoadError: a column is missing, of the wrong type or length; a time out of bounds
            or going back; an unknown opcode; a payload that is no bytes.
    """
    if not isinstance(value, dict):
        raise LoadError(f"{where}: expected dict, found {_kind(value)}")
    columns: list[Any] = []
    for name in ("at", "client", "op", "data"):
        if name not in value:
            raise LoadError(f"{where}: missing field {name!r}")
        column = value[name]
        column = getattr(column, "values", column)  # the walker's Floats / Kept holders
        if not isinstance(column, (list, tuple)) and not _is_sequence(column):
            raise LoadError(f"{where}.{name}: expected list, found {_kind(column)}")
        columns.append(column)
    times, client, ops, data = columns
    if not len(times) == len(client) == len(ops) == len(data):
        raise LoadError(f"{where}: the columns differ in length: each frame needs all four")
    frames = []
    last = 0.0
    for index, (at, by_client, op, payload) in enumerate(
        zip(times, client, ops, data, strict=True)
    ):
        place = f"{where}[{index}]"
        frames.append(_frame(place, at, by_client, op, payload, last))
        last = at
    return tuple(frames)


def _frame(place: str, at: Any, by_client: Any, op: Any, payload: Any, last: float) -> Frame:
    if isinstance(at, bool) or not isinstance(at, (int, float)):
        raise LoadError(f"{place}.at: expected a number, found {_kind(at)}")
    problem = time_problem(at)
    if problem is not None:
        raise LoadError(f"{place}.at: {problem}")
    if at < last:
        raise LoadError(f"{place}.at: {at} s comes before the frame before it ({last} s)")
    if not isinstance(by_client, bool):
        raise LoadError(f"{place}.client: expected bool, found {_kind(by_client)}")
    if isinstance(op, bool) or not isinstance(op, int) or op not in OPCODES:
        raise LoadError(f"{place}.op: not an opcode replay knows (1, 2, 8, 9, 10)")
    if not isinstance(payload, bytes):
        raise LoadError(f"{place}.data: expected bytes, found {_kind(payload)}")
    return Frame(at, "client" if by_client else "server", OPCODES[op], payload)


def _is_sequence(value: object) -> bool:
    return (
        hasattr(value, "__len__")
        and hasattr(value, "__getitem__")
        and not isinstance(value, (str, bytes, dict))
    )


def _kind(value: object) -> str:
    kind = getattr(value, "kind", None)  # the walker's `Skipped`
    return kind if isinstance(kind, str) else type(value).__name__


def flags(walker: Walker, parent: str, key: str) -> Any:
    """The walker's reader of a column of numbers or booleans (the opcodes, the senders)."""
    where = f"{parent}.{key}"
    found = walker.list_or_skip(where)
    if isinstance(found, Skipped):
        return found
    count, _size = found
    walker.charge(count, _ELEMENT, where)
    try:
        return walker.column(count)
    except BadElement as bad:
        raise LoadError(f"{where}[{bad.index}]: expected a number or bool, not {bad.kind}") from bad
