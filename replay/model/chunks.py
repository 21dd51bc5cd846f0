"""A body's chunks: one `Chunk`, the `Chunks` columns, and the recorded time's bounds.

Apart from `replay.model` (which re-exports `Chunk`, `Chunks` and `MAX_SECONDS`, and whose
`Response` holds a `Chunks`): the columns and their checks are the model's bulk, and the
loader's checks (`replay.store.validate`) share `time_problem` and `first_bad_time`.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, overload

import attrs

__all__ = ["MAX_SECONDS", "Chunk", "Chunks", "first_bad_time", "kind_of", "seconds", "time_problem"]


def kind_of(value: object) -> str:
    """What `value` is, for a message that must not show it: its type (and length)."""
    if isinstance(value, (str, bytes, tuple, list)):
        return f"{type(value).__name__} of length {len(value)}"
    return type(value).__name__


#: The latest a recorded time may be: one week after the request was sent, far past any real
#: recording. Every time a cassette holds is bounded so, in the file and in code alike: a
#: crafted file's `1e300` would otherwise overflow each wait and each axis drawn from it.
MAX_SECONDS = 7 * 24 * 3600.0


def time_problem(value: float) -> str | None:
    """What is wrong with the number `value` as a recorded time; None if nothing."""
    if 0 <= value <= MAX_SECONDS:
        return None
    shown = _shown_number(value)
    if 0 <= value < math.inf:
        return f"must be at most {MAX_SECONDS:g} s (one week: past any real recording), not {shown}"
    return f"must be a finite, non-negative number of seconds, not {shown}"  # NaN too


def _shown_number(value: float) -> str:
    """`value` for a message: as it is, unless it is an integer of many digits."""
    try:
        text = repr(value)
    except ValueError:  # an int past `sys.get_int_max_str_digits`
        return "an integer of thousands of digits"
    return text if len(text) <= 24 else f"an integer of {len(text)} digits"


def seconds(_instance: object, attribute: attrs.Attribute[float], value: float) -> None:
    """The attrs validator of a recorded time: a number from 0 to `MAX_SECONDS`."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{attribute.name} must be a number of seconds, not {value!r}")
    if not 0 <= value <= MAX_SECONDS:  # also rejects NaN
        raise ValueError(f"{attribute.name} {time_problem(value)}")


@attrs.frozen
class Chunk:
    """One piece of a response body as the network delivered it.

    Args:
        at: seconds from sending the request to this chunk's arrival.
        data: the raw bytes (still compressed, if the response was).
    """

    at: float = attrs.field(validator=seconds)
    data: bytes = attrs.field(validator=attrs.validators.instance_of(bytes))


