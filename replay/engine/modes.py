"""Record modes (vcrpy's names): what a session may replay and what it may record.

    none          replay only; an unmatched request raises before any connection is attempted.
    once          record if the cassette file does not exist yet, else replay only.
    new_episodes  replay what matches, record the rest.
    all           record everything, replay nothing; re-recorded requests replace old ones.

`forced_record_mode` imposes one mode on every session of the process (pytest's
`--record-mode`), so that `--record-mode=none` holds for the decorator form and direct
library calls too.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from typing import Literal

from replay.errors import ConfigurationError
from replay.session.imposed import current, imposed

__all__ = [
    "RECORD_MODES",
    "RecordMode",
    "check",
    "forced_record_mode",
    "in_force",
    "may_replay_and_record",
    "why_not_recorded",
]

RecordMode = Literal["none", "once", "new_episodes", "all"]
RECORD_MODES: tuple[str, ...] = ("none", "once", "new_episodes", "all")

_WHY_NOT_RECORDED = {
    "none": "Record mode 'none' only replays: it never records.",
    "once": "Record mode 'once' only replays, because the cassette file already existed.",
}


def check(record_mode: str) -> str:
    """`record_mode`, if it is one of `RECORD_MODES`.

    Raises:
        ConfigurationError: an unknown record mode.
    """
    if record_mode not in RECORD_MODES:
        raise ConfigurationError(
            f"unknown record mode {record_mode!r}: use one of {', '.join(RECORD_MODES)}"
        )
    return record_mode


@contextlib.contextmanager
def forced_record_mode(record_mode: str) -> Iterator[None]:
    """Within the block, every cassette session uses `record_mode`, whatever it was given.

    Raises:
        ConfigurationError: an unknown record mode.
    """
    with imposed(dataclasses.replace(current(), record_mode=check(record_mode))):
        yield


def in_force(requested: str | None) -> str:
    """The mode a session entered now uses: the forced one, if any, else `requested`, else
    the run's default, else "once"."""
    settings = current()
    return settings.record_mode or requested or settings.default_record_mode or "once"


def may_replay_and_record(mode: str, existed: bool) -> tuple[bool, bool]:
    """Whether a session in `mode` may replay, and whether it may record, given whether its
    cassette file `existed` when it was entered."""
    may_replay = mode in ("none", "new_episodes") or (mode == "once" and existed)
    may_record = mode in ("new_episodes", "all") or (mode == "once" and not existed)
    return may_replay, may_record


def why_not_recorded(mode: str) -> str:
    """Why a session in `mode` did not record a request it could not replay ("" if none)."""
    return _WHY_NOT_RECORDED.get(mode, "")
