"""The cassette file around one use of a session: what it loads, what it records onto, what
it saves.

Loading, recovering what a killed session left (`replay.store.journal`), the tape a recording
use writes to (with its journal of parts), and the merge at the end. The recorder, the
journal and the spool are imported only by a use that may record: a replay never loads them.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from replay.engine.modes import may_replay_and_record
from replay.errors import CassetteFormatError
from replay.matching import Matcher
from replay.model import Interaction
from replay.store.file import load_interactions, merge

if TYPE_CHECKING:
    from replay.engine.recorder import Tape
    from replay.redact.redactor import Redactor
    from replay.store.cassette import Cassette
    from replay.store.journal import Journal

__all__ = ["load", "load_for", "open_tape", "recover", "save", "warn_keys_in_responses"]


def load(path: Path) -> tuple[list[Interaction], bool]:
    """The interactions of the cassette at `path`, and whether its file exists."""
    try:  # (one system call, where asking first whether it exists took two)
        return load_interactions(path), True
    except (FileNotFoundError, NotADirectoryError):
        return [], False
    except CassetteFormatError as error:
        from replay.convert.files import with_convert_hint  # (a YAML file given: the way out)

        raise with_convert_hint(path, error) from None


def load_for(
    path: Path, mode: str, *, recover_left: bool = True
) -> tuple[list[Interaction], bool, bool, bool]:
    """What a use of the cassette at `path` in record `mode` starts from: the interactions
    loaded, whether the file exists, and whether the use may replay and may record.

    A use that may record first merges what killed sessions left (`recover`), unless told
    not to (a child process's session: its parent merges)."""
    interactions, existed = load(path)
    may_replay, may_record = may_replay_and_record(mode, existed)
    if may_record and recover_left and recover(path):  # what a killed session left: merged
        interactions, existed = load(path)
        # "once" goes on with the recording that was killed: what it finished replays, the
        # rest records (recording it all again would store it twice)
        may_replay = may_replay or mode == "once"
    return interactions, existed, may_replay, may_record


def recover(path: Path) -> bool:
    """Merge into the cassette at `path` what killed sessions recording into it left beside
    it (`replay.store.journal`), and say so (a warning); whether anything was left."""
    from replay.run.site.parts import leftovers
    from replay.run.site.parts import recover as recover_parts

    if not leftovers(path):  # (the usual case: one listing of the directory)
        return False
    said = recover_parts(path, note_busy=False)
    if said is None:
        return False
    import logging

    logging.getLogger("replay").warning("%s", said.removeprefix("replay: "))
    return True


def open_tape(
    path: Path,
    cassette: Cassette,
    redactor: Redactor,
    replacing: Sequence[Matcher] | None,
    existed: bool,
) -> tuple[Journal, Tape]:
    """The tape a recording use of the file at `path` writes `cassette`'s recordings onto,
    and the journal that keeps each finished one in parts beside the file meanwhile
    (`replacing`: the matchers by which record mode "all" replaces old answers, as the merge
    at the end does; `existed`: whether the file did, when loaded).

    Raises:
        CassetteWriteError: the file exists but cannot be written, or is new and its
            directory cannot take it (now, before any request, not at the end).
    """
    from replay.adapters import stamper
    from replay.engine.recorder import Tape
    from replay.store.atomic import check_creatable, check_writable
    from replay.store.journal import Journal
    from replay.store.spool import Spool

    if existed:
        check_writable(path)  # now, not at exit: what it records would be lost then
    else:
        check_creatable(path)
    journal = Journal(path, cassette.recorded, replacing=replacing)
    tape = Tape(cassette, redactor, spool=Spool(path.parent), on_recorded=journal.sync)
    stamper.prepare()  # ready before the first recording (else its start counts in its ttfb)
    return journal, tape


def save(
    path: Path,
    cassette: Cassette,
    journal: Journal | None,
    replacing: Sequence[Matcher] | None,
    descendant: bool = False,
) -> bool:
    """Merge what `cassette` recorded into the file at `path` (`replacing`: the matchers by
    which record mode "all" replaces old answers), with what the session's child processes
    that have ended left beside it, in one merge; whether it wrote the file. The parts stay
    when it did not, for the next session to merge. A child process's session (`descendant`)
    only leaves its parts, for its parent."""
    if journal is not None and descendant:
        journal.sync()  # (what finished at the end: the rest is written already)
        journal.close(saved=False)
        return False
    saved = False
    if journal is not None:
        journal.stop()
    children = None if journal is None else journal.children()
    recorded = [*cassette.recorded, *([] if children is None else children.recorded)]
    try:
        if recorded:
            merge(path, recorded, replacing=replacing)
            saved = True
    finally:  # not saved: the parts stay, for the next session to merge
        if children is not None:
            children.close(saved=saved)
        if journal is not None:
            journal.close(saved=saved or not cassette.recorded)
    return saved


def warn_keys_in_responses(path: Path, requests: Sequence[str]) -> None:
    """Warn (`KeyInResponseWarning`) of the recordings whose response holds a key's shape."""
    import warnings

    from replay.errors import KeyInResponseWarning

    message = KeyInResponseWarning.describe(path, requests)
    warnings.warn(KeyInResponseWarning(message), stacklevel=4)  # (the `with` that ended)
