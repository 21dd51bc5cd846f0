"""Whether bytes arrived on the real clock when their sender said, with bounds a loaded
2-core machine meets.

A sender (the local origin, `replay serve`) waits for an absolute deadline before each
piece, so no byte can arrive before it was due: that bound is exact, less a little for
the clock's granularity. A busy machine can only make a byte late (the sender or the
reader preempted), and a late reader gets several pieces in one read: each piece read is
therefore held against the due time of the last byte it holds, late by at most `LATE`.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterable, Sequence

#: How early a piece may seem: timer and clock granularity, never a real early byte.
EARLY = 0.002
#: How late a piece may be read: two CPU hogs beside the suite on 2 cores preempt a
#: sender or reader for up to ~0.3 s (measured); a pace off by a whole stream is not.
LATE = 0.5


def due_times(sent: Iterable[tuple[float, bytes]], *, gaps: bool) -> list[tuple[float, bytes]]:
    """`sent` as (seconds when due, bytes): `gaps` says its times are waits before each
    piece (the origin's `Script.chunks`), else they are already times since the start."""
    pieces = list(sent)
    if not gaps:
        return pieces
    times = itertools.accumulate(delay for delay, _ in pieces)
    return [(at, data) for at, (_, data) in zip(times, pieces, strict=True)]


def lateness(
    arrived: Sequence[tuple[float, bytes]], sent: Sequence[tuple[float, bytes]]
) -> list[float]:
    """For each piece in `arrived` (seconds since the start, bytes), how long after the
    last byte in it was due it arrived (negative: before it was due). Both streams must
    hold the same bytes."""
    assert b"".join(data for _, data in arrived) == b"".join(data for _, data in sent)
    ends = list(itertools.accumulate(len(data) for _, data in sent))  # offset after each
    late = []
    offset = 0
    for at, data in arrived:
        offset += len(data)
        last = bisect.bisect_left(ends, offset)  # the sent piece that holds its last byte
        late.append(at - sent[last][0])
    return late


def assert_paced(
    arrived: Sequence[tuple[float, bytes]],
    sent: Sequence[tuple[float, bytes]],
    *,
    late: float = LATE,
) -> None:
    """Every piece of `arrived` came no earlier than its last byte was due in `sent`
    (times since the start), and no more than `late` after."""
    for index, off in enumerate(lateness(arrived, sent)):
        assert -EARLY <= off <= late, f"piece {index} of {len(arrived)}: {off:+.3f} s off"
