"""`SeenInUse`: what the current (or last) use of a cassette session saw.

The part of `CassetteSession` that reports on a use once it ran (or while it runs): the
pytest plugin's summary and the `replay record` child read it. Kept apart from the life of
the session (`replay.session.lifecycle`), which sets the attributes it reads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from replay.clock import Speed
    from replay.engine.player import Player
    from replay.engine.recorder import Tape
    from replay.errors import CassetteMismatchError
    from replay.faults import Injector
    from replay.session.options import SessionOptions
    from replay.store.cassette import Cassette

__all__ = ["SeenInUse"]


class SeenInUse:
    """What the current (or last) use of a session saw: its faults' attempts, its cassette,
    its mismatches, and its recordings' warnings."""

    options: SessionOptions
    speed: Speed
    _player: Player | None
    _last_player: Player | None
    _tape: Tape | None
    _last_tape: Tape | None
    _loaded: int

    @property
    def injector(self) -> Injector:
        """The faults with the attempts each interaction had in the current (or last) use."""
        player = self._player or self._last_player
        if player is not None:
            return player.injector
        from replay.faults import Injector

        return Injector(self.options.faults)

    @property
    def last_used(self) -> tuple[Cassette, int] | None:
        """The cassette of the current (or last) use, and how many of its interactions were
        loaded from the file (the rest were recorded in that use); None before any use."""
        player = self._player or self._last_player
        return None if player is None else (player.cassette, self._loaded)

    @property
    def read_on_loop(self) -> list[str]:
        """The recordings of the current (or last) use whose chunks were stamped on the
        client's event loop, as "METHOD URL": their gaps include any time the client held
        its loop up (see `replay.adapters.netthread` for the transports read from a thread)."""
        tape = self._tape or self._last_tape
        return list(tape.read_on_loop) if tape is not None else []

    @property
    def keys_in_responses(self) -> list[str]:
        """The recordings of the current (or last) use whose response body holds a
        well-known key's shape, as "METHOD URL" (redacted): stored as they came, and
        warned of (`KeyInResponseWarning`) when the use ends."""
        tape = self._tape or self._last_tape
        return list(tape.keys_in_responses) if tape is not None else []

    @property
    def mismatches(self) -> list[CassetteMismatchError]:
        """The mismatches raised in the current (or last) use, even if the client swallowed
        them (an SDK may wrap or retry): the pytest plugin reports them on failure."""
        player = self._player or self._last_player
        return player.mismatches if player is not None else []

    def speed_note(self) -> str | None:
        """The speed policy, when it draws from a seed (jitter): what replays the same times."""
        speed = self.speed
        if isinstance(speed, (int, float)) or speed.jitter is None:
            return None
        return f"speed policy {speed} (seed {speed.seed}: the same spec replays the same times)"

    def note_failure(self, error: BaseException | None) -> None:
        """Add to `error` (None: none), leaving the session, the faults it injected and its
        seeded speed policy: their specs, seeds included, replay the same stream."""
        if error is None:
            return
        lines = []
        if self.options.faults:
            lines += [f"{fault!r}: {fault.describe()}" for fault in self.injector.injected()]
        note = self.speed_note()
        if note is not None:
            lines.append(note)
        add_note = getattr(error, "add_note", None)  # (Python 3.11 on)
        if lines and add_note is not None:
            add_note("replay: " + "\nreplay: ".join(lines))
