"""The exceptions replay raises.

    ReplayError
    ├── CassetteFormatError (ValueError)   a cassette file that cannot be read
    ├── CassetteMismatchError (LookupError) a request the cassette cannot answer
    └── ConfigurationError (ValueError)     a bad argument: speed, record mode, matcher…

Each constructor takes typed fields and builds its message; no message ever echoes a
secret (requests in messages are redacted first).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

__all__ = [
    "CassetteFormatError",
    "CassetteMismatchError",
    "ConfigurationError",
    "ReplayError",
]


class ReplayError(Exception):
    """Base class of every error replay raises on purpose."""


class CassetteFormatError(ReplayError, ValueError):
    """A cassette file is truncated, garbled, of the wrong shape, or of a newer format."""

    def __init__(self, path: Path | str | None, problem: str) -> None:
        self.path = None if path is None else Path(path)
        self.problem = problem
        where = "cassette" if path is None else f"cassette {str(path)!r}"
        super().__init__(f"cannot read {where}: {problem}")


class ConfigurationError(ReplayError, ValueError):
    """An argument replay was given makes no sense (a speed of 0, an unknown record mode…)."""


class CassetteMismatchError(ReplayError, LookupError):
    """No recorded interaction answers a request, and the record mode forbids recording.

    Attributes:
        method, url: the request that found no answer (already redacted).
        cassette_path: the cassette file, if it has one.
        nearest: the nearest recorded request as "METHOD URL", or None for an empty cassette.
        differences: for the nearest request, (matcher name, how it differs) pairs.
    """

    def __init__(
        self,
        *,
        method: str,
        url: str,
        cassette_path: Path | str | None,
        record_mode: str,
        nearest: str | None = None,
        differences: Sequence[tuple[str, str]] = (),
        reason: str = "",
    ) -> None:
        self.method = method
        self.url = url
        self.cassette_path = None if cassette_path is None else Path(cassette_path)
        self.record_mode = record_mode
        self.nearest = nearest
        self.differences = tuple(differences)
        where = (
            "the in-memory cassette"
            if cassette_path is None
            else f"cassette {str(cassette_path)!r}"
        )
        lines = [f"{method} {url} has no match in {where} (record mode {record_mode!r})"]
        if reason:
            lines.append(reason)
        if nearest is None:
            lines.append("The cassette has no interactions left to play.")
        else:
            lines.append(f"Nearest recorded request: {nearest}")
            for name, how in self.differences:
                how_lines = how.splitlines() or [""]
                lines.append(f"  {name} differs: {how_lines[0]}")
                lines.extend(f"    {line}" for line in how_lines[1:])
        lines.append(
            "To record it, use record_mode='new_episodes' (or 'all' to record everything again)."
        )
        super().__init__("\n".join(lines))
