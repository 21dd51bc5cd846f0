"""`ChildProcessSide`: what a cassette session does in a process other than its own.

The part of `CassetteSession` that a child process uses (`replay.run.descendants` carries a
session into every Python process started inside it): a forked child forgets what its
parent recorded, and a child process's session keeps each recording in parts as it finishes,
never merging them into the cassette (its parent does: `replay.session.file.save`), or
refuses to record when an option its parent redacts or matches with could not reach it.
Kept apart from the life of the session (`replay.session.lifecycle`), which reads these.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from replay.engine.recorder import Tape
    from replay.store.cassette import Cassette
    from replay.store.journal import Journal

__all__ = ["ChildProcessSide"]


class ChildProcessSide:
    """A session's side in a child process (a mixin of `CassetteSession`)."""

    cassette: Cassette | None
    _tape: Tape | None
    _journal: Journal | None
    #: Whether this is a child process's session: parts only, merged by the parent.
    _descendant = False
    #: Why the session refuses to record, if it does (`refuse_recording`).
    _refusal: str | None = None

    def after_fork(self) -> None:
        """In a forked child: forget what the parent recorded (the parent saves it) and its
        streams in flight (their threads did not survive the fork); become a descendant."""
        if self.cassette is not None:
            self.cassette.recorded.clear()
        if self._tape is not None:
            self._tape.forget()
        self.become_descendant()

    def become_descendant(self) -> None:
        """Record as a child process of the session's: keep each recording in parts as it
        finishes (the process may be killed, or end with `os._exit`, the moment its work is
        done), for the parent to merge (`replay.store.journal`), never merging here."""
        self._descendant = True
        if self._journal is not None:
            self._journal.make_immediate()

    def refuse_recording(self, reason: str | None) -> None:
        """From the next use on, refuse what would be recorded with `CassetteMismatchError`
        saying `reason` (what the cassette holds still replays); None: record again."""
        self._refusal = reason
