"""`Cassette`: recorded interactions and the bookkeeping of their use in one session.

The one stateful object among the values: which interactions were played (and how often),
which were recorded in this session, and the match index that finds an answer without a
scan. Loading and saving go through `replay.store.file`; matching through `replay.matching`.
It is not thread-safe on its own: the engine's `Player` takes it under one lock.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import attrs

from replay.errors import ConfigurationError
from replay.matching import DEFAULT_MATCH_ON, MatchIndex, MatchOn, answers_alike
from replay.model import Interaction, Request
from replay.store.file import load_interactions, save_interactions

__all__ = ["Cassette"]

#: Up to this many interactions, a request is first compared with the first unplayed one
#: (a scan of the play counts), before any index is built.
_SMALL = 64


def _to_interactions(interactions: Iterable[Interaction]) -> list[Interaction]:
    return list(interactions)


def _to_path(path: str | Path | None) -> Path | None:
    return path if path is None or isinstance(path, Path) else Path(path)


@attrs.define(eq=False)
class Cassette:
    """Recorded interactions, and which of them this session has played.

    `Cassette()` is an empty cassette; `Cassette.load(path)` reads one from disk.

    Args:
        interactions: the recorded interactions, in recording order.
        path: the file it was loaded from or will be saved to, if any.
        match_on: matcher names (vcrpy's: method, scheme, host, port, path, query, body,
            headers, uri…) or vcrpy-style callables deciding which request an interaction answers.
        allow_playback_repeats: let an interaction answer more than once.
    """

    interactions: list[Interaction] = attrs.field(factory=list, converter=_to_interactions)
    path: Path | None = attrs.field(default=None, converter=_to_path)
    match_on: MatchOn = attrs.field(default=DEFAULT_MATCH_ON, kw_only=True)
    allow_playback_repeats: bool = attrs.field(default=False, kw_only=True)
    play_counts: list[int] = attrs.field(init=False)
    recorded: list[Interaction] = attrs.field(init=False, factory=list)
    _index: MatchIndex | None = attrs.field(init=False, default=None)
    #: The WebSocket conversations replayed in this use, by interaction index (the engine's
    #: `Conversation`s: what each left unconsumed is `unconsumed`).
    conversations: dict[int, Any] = attrs.field(init=False, factory=dict)

    def __attrs_post_init__(self) -> None:
        self.play_counts = [0] * len(self.interactions)

    @classmethod
    def load(cls, path: str | Path, **options: Any) -> Cassette:
        """Read a cassette file (raises `CassetteFormatError` on anything unreadable)."""
        return cls(load_interactions(path), path=path, **options)

    def save(self, path: str | Path | None = None) -> Path:
        """Write every interaction to `path` (default: `self.path`) atomically."""
        target = Path(path) if path is not None else self.path
        if target is None:
            raise ConfigurationError("this cassette has no path: pass one to save()")
        save_interactions(target, self.interactions)
        return target

    @property
    def play_count(self) -> int:
        """How many responses this cassette has played back."""
        return sum(self.play_counts)

    @property
    def all_played(self) -> bool:
        """True when every interaction was played back (or recorded) at least once."""
        recorded = {id(interaction) for interaction in self.recorded}
        return all(
            count > 0 or id(interaction) in recorded
            for interaction, count in zip(self.interactions, self.play_counts, strict=False)
        )

    @property
    def unplayed(self) -> list[Interaction]:
        """The interactions neither played back nor recorded in this session."""
        recorded = {id(interaction) for interaction in self.recorded}
        return [
            interaction
            for interaction, count in zip(self.interactions, self.play_counts, strict=False)
            if count == 0 and id(interaction) not in recorded
        ]

    @property
    def unconsumed(self) -> dict[int, str]:
        """Per interaction index, what a WebSocket conversation replayed in this use left
        unconsumed (server frames never read, client frames never sent; one line), for
        those that left any: reported as unplayed interactions are."""
        found = {}
        for index, conversation in list(self.conversations.items()):
            left = conversation.leftovers()
            if left:
                found[index] = left.describe()
        return found

    def find(self, request: Request, *, among_first: int | None = None) -> int | None:
        """Take the interaction that answers `request`: its index, counted as played; or None.

        Args:
            among_first: consider only the first N interactions (a session passes the number
                it loaded, so that what it records itself is not replayed back to it).
        """
        index = None
        if self._index is None and len(self.play_counts) <= _SMALL:
            index = self._first_if_same(request, among_first)
        if index is None:
            index = self._match_index().take(request, self.play_counts, among_first=among_first)
        if index is not None:
            self.play_counts[index] += 1
        return index

    def _first_if_same(self, request: Request, among_first: int | None) -> int | None:
        """The first unplayed interaction, if its request is `request` byte for byte (method,
        URL, body) and the matchers look at nothing else: what the index answers then, as
        every earlier interaction has played. A test's cassette, replayed in the order it
        was recorded, so never builds an index."""
        counts = self.play_counts
        try:
            first = counts.index(0)
        except ValueError:
            return None
        if among_first is not None and first >= among_first:
            return None
        if answers_alike(self.match_on, self.interactions[first].request, request):
            return first
        return None

    def explain(self, request: Request) -> tuple[str | None, list[tuple[str, str]]]:
        """The nearest recorded request ("METHOD URL") and how each failing matcher differs."""
        return self._match_index().explain(request, self.play_counts)

    def release(self, index: int) -> None:
        """Take back one play of interaction `index` (an attempt a fault answered instead)."""
        self.play_counts[index] -= 1

    def append(self, interaction: Interaction) -> None:
        """Add a newly recorded interaction (it counts as used, not as played)."""
        self.interactions.append(interaction)
        self.play_counts.append(0)
        self.recorded.append(interaction)
        if self._index is not None:
            self._index.add(len(self.interactions) - 1, interaction.request)

    def _match_index(self) -> MatchIndex:
        if self._index is None:
            self._index = MatchIndex(
                [interaction.request for interaction in self.interactions],
                match_on=self.match_on,
                allow_playback_repeats=self.allow_playback_repeats,
            )
        return self._index
