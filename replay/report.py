"""What cassette sessions did, summed up for people: the pytest summary and the CLI.

Each session leaves a `SessionRecord` (plain data, so pytest-xdist can carry it from the
workers); `SessionLog` adds them up and words the summary.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

__all__ = ["SessionLog", "SessionRecord"]


def _to_strings(values: Iterable[str]) -> tuple[str, ...]:
    return tuple(values)


@attrs.frozen(kw_only=True)
class SessionRecord:
    """One use of one cassette."""

    path: str
    replayed: int
    recorded: int
    saved: bool
    unplayed: tuple[str, ...] = attrs.field(converter=_to_strings, default=())

    def to_dict(self) -> dict[str, object]:
        """Plain data (what xdist can serialize)."""
        return attrs.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> SessionRecord:
        """The inverse of `to_dict`."""
        return cls(**data)  # type: ignore[arg-type]


@attrs.define
class SessionLog:
    """The records of every session of a run."""

    records: list[SessionRecord] = attrs.field(factory=list)

    def add(self, record: SessionRecord) -> None:
        """Add one session's record."""
        self.records.append(record)

    def summary_lines(self) -> list[str]:
        """The terminal summary: cassettes, interactions replayed and recorded, files, unplayed."""
        records = self.records
        if not records:
            return []
        paths = {r.path for r in records}
        written = sorted({r.path for r in records if r.saved})
        lines = [
            f"cassettes used: {len(paths)}; interactions replayed: "
            f"{sum(r.replayed for r in records)}, recorded: {sum(r.recorded for r in records)}",
            f"files written: {len(written)}",
        ]
        lines.extend(f"  {path}" for path in written)
        unplayed = [r for r in records if r.unplayed]
        lines.append(f"unplayed interactions: {sum(len(r.unplayed) for r in unplayed)}")
        for record in unplayed:
            lines.extend(_unplayed_lines(record.path, record.unplayed))
        return lines


def _unplayed_lines(path: str, requests: Iterable[str]) -> list[str]:
    return [f"  {path}: {request}" for request in requests]
