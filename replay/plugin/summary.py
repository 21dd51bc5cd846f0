"""What a pytest run's cassette sessions did, summed up: the `replay` section of the summary.

Each session leaves a `SessionRecord` (plain data, so that pytest-xdist carries it from the
workers on the test reports); `SessionLog` adds them up. Unplayed interactions are judged
once per cassette file at the end of the run, not per session: a cassette shared by several
tests is judged on what all of them played.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypeAlias

__all__ = ["SessionLog", "SessionRecord", "Unplayed"]

#: An interaction a session loaded and did not play: its index in the file, "METHOD URL
#: body…" (redacted), and its request's key (`fresh` of the session that recorded it).
Unplayed: TypeAlias = "tuple[int, str] | tuple[int, str, str]"


class SessionRecord:
    """One use of one cassette.

    A plain class, not a dataclass: making a dataclass costs about as much as a hundred
    sessions' records, in the first cassette's import of every run.

    Attributes:
        path: the cassette, as shown (relative to the rootdir when under it).
        test: the test that used it (its node id), "" outside any test.
        replayed: the plays of this use.
        recorded: the interactions it recorded.
        saved: whether it wrote the file.
        loaded: how many interactions it loaded from the file.
        unplayed: the loaded interactions it did not play, as [index, "METHOD URL body…",
            key].
        judged: False when a request had no match: what it left unplayed says nothing then.
        fresh: the keys of the requests it recorded: an interaction another session of the
            run loaded and left is not unplayed if this run recorded it.
    """

    __slots__ = (
        "fresh",
        "judged",
        "loaded",
        "path",
        "recorded",
        "replayed",
        "saved",
        "test",
        "unplayed",
    )

    def __init__(
        self,
        path: str,
        test: str = "",
        replayed: int = 0,
        recorded: int = 0,
        saved: bool = False,
        loaded: int = 0,
        unplayed: tuple[Unplayed, ...] = (),
        judged: bool = True,
        fresh: tuple[str, ...] = (),
    ) -> None:
        self.path = path
        self.test = test
        self.replayed = replayed
        self.recorded = recorded
        self.saved = saved
        self.loaded = loaded
        self.unplayed = unplayed
        self.judged = judged
        self.fresh = fresh

    def to_dict(self) -> dict[str, object]:
        """Plain data (what xdist can serialize)."""
        # (Written out, in step with `_FIELDS`: made once a test, where a loop over `_FIELDS`
        # costs three times as much.)
        return {
            "path": self.path,
            "test": self.test,
            "replayed": self.replayed,
            "recorded": self.recorded,
            "saved": self.saved,
            "loaded": self.loaded,
            "unplayed": self.unplayed,
            "judged": self.judged,
            "fresh": self.fresh,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SessionRecord:
        """The inverse of `to_dict`."""
        unplayed = tuple(
            (int(entry[0]), *(str(part) for part in entry[1:])) for entry in data["unplayed"]
        )
        fresh = tuple(str(key) for key in data.get("fresh", ()))
        return cls(**{**data, "unplayed": unplayed, "fresh": fresh})

    def __eq__(self, other: object) -> bool:
        if type(other) is not SessionRecord:
            return NotImplemented
        return all(getattr(self, name) == getattr(other, name) for name in _FIELDS)

    __hash__ = None  # type: ignore[assignment]  # (equal by value, and mutable)

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in _FIELDS)
        return f"SessionRecord({fields})"


_FIELDS = (
    "path",
    "test",
    "replayed",
    "recorded",
    "saved",
    "loaded",
    "unplayed",
    "judged",
    "fresh",
)


class SessionLog:
    """The records of every session of a run."""

    def __init__(self) -> None:
        self.records: list[SessionRecord] = []

    def add(self, record: SessionRecord) -> None:
        """Add one session's record."""
        self.records.append(record)

    def unplayed(self) -> dict[str, list[str]]:
        """Per cassette file, the interactions no session of the run played nor recorded,
        each as "#index METHOD URL body…".

        A file a session could not fully match (a mismatch) is left out.
        """
        # Only a file some session left something of can have anything left: in a suite
        # that plays all it loads, that is none, found in one pass.
        left_some = {record.path for record in self.records if record.unplayed}
        by_path: dict[str, list[SessionRecord]] = {}
        for record in self.records:
            if record.path in left_some:
                by_path.setdefault(record.path, []).append(record)
        found = {}
        for path, records in by_path.items():
            if all(record.judged for record in records):
                left = _never_played(records)
                if left:
                    found[path] = left
        return found

    def users(self, path: str) -> list[str]:
        """The tests that used the cassette at `path`."""
        return sorted({record.test for record in self.records if record.path == path} - {""})

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
        unplayed = self.unplayed()
        lines.append(f"unplayed interactions: {sum(len(left) for left in unplayed.values())}")
        for path, requests in sorted(unplayed.items()):
            lines.extend(_unplayed_lines(path, requests))
        return lines


def _never_played(records: Iterable[SessionRecord]) -> list[str]:
    """The interactions of one file that every session which loaded them left unplayed, and
    that no session of the run recorded (a cassette tests share, recorded as they run)."""
    played: set[int] = set()
    fresh: set[str] = set()
    left: dict[int, Unplayed] = {}
    for record in records:
        unplayed = {entry[0]: entry for entry in record.unplayed}
        played.update(index for index in range(record.loaded) if index not in unplayed)
        left.update(unplayed)
        fresh.update(record.fresh)
    return [
        f"#{index} {entry[1]}"
        for index, entry in sorted(left.items())
        if index not in played and (len(entry) < 3 or entry[2] not in fresh)
    ]


def _unplayed_lines(path: str, requests: Iterable[str]) -> list[str]:
    return [f"  {path} {request}" for request in requests]
