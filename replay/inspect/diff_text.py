"""The text form of `replay diff`: a `CassetteDiff` as the lines the command prints.

Owns the layout only (headers, verdicts, event runs cut around their first difference,
the timing table, the summary); what differs is decided in `replay.inspect.diff`.

The text stays readable however long the streams: an interaction shows its first
`MAX_RUNS` runs of changed events, each run its first `RUN_EVENTS` events of each side,
and each text `TEXT_WIDTH` characters from a little before its first difference; a line
says what is not shown ("showing 20 of 1,000,000 events of A ...").
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from replay.inspect.diff_values import (
        CassetteDiff,
        EventChange,
        InteractionDiff,
        TextDiff,
        Timing,
    )

__all__ = ["DATA_WIDTH", "MAX_RUNS", "RUN_EVENTS", "TEXT_WIDTH", "format_diff"]

#: Event data longer than this is cut (with "…") in `format_diff`.
DATA_WIDTH = 72
#: The most runs of changed events shown for one interaction.
MAX_RUNS = 50
#: The most events of each side shown for one run.
RUN_EVENTS = 20
#: The most characters of a text shown, for A and for B.
TEXT_WIDTH = 2000
_CONTEXT = 16  # characters shown before the first difference of an event that changed
_TEXT_CONTEXT = 200  # characters shown before the first difference of a text


def format_diff(result: CassetteDiff, name_a: str = "A", name_b: str = "B") -> str:
    """`result` as text: a header naming A and B, each interaction, a summary line.

    Each interaction's first line is `#N METHOD URL: verdict`; then its notes, the event
    runs that differ (`-` A's event, `+` B's, each with its index in its own stream), the
    texts that differ (A's and B's in full), and a timing table (A, B, B - A). Ends with a
    newline.
    """
    lines = [f"--- A: {name_a}", f"+++ B: {name_b}"]
    for item in result.interactions:
        lines += _interaction_lines(item)
    lines.append(_summary(result))
    return "\n".join(lines) + "\n"


def _interaction_lines(item: InteractionDiff) -> list[str]:
    if item.a is None or item.b is None:
        side, present = ("A", item.a) if item.b is None else ("B", item.b)
        request = present.request if present is not None else None
        where = f"{request.method} {request.url}" if request is not None else ""
        return [f"#{item.index} {where}: only in {side}"]
    lines = [f"#{item.index} {item.a.request.method} {item.a.request.url}: {_verdict(item)}"]
    lines += [f"  {note}" for note in item.notes]
    events = itertools.chain(item.events_a, item.events_b)
    width = min(32, max((len(event.event) for event in events), default=0))
    for change in item.changes[:MAX_RUNS]:
        lines += _change_lines(item, change, width)
    if len(item.changes) > MAX_RUNS:
        lines.append(_runs_not_shown(item.changes[MAX_RUNS:], len(item.changes)))
    for text in item.texts:
        lines += _text_lines(text)
    if item.timing_a is not None and item.timing_b is not None:
        lines += _timing_lines(item.timing_a, item.timing_b)
    return lines


def _verdict(item: InteractionDiff) -> str:
    if item.differs:
        asked = [note for note in item.notes if note.startswith("request")]
        answered = [note for note in item.notes if not note.startswith("request")]
        parts = [
            ("request", asked),
            ("events", item.changes),
            ("texts", item.texts),
            ("response", answered),
        ]
        return "differs: " + ", ".join(word for word, present in parts if present)
    same = "same events and texts" if item.events_a else "same response"
    return same + (", different timing" if item.timing_differs else "")


def _change_lines(item: InteractionDiff, change: EventChange, width: int) -> list[str]:
    a_span = _span(change.a_start, change.a_end)
    b_span = _span(change.b_start, change.b_end)
    lines = [f"  @@ {change.kind}: A {a_span}, B {b_span} @@"]
    a_shown = min(change.a_end, change.a_start + RUN_EVENTS)
    b_shown = min(change.b_end, change.b_start + RUN_EVENTS)
    removed = [(i, _one_line(item.events_a[i].data)) for i in range(change.a_start, a_shown)]
    added = [(j, _one_line(item.events_b[j].data)) for j in range(change.b_start, b_shown)]
    if change.kind == "changed" and change.a_end - change.a_start == change.b_end - change.b_start:
        # Pair them, `-` then `+`, each cut around where the two differ.
        for (i, old), (j, new) in zip(removed, added, strict=True):
            start = _first_difference(old, new)
            lines.append(_event_line("-", i, item.events_a[i].event, old, width, start))
            lines.append(_event_line("+", j, item.events_b[j].event, new, width, start))
    else:
        lines += [_event_line("-", i, item.events_a[i].event, old, width, 0) for i, old in removed]
        lines += [_event_line("+", j, item.events_b[j].event, new, width, 0) for j, new in added]
    if a_shown < change.a_end or b_shown < change.b_end:
        lines.append(_run_cut(change, len(removed), len(added)))
    return lines


def _run_cut(change: EventChange, a_shown: int, b_shown: int) -> str:
    a_count, b_count = change.a_end - change.a_start, change.b_end - change.b_start
    return (
        f"  … showing {a_shown:,} of {_events(a_count)} of A and {b_shown:,} of {b_count:,} "
        "of B in this run"
    )


def _events(count: int) -> str:
    return f"{count:,} event{'' if count == 1 else 's'}"


def _runs_not_shown(hidden: tuple[EventChange, ...], total: int) -> str:
    a_count = sum(change.a_end - change.a_start for change in hidden)
    b_count = sum(change.b_end - change.b_start for change in hidden)
    return (
        f"  … showing {MAX_RUNS:,} of {total:,} runs of changes; the other {len(hidden):,} "
        f"hold {_events(a_count)} of A and {b_count:,} of B"
    )


def _text_lines(text: TextDiff) -> list[str]:
    longest = max(len(text.a), len(text.b))
    if longest <= TEXT_WIDTH:
        return [f"  {text.name} differs:", f"    A: {text.a!r}", f"    B: {text.b!r}"]
    same = _common_length(text.a, text.b)
    start = max(0, min(same - _TEXT_CONTEXT, longest - TEXT_WIDTH))
    end = start + TEXT_WIDTH
    return [
        f"  {text.name} differs (showing characters {start:,}-{end:,} of "
        f"{len(text.a):,} in A and {len(text.b):,} in B):",
        f"    A: {text.a[start:end]!r}",
        f"    B: {text.b[start:end]!r}",
    ]


def _span(start: int, end: int) -> str:
    if start == end:
        return f"none (before event {start})"
    return f"event {start}" if end - start == 1 else f"events {start}-{end - 1}"


def _first_difference(a: str, b: str) -> int:
    """Where to start showing two data that differ: a little before their first difference."""
    return max(0, _common_length(a, b) - _CONTEXT)


def _common_length(a: str, b: str) -> int:
    """How many characters `a` and `b` start with in common."""
    return next(
        (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b))
    )


def _event_line(sign: str, index: int, name: str, data: str, width: int, start: int) -> str:
    if start and len(data) > DATA_WIDTH:
        data = "…" + data[min(start, len(data) - DATA_WIDTH + 1) :]
    if len(data) > DATA_WIDTH:
        data = data[: DATA_WIDTH - 1] + "…"
    return f"  {sign}{index:>5} {name:<{width}}  {data}".rstrip()


def _one_line(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")


def _timing_lines(a: Timing, b: Timing) -> list[str]:
    rows = [
        ("first event", a.first, b.first),
        ("total", a.total, b.total),
        ("median gap", a.median_gap, b.median_gap),
        ("max gap", a.max_gap, b.max_gap),
    ]
    lines = [f"  {'timing (ms)':<13}{'A':>9}{'B':>9}{'B - A':>9}"]
    for name, x, y in rows:
        # Rounded first, then + 0.0: a change of -0.01 ms shows as +0.0, not -0.0.
        change = "-" if x is None or y is None else f"{round((y - x) * 1000, 1) + 0.0:+.1f}"
        lines.append(f"  {name:<13}{_ms(x):>9}{_ms(y):>9}{change:>9}")
    return lines


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.1f}"


def _summary(result: CassetteDiff) -> str:
    total = len(result.interactions)
    differing = sum(item.differs for item in result.interactions)
    timing = sum(item.timing_differs for item in result.interactions)
    interactions = f"{total} interaction{'' if total == 1 else 's'}"
    if differing:
        verb = "differs" if differing == 1 else "differ"
        return f"{differing} of {interactions} {verb}; timing differs in {timing}"
    return f"{interactions}: no differences in events or texts; timing differs in {timing}"
