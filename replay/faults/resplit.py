"""`resplit`: the recorded bytes re-split where parsers break, at points drawn from a seed.

    resplit(seed=7)                     inside UTF-8 characters and separators, events merged
    resplit(seed=7, at="utf8")          only inside multi-byte UTF-8 characters
    resplit(at=(), every=3)             every 3 bytes, and nowhere else

The points (`points`, pure): `"utf8"`, between the bytes of each multi-byte UTF-8 character;
`"separators"`, inside each `\\r\\n` and `\\n\\n` (and inside `\\r\\n\\r\\n`); `"events"`,
several events merged into one chunk (of the event boundaries of the body's framing, only
some are kept). The seed draws how many of each are taken, and which: each seed is another
split a network could deliver, the same every time. `every=N` adds a boundary every N bytes.
The body and its end are unchanged; each recorded chunk still completes at its recorded
time (`reshape.rechunk_at`). The fault's spec, which every failure report shows (the pytest
report's "faults injected" section, the note on the exception leaving `use_cassette`), is
what replays the same split: `resplit(seed=7)`.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import attrs

from replay.errors import ConfigurationError
from replay.faults import reshape
from replay.faults.types import Fault, Outcome, Predicate, count
from replay.model import Response

__all__ = ["KINDS", "Resplit", "points", "resplit"]

#: Where the re-split may fall: inside UTF-8 characters, inside separators, events merged.
KINDS = ("utf8", "separators", "events")
_SEPARATORS = (b"\r\n\r\n", b"\r\n", b"\n\n")
_SHARES = (0.25, 0.5, 1.0)  # how many of a kind's points a seed takes


def _inside_characters(body: bytes) -> list[int]:
    """The offsets between the bytes of each multi-byte UTF-8 character (before each
    continuation byte that follows a byte of the same character)."""
    return [i for i in range(1, len(body)) if 0x80 <= body[i] <= 0xBF and body[i - 1] >= 0x80]


def _inside_separators(body: bytes) -> list[int]:
    found: set[int] = set()
    for separator in _SEPARATORS:
        start = body.find(separator)
        while start >= 0:
            found.update(range(start + 1, start + len(separator)))
            start = body.find(separator, start + 1)
    return sorted(found)


def points(
    response: Response, seed: int, kinds: Sequence[str] = KINDS, every: int = 0
) -> list[int]:
    """The body offsets `resplit` ends chunks at (ascending), drawn from `seed`."""
    body = response.body
    rng = random.Random(seed)
    chosen: set[int] = set()
    for kind, candidates in (
        ("utf8", _inside_characters),
        ("separators", _inside_separators),
    ):
        if kind in kinds:
            share = rng.choice(_SHARES)
            chosen.update(p for p in candidates(body) if rng.random() < share)
    if kinds:
        ends = reshape.event_ends(response)
        if "events" in kinds:
            keep = 1 / rng.randint(2, 4)  # some 2 to 4 events a chunk
            chosen.update(end for end in ends if rng.random() < keep)
        else:
            chosen.update(ends)  # each event still ends a chunk
    if every:
        chosen.update(range(every, len(body), every))
    return sorted(chosen)


@attrs.frozen(kw_only=True, repr=False)
class Resplit(Fault):
    """The body re-split at adversarial points drawn from `seed` (see the module)."""

    seed: int = 0
    at: tuple[str, ...] = KINDS
    every: int = 0

    def transform(self, outcome: Outcome, attempt: int) -> Outcome:
        cuts = points(outcome.response, self.seed, self.at, self.every)
        return attrs.evolve(outcome, response=reshape.rechunk_at(outcome.response, cuts))

    def _what(self) -> str:
        where = {"utf8": "inside UTF-8 characters", "separators": "inside separators"}
        words = [where[kind] for kind in self.at if kind in where]
        if "events" in self.at:
            words.append("events merged")
        if self.every:
            words.append(f"every {self.every} bytes")
        return f"re-split {', '.join(words) or 'nowhere'} (seed {self.seed}: {self!r} replays it)"

    def _arguments(self) -> tuple[list[object], dict[str, object]]:
        keywords: dict[str, object] = {"seed": self.seed}
        if self.at != KINDS:
            keywords["at"] = ",".join(self.at)
        if self.every:
            keywords["every"] = self.every
        return [], keywords


def resplit(
    seed: int = 0,
    *,
    at: str | Sequence[str] = KINDS,
    every: int = 0,
    index: int | None = None,
    where: Predicate | None = None,
) -> Resplit:
    """Re-split the body where parsers break, at points drawn from `seed`: inside multi-byte
    UTF-8 characters ("utf8"), inside `\\r\\n` / `\\n\\n` ("separators"), several events in
    one chunk ("events"); `at` names which (a tuple, or "utf8,events"; "" or () for none),
    `every=N` adds a boundary every N bytes. The same seed gives the same split."""
    kinds = tuple(k.strip() for k in at.split(",") if k.strip()) if isinstance(at, str) else at
    unknown = [kind for kind in kinds if kind not in KINDS]
    if unknown or not isinstance(kinds, (tuple, list)):
        raise ConfigurationError(
            f"at must name some of {', '.join(KINDS)} (e.g. at='utf8,events'), not {at!r}"
        )
    every = count(every, "every")
    if not kinds and not every:
        raise ConfigurationError("resplit(at=()) needs every=N: it would split nowhere")
    if index is not None:
        count(index, "index")
    if where is not None and not callable(where):
        raise ConfigurationError(f"where must be a callable(Request) -> bool, not {where!r}")
    return Resplit(seed=count(seed, "seed"), at=tuple(kinds), every=every, index=index, where=where)
