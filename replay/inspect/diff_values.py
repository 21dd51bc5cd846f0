"""The values of `replay diff`: how two cassettes differ, pair by pair, and in timing.

Below both `replay.inspect.diff` (which compares and makes them, and exports them) and
`replay.inspect.diff_text` (which lays them out as text).
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Sequence
from typing import Literal

import attrs

from replay.model import Interaction, Response, TimedEvent

__all__ = ["CassetteDiff", "EventChange", "InteractionDiff", "TextDiff", "Timing"]


@attrs.frozen
class Timing:
    """When a response's events came, in seconds since its request was sent.

    Args:
        first: the first event (for a response that is not a stream: its first byte), or
            None when there was none.
        total: the end of the body.
        median_gap: the median time between consecutive events (None for fewer than two).
        max_gap: the largest time between consecutive events (None for fewer than two).
    """

    first: float | None
    total: float
    median_gap: float | None = None
    max_gap: float | None = None

    @classmethod
    def of(cls, response: Response, events: Sequence[TimedEvent] | None) -> Timing:
        """The timing of `response`: of its `events`, or of its chunks when it has none."""
        times = [e.at for e in events] if events is not None else [c.at for c in response.chunks]
        gaps = [later - earlier for earlier, later in itertools.pairwise(times)]
        return cls(
            first=times[0] if times else None,
            total=response.duration,
            median_gap=statistics.median(gaps) if gaps else None,
            max_gap=max(gaps) if gaps else None,
        )


@attrs.frozen
class EventChange:
    """A run of events that differ: A's events `[a_start, a_end)` became B's `[b_start, b_end)`.

    `kind` is `removed` (B has none of them), `added` (A has none), or `changed`.
    """

    kind: Literal["changed", "removed", "added"]
    a_start: int
    a_end: int
    b_start: int
    b_end: int


@attrs.frozen
class TextDiff:
    """One text of the streams that differs: its name (`text`, `reasoning`, `tool call 0`…)
    and what A and B say (empty when one says nothing of that name)."""

    name: str
    a: str
    b: str


@attrs.frozen(kw_only=True)
class InteractionDiff:
    """How interaction `index` of A and of B differ.

    Args:
        index: the position of the interaction in both cassettes.
        a, b: the interactions; None when that cassette has no interaction `index`.
        notes: differences in words: request, status, how the body ended, body bytes.
        events_a, events_b: the events of each stream as compared: the values of ignored
            fields hidden (empty for a response that is not a stream).
        changes: the runs of events that differ.
        texts: the texts that differ.
        timing_a, timing_b: the timing of each response (None when absent).
    """

    index: int
    a: Interaction | None
    b: Interaction | None
    notes: tuple[str, ...] = ()
    events_a: tuple[TimedEvent, ...] = ()
    events_b: tuple[TimedEvent, ...] = ()
    changes: tuple[EventChange, ...] = ()
    texts: tuple[TextDiff, ...] = ()
    timing_a: Timing | None = None
    timing_b: Timing | None = None

    @property
    def differs(self) -> bool:
        """True when anything but timing differs (or only one cassette has the interaction)."""
        return self.a is None or self.b is None or bool(self.notes or self.changes or self.texts)

    @property
    def timing_differs(self) -> bool:
        """True when both have the interaction and its timing differs in any figure."""
        return None not in (self.timing_a, self.timing_b) and self.timing_a != self.timing_b


@attrs.frozen
class CassetteDiff:
    """How two cassettes differ, interaction by interaction (every pair, equal ones too)."""

    interactions: tuple[InteractionDiff, ...]

    @property
    def differs(self) -> bool:
        """True when any interaction differs in more than its timing."""
        return any(item.differs for item in self.interactions)

    @property
    def timing_differs(self) -> bool:
        """True when the timing of any pair of interactions differs."""
        return any(item.timing_differs for item in self.interactions)
