"""What a test run imposes on every cassette session entered while it runs.

The pytest plugin enters `imposed(...)` once per run, so that the three forms of a test's
cassette (the marker, the `cassette` fixture, and the library's `@replay.use_cassette` or
`with replay.use_cassette(...)`) behave as one: the command line's record mode binds them all,
the run's speed applies to those that choose none, and each session is shown to the run's
`Watcher` as it is entered and left (the summary, `--strict-cassettes`, failure reports).

This module imports nothing but the standard library: the plugin loads it in every run.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from replay.engine.advice import Advice

__all__ = ["Imposed", "Watcher", "current", "imposed"]


class Watcher(Protocol):
    """Told of each cassette session entered and left while a run imposes settings."""

    def entered(self, session: Any) -> None:
        """`session` (a `CassetteSession`) was just entered."""

    def left(self, session: Any) -> None:
        """`session` was just left: its recordings are saved, its plays counted."""


@dataclass(frozen=True)
class Imposed:
    """Settings a test run gives every session.

    Attributes:
        record_mode: the mode every session uses, whatever it asked for (`--record-mode`).
        default_record_mode: the mode of a session that asks for none (the ini file's).
        default_speed: the speed of a session that asks for none (`--replay-speed`, ini).
        watcher: told of each session entered and left.
        advice: how mismatch errors word their advice (`replay run`: in its flags).
        resolve: where a relative cassette path points (pytest: relative to the test file).
    """

    record_mode: str | None = None
    default_record_mode: str | None = None
    default_speed: str | None = None
    watcher: Watcher | None = None
    advice: Advice | None = None
    resolve: Callable[[Path], Path] | None = None


_NOTHING = Imposed()
_stack: list[Imposed] = []


@contextlib.contextmanager
def imposed(settings: Imposed) -> Iterator[None]:
    """Within the block, every cassette session entered uses `settings`."""
    _stack.append(settings)
    try:
        yield
    finally:
        _stack.remove(settings)


def current() -> Imposed:
    """The settings in force now (the innermost `imposed` block's; none outside any)."""
    return _stack[-1] if _stack else _NOTHING