class Chunks(Sequence[Chunk]):
    """A body's chunks, kept as two columns: arrival times and payloads.

    A sequence of `Chunk` values to its readers; underneath, two tuples, so a 10,000-chunk
    cassette loads and replays without building 10,000 objects (each `Chunk` is made when
    asked for). The columns are validated at once, with C-level passes over them.

    Args:
        times: seconds from sending the request to each chunk's arrival; finite,
            non-negative and non-decreasing.
        payloads: each chunk's bytes.
    """

    __slots__ = ("payloads", "times")

    def __init__(self, times: Sequence[float] = (), payloads: Sequence[bytes] = ()) -> None:
        self._fill(tuple(times), tuple(payloads), floats=False)

    @classmethod
    def _of_floats(cls, times: tuple[float, ...], payloads: tuple[Any, ...]) -> Chunks:
        """`Chunks(times, payloads)` when every time is known to be a float (the loader's
        msgpack float64s): one pass over the column the fewer."""
        chunks = cls.__new__(cls)
        chunks._fill(times, payloads, floats=True)
        return chunks

    @classmethod
    def _kept(cls, times: tuple[float, ...], payloads: Sequence[bytes]) -> Chunks:
        """`Chunks(times, payloads)` of a recording's payloads kept elsewhere than in memory
        (`replay.store.spool.SpooledPayloads`: bytes each, read when asked for), as they are."""
        chunks = cls.__new__(cls)
        if len(times) != len(payloads):
            raise ValueError(f"{len(times)} chunk times for {len(payloads)} payloads")
        if times:
            _check_times(times)
        chunks.times = times
        chunks.payloads = payloads
        return chunks

    def _fill(self, times: tuple[float, ...], payloads: tuple[Any, ...], *, floats: bool) -> None:
        if len(times) != len(payloads):
            raise ValueError(f"{len(times)} chunk times for {len(payloads)} payloads")
        if times:
            _check_times(times, floats=floats)
        # (counting types by identity is a third cheaper than collecting them in a set)
        if operator.countOf(map(type, payloads), bytes) != len(payloads):
            index = next(i for i, p in enumerate(payloads) if type(p) is not bytes)
            raise TypeError(f"chunk {index}: data must be bytes, not {kind_of(payloads[index])}")
        self.times: tuple[float, ...] = times
        #: A tuple, but for a long recording's (see `_kept`).
        self.payloads: Sequence[bytes] = payloads

    @classmethod
    def of(cls, chunks: Iterable[Chunk]) -> Chunks:
        """The columns of `chunks` (a `Chunks` is returned as it is)."""
        if isinstance(chunks, Chunks):
            return chunks
        items = tuple(chunks)
        for index, chunk in enumerate(items):
            if not isinstance(chunk, Chunk):
                raise TypeError(f"chunk {index} must be a Chunk, not {kind_of(chunk)}")
        return cls(tuple(c.at for c in items), tuple(c.data for c in items))

    def __len__(self) -> int:
        return len(self.times)

    @overload
    def __getitem__(self, index: int) -> Chunk: ...
    @overload
    def __getitem__(self, index: slice) -> Chunks: ...
    def __getitem__(self, index: int | slice) -> Chunk | Chunks:
        if isinstance(index, slice):
            return Chunks(self.times[index], self.payloads[index])
        return Chunk(self.times[index], self.payloads[index])

    def __iter__(self) -> Iterator[Chunk]:
        return map(Chunk, self.times, self.payloads)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Chunks):
            return self.times == other.times and self.payloads == other.payloads
        if isinstance(other, (tuple, list)):
            return tuple(self) == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash((self.times, self.payloads))

    def __repr__(self) -> str:
        return f"Chunks({list(self)!r})"


def _check_times(times: tuple[float, ...], *, floats: bool = False) -> None:
    """Raise unless `times` are numbers with 0 <= t0 <= t1 <= ... <= `MAX_SECONDS`.

    C-level passes only: sorting a column already in order finds one run; the first time
    bounds them all below, the last above; a finite sum rules out NaN (a sum that overflows
    only sends a good column down the slow path). Only a failure walks the column, to name
    the chunk at fault. Messages may show times, never payloads.
    """
    if not floats and not set(map(type, times)) <= {float, int}:  # bool (an int) is refused
        index = next(i for i, t in enumerate(times) if type(t) not in (float, int))
        shown = kind_of(times[index])
        raise TypeError(f"chunk {index}: at must be a number of seconds, not {shown}")
    if (
        tuple(sorted(times)) == times
        and times[0] >= 0
        and times[-1] <= MAX_SECONDS
        and sum(times) < math.inf
    ):
        return
    index, problem = first_bad_time(times)
    if problem is not None:
        raise ValueError(f"chunk {index}: at {problem}")
    raise ValueError(
        f"chunk {index} arrives at {times[index]} s, before chunk {index - 1} "
        f"({times[index - 1]} s)"
    )


def first_bad_time(times: Sequence[float]) -> tuple[int, str | None]:
    """The first chunk of the numbers `times` that a column cannot hold, and what is wrong
    with its time (`time_problem`), or None: it comes before the time ahead of it.

    On the way to an error only: some chunk must be at fault.
    """
    for index, at in enumerate(times):
        problem = time_problem(at)
        if problem is not None:
            return index, problem
        if index and at < times[index - 1]:
            return index, None
    raise AssertionError("no chunk time is at fault")  # pragma: no cover
