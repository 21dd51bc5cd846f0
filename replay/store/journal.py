"""What a recording session has finished, kept beside its cassette as it finishes.

A session merges what it recorded into its cassette when it ends. A process that dies
before (SIGKILL, an OOM kill, a crash) would lose all of it, so a session that records
also writes each interaction to a parts directory beside the cassette once it has finished
(and been redacted: the very interaction the cassette would store). It is the parts
directory of `replay record` (`replay.run.site.parts`): `.<name>.replay-<pid>-<random>`,
held by the living process through a shared lock, one small cassette a part. When the
session ends it merges as before and removes the directory; when the process dies, the
directory stays, and the next session that records into the same cassette (or `replay
record` into it) merges it and removes it (`recover`). `replay show` says it is there.

A child process's session (`CassetteSession.become_descendant`: a process started inside a
session, `replay.run.descendants`) writes each part at once, as it may be killed or end with
`os._exit` the moment its work is done, and never merges: the parent's session, when it
ends, merges the parts of its children that have ended (`Children`: the directories no
living process holds) with its own recordings, in one merge.

Each part is written to a temporary name and renamed, so a part is whole or absent; it is
not fsynced (the page cache outlives a killed process; only the end of a session, which
saves the cassette itself, pays for an fsync). A recording still streaming when the
process dies has no part: it is not stored, rather than stored as if whole. A session of
record mode "all" marks its parts as replacing what the cassette holds for the same
requests by its own matchers (`_parts.MATCH_ON`, when they are named ones), the others as
added to it (`_parts.APPENDED`), as its own merge would; a process
killed between its merge and the removal of its parts has them merged again: harmless for
"all", a duplicate otherwise (a window of a few system calls).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from replay.model import Interaction
from replay.run.site.parts import APPENDED, MATCH_ON, PartsDirectory, take_abandoned
from replay.store.file import write_document

__all__ = ["DURABLE_AFTER", "Children", "Journal"]

#: Seconds a session records before its parts are written: a test's usual session (a few
#: short streams in milliseconds) writes none, and a killed one loses no more than that.
DURABLE_AFTER = 0.5

# The system's monotonic clock, which virtual time (`replay.clock.vtime`) does not move.
_now = getattr(time, "clock_gettime", None)


def _seconds() -> float:
    return time.monotonic() if _now is None else _now(time.CLOCK_MONOTONIC)


class Journal:
    """The parts of what a session into the cassette at `cassette` has `recorded` (its
    finished interactions, redacted, in order), written once the session is `DURABLE_AFTER`
    seconds old; merged as they replace what the cassette holds for the same requests by the
    matchers `replacing` (record mode "all"), or, when None, added to it. Thread-safe
    (recordings finish on reader threads)."""

    def __init__(
        self, cassette: Path, recorded: Sequence[Interaction], *, replacing: Sequence[Any] | None
    ) -> None:
        self.cassette = cassette
        self.recorded = recorded
        self.replacing = replacing
        self._lock = threading.Lock()
        self._parts: PartsDirectory | None = None
        self._pid = os.getpid()
        self._written = 0
        self._closed = False
        self._from = _seconds() + DURABLE_AFTER

    def sync(self, *_: object) -> None:
        """Write what was recorded since the last call, one part each, if the session is old
        enough (else nothing: a later call writes it). A failure (the disk full...) only
        means that what follows is kept in memory, as it always is, until the session ends."""
        with self._lock:
            if self._closed or (self._parts is None and _seconds() < self._from):
                return
            if self._pid != os.getpid():  # a forked child: its parent's directory is not its own
                self._pid, self._parts, self._written = os.getpid(), None, 0
            try:
                if self._parts is None:
                    self._parts = PartsDirectory.create(self.cassette)
                    _mark(self._parts.path, self.replacing)
                for interaction in self.recorded[self._written :]:
                    self._written += 1
                    _write_part(self._parts.path, f"{self._pid}-{self._written:06d}", interaction)
            except OSError:
                self._closed = True

    def make_immediate(self) -> None:
        """Write each part as soon as it is recorded, from now on (a child process: it may be
        killed, or end with `os._exit`, the moment its work is done)."""
        if self._pid != os.getpid():  # forked: the lock may have been held by another thread
            self._lock = threading.Lock()
        with self._lock:
            self._from = float("-inf")
        self.sync()

    def children(self) -> Children:
        """What the session's child processes that have ended left beside the cassette."""
        return Children(self.cassette)

    def stop(self) -> None:
        """Write no more parts (the session is ending: it saves what is left itself)."""
        with self._lock:
            self._closed = True

    def close(self, saved: bool) -> None:
        """The session has ended: remove the parts if what they hold was `saved` into the
        cassette, else keep them for the next session to merge."""
        with self._lock:
            self._closed = True
            parts, self._parts = self._parts, None
            if parts is None or self._pid != os.getpid():
                return
        if saved:
            parts.remove_if_unused()
        else:
            parts.close()


def _mark(directory: Path, replacing: Sequence[Any] | None) -> None:
    """Say in `directory` how its parts merge: added (`APPENDED`), or replacing by the named
    matchers `replacing` (`MATCH_ON`; the default ones when it names none, or a callable)."""
    if replacing is None:
        (directory / APPENDED).touch()
    elif all(isinstance(name, str) for name in replacing):
        (directory / MATCH_ON).write_text("\n".join(replacing))


def _write_part(directory: Path, name: str, interaction: Interaction) -> None:
    """Write a one-interaction cassette `name`.msgpack in `directory`, whole or not at all."""
    temporary = directory / f".{name}.tmp"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as file:
            write_document(file, [interaction])
        os.replace(temporary, directory / f"{name}.msgpack")
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


class Children:
    """The parts directories beside `cassette` that no living process holds (the child
    processes of a session that have ended, or killed sessions), taken, and what they hold
    (`recorded`); `close` removes them once merged, else lets go of them."""

    def __init__(self, cassette: Path) -> None:
        self.recorded: list[Interaction] = []
        self._taken: list[tuple[PartsDirectory, list[Path]]] = []
        for directory in take_abandoned(cassette):
            try:
                recorded, files = directory.read()
            except (OSError, ValueError):  # damaged: kept, for `replay record` to report
                directory.close()
                continue
            self.recorded += recorded
            self._taken.append((directory, files))

    def close(self, saved: bool) -> None:
        """Remove the parts if what they hold was `saved` into the cassette, else keep them."""
        for directory, files in self._taken:
            if saved:
                for file in files:
                    file.unlink(missing_ok=True)
                directory.remove_if_unused()
            else:
                directory.close()
