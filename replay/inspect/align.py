"""Which events of two streams match: difflib's answer while it is cheap, a near-linear one
past that.

`replay diff` lines up two streams' events with `difflib.SequenceMatcher`, without autojunk
(so that frequent events, pings and deltas, are still compared). It finds the longest run of
matching events, then does the same on each side of it; each search costs a step per pair
of equal events in its ranges, so an event repeated thousands of times costs the product of
its counts (20,000 identical events: 4e8 steps, two minutes). Here what each search will
cost is counted before it runs, and all of them together get `BUDGET` steps: an ordinary
stream stays far within it and keeps difflib's answer. Past it, the events are lined up in
near-linear time instead (`_near_linear`):

- the head and tail the two have in common are set aside, in one pass;
- the middle gets Myers' shortest edit script, whose cost grows with the number of
  differences, not of repetitions (a million events with one change: a few steps);
- when that passes the budget too (streams long and different all through), the events
  that occur once on each side anchor the middle (as patience diff does), and each stretch
  between anchors is lined up the same way, with what budget is left, or, past it, counted
  as changed as a whole.

Every step is bounded: the whole costs `O((n + m) log(n + m))` plus at most three budgets.
"""

from __future__ import annotations

import bisect
import difflib
import itertools
import math
from collections import Counter
from collections.abc import Hashable, Sequence
from typing import Literal

__all__ = ["BUDGET", "Opcode", "opcodes"]

#: The steps difflib (then each near-linear stage) may take: about a second of Python.
BUDGET = 4_000_000

#: As `difflib.SequenceMatcher.get_opcodes` gives them: (tag, a_start, a_end, b_start, b_end).
Opcode = tuple[Literal["replace", "delete", "insert", "equal"], int, int, int, int]
_Block = tuple[int, int, int]  # a[i:i + size] == b[j:j + size]


def opcodes(a: Sequence[Hashable], b: Sequence[Hashable], budget: int = BUDGET) -> list[Opcode]:
    """How to turn `a` into `b`, as difflib's opcodes (`equal`, `replace`, `delete`,
    `insert`): difflib's own answer when it costs less than `budget` steps, else a
    near-linear one (see the module's docstring)."""
    codes: dict[Hashable, int] = {}  # equal keys, one small int: cheap to hash and compare
    ints_a = [codes.setdefault(key, len(codes)) for key in a]
    ints_b = [codes.setdefault(key, len(codes)) for key in b]
    return _Matcher(ints_a, ints_b, budget).get_opcodes()


class _OverBudget(Exception):
    """difflib would take more steps than it has left."""


class _Steps:
    """What is left of a budget of steps."""

    def __init__(self, left: int) -> None:
        self.left = left


class _Matcher(difflib.SequenceMatcher[int]):
    """difflib's matcher, each search paid for before it runs; past the budget, the
    matching blocks are the near-linear ones."""

    # difflib's own attributes, which its stubs do not declare.
    a: list[int]
    b: list[int]
    b2j: dict[int, list[int]]
    matching_blocks: list[difflib.Match] | None

    def __init__(self, a: list[int], b: list[int], budget: int) -> None:
        self._budget = budget
        self._left = budget
        super().__init__(None, a, b, autojunk=False)

    def find_longest_match(
        self, alo: int = 0, ahi: int | None = None, blo: int = 0, bhi: int | None = None
    ) -> difflib.Match:
        ahi = len(self.a) if ahi is None else ahi
        bhi = len(self.b) if bhi is None else bhi
        # The search visits each a[i] and, for each, the places of a[i] in b before bhi.
        places = map(self.b2j.get, self.a[alo:ahi], itertools.repeat(()))
        self._left -= ahi - alo + sum(map(bisect.bisect_left, places, itertools.repeat(bhi)))
        if self._left < 0:
            raise _OverBudget
        return super().find_longest_match(alo, ahi, blo, bhi)

    def get_matching_blocks(self) -> list[difflib.Match]:
        if self.matching_blocks is None:
            try:
                return super().get_matching_blocks()
            except _OverBudget:
                blocks = _near_linear(self.a, self.b, self._budget)
                self.matching_blocks = [difflib.Match(*block) for block in blocks]
        return self.matching_blocks


def _near_linear(a: Sequence[int], b: Sequence[int], budget: int) -> list[_Block]:
    """Matching blocks of `a` and `b` as difflib gives them (in order, adjacent ones joined,
    ending with `(len(a), len(b), 0)`), found in near-linear time."""
    n, m = len(a), len(b)
    head = _common_head(a, b)
    tail = _common_head(a[head:][::-1], b[head:][::-1])
    middle_a, middle_b = a[head : n - tail], b[head : m - tail]
    middle = _myers(middle_a, middle_b, _Steps(budget))
    if middle is None:
        middle = _anchored(middle_a, middle_b, _Steps(budget))
    blocks = [(0, 0, head), *((i + head, j + head, size) for i, j, size in middle)]
    blocks.append((n - tail, m - tail, tail))
    return [*_joined(blocks), (n, m, 0)]


def _common_head(a: Sequence[int], b: Sequence[int]) -> int:
    """How many items `a` and `b` start with in common."""
    return next(
        itertools.compress(itertools.count(), map(int.__ne__, a, b)),
        min(len(a), len(b)),
    )


def _joined(blocks: list[_Block]) -> list[_Block]:
    """`blocks` (in order) without empty ones, each run of adjacent ones made one."""
    joined: list[_Block] = []
    for i, j, size in blocks:
        if not size:
            continue
        if joined and joined[-1][0] + joined[-1][2] == i and joined[-1][1] + joined[-1][2] == j:
            last_i, last_j, last_size = joined.pop()
            joined.append((last_i, last_j, last_size + size))
        else:
            joined.append((i, j, size))
    return joined


def _myers(a: Sequence[int], b: Sequence[int], steps: _Steps) -> list[_Block] | None:
    """The matching blocks of a shortest edit script from `a` to `b` (Myers, 1986), paid
    from `steps`; None when they run out first.

    Round `d` extends the furthest path with `d` edits on each diagonal `k = x - y`; a step
    is a diagonal visited or an equal pair followed. The rounds are kept (about d² / 2
    numbers in all, a few megabytes within the budget) to walk the script back.
    """
    n, m = len(a), len(b)
    if not n or not m:
        return []
    most = min(n + m, math.isqrt(2 * max(steps.left, 0)))  # d rounds cost d² / 2 at least
    offset = most + 1
    furthest = [0] * (2 * most + 3)  # furthest[offset + k]: x on diagonal k
    rounds: list[list[int]] = []
    for d in range(most + 1):
        rounds.append(furthest[offset - d - 1 : offset + d + 2])  # what round d starts from
        for k in range(-d, d + 1, 2):
            x = _start(furthest, offset, k, d)
            y = start = x - k
            while x < n and y < m and a[x] == b[y]:
                x, y = x + 1, y + 1
            steps.left -= 1 + y - start
            furthest[offset + k] = x
            if x >= n and y >= m:
                return _walked_back(rounds, n, m)
        if steps.left < 0:
            return None
    return None


def _start(furthest: list[int], offset: int, k: int, d: int) -> int:
    """Where a path of `d` edits on diagonal `k` starts its run of equal pairs: one down
    from diagonal k + 1 (an insertion), or one right from k - 1 (a deletion), whichever
    is further."""
    if k == -d or (k != d and furthest[offset + k - 1] < furthest[offset + k + 1]):
        return furthest[offset + k + 1]
    return furthest[offset + k - 1] + 1


def _walked_back(rounds: list[list[int]], n: int, m: int) -> list[_Block]:
    """The runs of equal pairs on the path that reached `(n, m)`, in order."""
    blocks: list[_Block] = []
    x, y = n, m
    for d in range(len(rounds) - 1, -1, -1):
        k = x - y
        if d == 0:
            start_x, previous = 0, (0, 0)
        else:
            # `rounds[d]` holds diagonals -d - 1 to d + 1 of the round before d.
            furthest = rounds[d]
            down = k == -d or (k != d and furthest[k - 1 + d + 1] < furthest[k + 1 + d + 1])
            previous_k = k + 1 if down else k - 1
            previous_x = furthest[previous_k + d + 1]
            start_x = previous_x if down else previous_x + 1
            previous = (previous_x, previous_x - previous_k)
        if x > start_x:
            blocks.append((start_x, start_x - k, x - start_x))
        x, y = previous
    blocks.reverse()
    return blocks


def _anchored(a: Sequence[int], b: Sequence[int], steps: _Steps) -> list[_Block]:
    """Matching blocks anchored on the items that occur once in each (the longest run of
    them in the same order on both sides); each stretch between two anchors lined up by
    `_myers` with what is left of `steps`, or left unmatched once they run out."""
    once_a = {item for item, count in Counter(a).items() if count == 1}
    once_b = {item: j for j, item in enumerate(b) if item in once_a}
    for item, count in Counter(b).items():
        if count > 1:
            once_b.pop(item, None)
    anchors = _increasing([(i, once_b[item]) for i, item in enumerate(a) if item in once_b])
    blocks: list[_Block] = []
    previous_i = previous_j = 0
    for i, j in [*anchors, (len(a), len(b))]:
        gap_a, gap_b = a[previous_i:i], b[previous_j:j]
        head = _common_head(gap_a, gap_b)
        blocks.append((previous_i, previous_j, head))
        inner = _myers(gap_a[head:], gap_b[head:], steps) if steps.left > 0 else None
        blocks += [(x + previous_i + head, y + previous_j + head, s) for x, y, s in inner or ()]
        blocks.append((i, j, 1 if i < len(a) else 0))
        previous_i, previous_j = i + 1, j + 1
    return _joined(blocks)


def _increasing(pairs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The longest run of `pairs` (in order of their first item) whose second items
    increase too: patience sorting, `O(k log k)`."""
    tops: list[int] = []  # tops[length - 1]: the smallest j ending a run of that length
    ends: list[int] = []  # the index of the pair ending it
    before: list[int] = []  # the pair before each in its run (-1: none)
    for index, (_, j) in enumerate(pairs):
        length = bisect.bisect_left(tops, j)
        if length == len(tops):
            tops.append(j)
            ends.append(index)
        else:
            tops[length], ends[length] = j, index
        before.append(ends[length - 1] if length else -1)
    run: list[tuple[int, int]] = []
    index = ends[-1] if ends else -1
    while index >= 0:
        run.append(pairs[index])
        index = before[index]
    return run[::-1]
