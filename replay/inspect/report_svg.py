"""The timeline of `replay report`, in SVG, and what its drawings share: the time scale
and axis, escaping, the names and colours of the kinds of events.

Each drawing (this one, and `_report_growth`'s) takes the `StreamView`s of one interaction
(one, or two on one time axis) and returns SVG text; it only turns figures into coordinates.
Coordinates are written with one decimal, so the same cassette always gives the same bytes.
A stream with more than `MAX_MARKS` events (or chunks) is thinned: one mark per `BIN_PX`
pixels (and per kind, for events), its `<title>` saying what it holds; `thinning_notes` says
so in words. Every recorded string goes through `esc` (escaped, controls shown, XML-safe)
and the start of an event's data through `hide_shapes` too.
"""

from __future__ import annotations

import itertools
import json
import math
import re
from collections.abc import Iterator, Sequence
from html import escape
from typing import TYPE_CHECKING

import attrs

from replay.dialects.kinds import Kind
from replay.engine.ends import CLOSED_AFTER_END, CLOSED_AFTER_END_TEXT, error_kind
from replay.inspect.printable import printable
from replay.model import StreamEnd
from replay.redact.shapes import hide_shapes

if TYPE_CHECKING:
    from replay.inspect.report_view import StreamView

__all__ = [
    "BIN_PX",
    "CHAR_PX",
    "KIND_COLOURS",
    "KIND_NAMES",
    "LABEL_REACH",
    "LEFT",
    "MAX_MARKS",
    "PLOT",
    "WIDTH",
    "Scale",
    "axis",
    "end_label",
    "esc",
    "num",
    "secs",
    "side",
    "svg_open",
    "thinning_notes",
    "timeline",
]

#: Past this many events (or chunks) in a stream, its marks are thinned.
MAX_MARKS = 1000
#: The width of the columns thinned marks are gathered in, in pixels.
BIN_PX = 2.0

KIND_COLOURS: dict[Kind, str] = {
    "text": "#2563eb",
    "reasoning": "#9333ea",
    "tool": "#ea580c",
    "item": "#16a34a",
    "error": "#dc2626",
    "terminal": "#111827",
    "other": "#9ca3af",
}
KIND_NAMES: dict[Kind, str] = {
    "text": "text delta",
    "reasoning": "reasoning delta",
    "tool": "tool-call arguments",
    "item": "item / content part",
    "error": "error",
    "terminal": "terminal event",
    "other": "other event",
}

#: The drawings' coordinate width: each is scaled to the page's width (its `viewBox`).
WIDTH = 1000
LEFT = 96  # room for the lanes' names
#: The width a label's character is taken to have (10 px system-ui; a wide estimate), and
#: the room the longest event label (`_short`'s 28 characters and a count) needs to the
#: right of its event, slanted at 55 degrees: the last labels end inside the drawing.
CHAR_PX = 6.0
LABEL_REACH = math.ceil(3 + 33 * CHAR_PX * math.cos(math.radians(55)))
PLOT = WIDTH - LEFT - LABEL_REACH  # room on the right for the last labels
_MARK_ROW = 13  # one row per marker's label: TTFB, TTFT, end
_LABELS = 118  # the event labels, rotated
_LABEL_SPACE = 14  # pixels between two labels' starts
_EVENTS = 22
_CHUNKS = 30
_BLOCK = 3 * _MARK_ROW + _LABELS + _EVENTS + _CHUNKS
_SPACE = 16
_AXIS = 30
_DATA_START = 80  # characters of an event's data shown on hover
# What XML 1.0 refuses and `printable` lets through.
_NOT_XML = re.compile("[\ud800-\udfff\ufffe\uffff]")


def esc(text: str) -> str:
    """`text`, safe in HTML and XML text and attribute values: markup escaped, control and
    bidirectional characters shown escaped (`\\x1b`), what XML refuses replaced."""
    return escape(_NOT_XML.sub("\ufffd", printable(text)), quote=True)


def end_label(end: StreamEnd, closed_after_end: bool = False) -> str:
    """How the body ended, in a word or two: `EOF`, `cut (…)`, `timeout (…)`, `client stop`,
    or `closed after end` (the client closed it after its terminal event: it is complete)."""
    if end.error is not None:
        return f"{error_kind(end.error).value} ({end.error})"
    if end.truncated:
        return CLOSED_AFTER_END if closed_after_end else f"{end.stopped_by} stop"
    return "EOF"


def num(value: float) -> str:
    return f"{value:.1f}"


def secs(seconds: float) -> str:
    return f"{seconds:.3f} s"


@attrs.frozen
class Scale:
    """Seconds since the request to x coordinates."""

    span: float

    @classmethod
    def of(cls, views: Sequence[StreamView]) -> Scale:
        return cls(max([0.001, *(view.end.at for view in views)]))

    def x(self, at: float) -> float:
        # The share first: PLOT times a span near the largest float would overflow.
        return LEFT + PLOT * (min(max(at, 0.0), self.span) / self.span)

    def column(self, at: float) -> int:
        return int((self.x(at) - LEFT) // BIN_PX)

    def columns(self, times: Sequence[float]) -> list[int]:
        """`column` of each of `times`, in one pass (as `column` computes it, inline)."""
        span = self.span
        return [
            int((LEFT + PLOT * (min(max(at, 0.0), span) / span) - LEFT) // BIN_PX) for at in times
        ]


def side(view: StreamView) -> str:
    return f"{view.label}: " if view.label else ""


def thinning_notes(views: Sequence[StreamView]) -> list[str]:
    """One sentence per stream whose marks are thinned, saying so."""
    notes = []
    for view in views:
        events, chunks = len(view.events), len(view.chunk_times)
        if events > MAX_MARKS or chunks > MAX_MARKS:
            notes.append(
                f"{side(view)}{events:,} events and {chunks:,} chunks: marks thinned to one "
                f"per {BIN_PX:g} px (and per kind, for events) to keep the page light; hover "
                "a mark for what it holds."
            )
    return notes


# --- the timeline -------------------------------------------------------------------------


def timeline(views: Sequence[StreamView]) -> str:
    """The timeline of one interaction (of two, one above the other, on one time axis)."""
    scale = Scale.of(views)
    height = len(views) * (_BLOCK + _SPACE) - _SPACE + _AXIS
    parts = [svg_open("timeline", height)]
    parts.append(f"<title>{esc(_timeline_title(views))}</title>")
    parts += axis(scale, 0, height - _AXIS)
    for number, view in enumerate(views):
        parts += _block(view, scale, number * (_BLOCK + _SPACE))
    parts.append("</svg>")
    return "\n".join(parts)


def svg_open(css: str, height: float) -> str:
    """The opening tag of a drawing `height` high: scaled to the page's width by its
    `viewBox` (the page's CSS sets the width), its proportions kept."""
    return (
        f'<svg class="{css}" viewBox="0 0 {WIDTH} {num(height)}" '
        f'preserveAspectRatio="xMinYMin meet" role="img">'
    )


def _timeline_title(views: Sequence[StreamView]) -> str:
    sides = " and ".join(view.label for view in views if view.label)
    return f"timeline of interaction #{views[0].index}" + (f", {sides}" if sides else "")


def axis(scale: Scale, top: float, bottom: float) -> Iterator[str]:
    """The time axis: a grid line and a label at each round step, some 8 to the span."""
    step = _step(scale.span / 8)
    decimals = max(0, -math.floor(math.log10(step) + 1e-9))
    # How many steps fit is counted, not found by stepping until past the span: for a span
    # near the largest float, `span * (1 + tolerance)` is infinite and no tick is past it.
    ticks = math.floor(scale.span / step * 1.000001)
    yield '<g class="axis">'
    for number in range(ticks + 1):
        at = number * step
        x = num(scale.x(at))
        yield f'<line class="grid" x1="{x}" y1="{num(top)}" x2="{x}" y2="{num(bottom)}"/>'
        label = f"{at:.{decimals}f} s"
        yield f'<text x="{x}" y="{num(bottom + 14)}" text-anchor="middle">{label}</text>'
    yield "</g>"


def _step(raw: float) -> float:
    magnitude = 10.0 ** math.floor(math.log10(raw))
    return next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw * 0.999)


def _block(view: StreamView, scale: Scale, top: float) -> Iterator[str]:
    labels = top + 3 * _MARK_ROW
    events = labels + _LABELS
    chunks = events + _EVENTS
    bottom = chunks + _CHUNKS
    yield f'<g class="stream" data-side="{esc(view.label)}">'
    if view.label:
        yield f'<text class="side" x="4" y="{num(top + 12)}">{esc(view.label)}</text>'
    for lane, y in (("events", events + 15), ("chunks", chunks + 19)):
        yield f'<text class="lane" x="{LEFT - 8}" y="{num(y)}" text-anchor="end">{lane}</text>'
    yield from _event_labels(view, scale, events)
    yield from _event_ticks(view, scale, events + 2, events + _EVENTS - 2)
    yield from _chunk_bars(view, scale, bottom)
    yield from _markers(view, scale, top, bottom)
    yield "</g>"


def _short(kind_type: str, kind: Kind) -> str:
    shown = kind_type.removeprefix("response.")
    if kind in ("text", "reasoning", "tool") and not kind_type.endswith(".delta"):
        shown += f": {kind}"  # a chunk or block delta: its type does not tell what it adds
    return shown if len(shown) <= 28 else shown[:27] + "\u2026"


def _event_labels(view: StreamView, scale: Scale, bottom: float) -> Iterator[str]:
    """One label per run of events of one type and kind, where there is room for it: at
    the run's start, else as far into the run as the previous label needs."""
    last_x = -math.inf
    runs = itertools.groupby(
        zip(view.events, view.kinds, strict=True), key=lambda pair: (pair[1].type, pair[1].kind)
    )
    for (kind_type, kind), run in runs:
        members = list(run)
        x = max(scale.x(members[0][0].at), last_x + _LABEL_SPACE)
        if x > scale.x(members[-1][0].at):
            continue
        last_x = x
        count = f" \u00d7{len(members)}" if len(members) > 1 else ""
        yield (
            f'<text class="lbl" transform="translate({num(x + 3)},{num(bottom - 3)}) rotate(-55)">'
            f"{esc(_short(kind_type, kind) + count)}</text>"
        )


def _data_start(data: str) -> str:
    # Hidden before it is cut: a key cut in half no longer looks like one.
    shown = hide_shapes(data[: _DATA_START * 4])
    return shown if len(shown) <= _DATA_START else shown[: _DATA_START - 1] + "\u2026"


def _event_ticks(view: StreamView, scale: Scale, top: float, bottom: float) -> Iterator[str]:
    if len(view.events) > MAX_MARKS:
        yield from _thinned_ticks(view, scale, top, bottom)
        return
    for number, (event, kind) in enumerate(zip(view.events, view.kinds, strict=True)):
        x = num(scale.x(event.at))
        adds = f" \u00b7 adds {json.dumps(kind.piece, ensure_ascii=False)}" if kind.piece else ""
        title = f"{secs(event.at)} \u00b7 #{number} {kind.type}{adds}\n{_data_start(event.data)}"
        yield (
            f'<line class="ev {kind.kind}" data-type="{esc(kind.type)}" x1="{x}" y1="{num(top)}" '
            f'x2="{x}" y2="{num(bottom)}"><title>{esc(title)}</title></line>'
        )


def _thinned_ticks(view: StreamView, scale: Scale, top: float, bottom: float) -> Iterator[str]:
    bins: dict[tuple[int, Kind], list[int]] = {}
    columns = scale.columns([event.at for event in view.events])
    for number, (column, event_kind) in enumerate(zip(columns, view.kinds, strict=True)):
        bins.setdefault((column, event_kind.kind), []).append(number)
    for (column, kind), numbers in sorted(bins.items(), key=_bin_order):
        x = num(LEFT + (column + 0.5) * BIN_PX)
        first, last = view.events[numbers[0]], view.events[numbers[-1]]
        types: dict[str, int] = {}
        for number in numbers:
            types[view.kinds[number].type] = types.get(view.kinds[number].type, 0) + 1
        held = ", ".join(f"{name} \u00d7{count}" for name, count in types.items())
        title = (
            f"{first.at:.3f}\u2013{secs(last.at)} \u00b7 events #{numbers[0]}\u2013#{numbers[-1]}"
            f" \u00b7 {len(numbers)} events: {held}\n{_data_start(first.data)}"
        )
        yield (
            f'<line class="ev {kind}" data-type="{esc(view.kinds[numbers[0]].type)}" '
            f'data-count="{len(numbers)}" x1="{x}" y1="{num(top)}" x2="{x}" y2="{num(bottom)}">'
            f"<title>{esc(title)}</title></line>"
        )


def _bin_order(item: tuple[tuple[int, Kind], list[int]]) -> tuple[int, int]:
    (column, kind), _ = item
    return column, list(KIND_COLOURS).index(kind)


def _chunk_bars(view: StreamView, scale: Scale, baseline: float) -> Iterator[str]:
    if view.chunk_times and view.headers_at <= view.chunk_times[0]:
        x = scale.x(view.headers_at)
        yield (
            f'<path class="headers" d="M{num(x)},{num(baseline)} l-4,6 h8 z">'
            f"<title>response headers at {secs(view.headers_at)}</title></path>"
        )
    groups = _chunk_groups(view, scale)
    largest = max((size for _, _, size in groups), default=0) or 1
    for first, last, size in groups:
        height = max(1.0, (_CHUNKS - 2) * math.sqrt(size / largest))
        at, until = view.chunk_times[first], view.chunk_times[last]
        x = scale.x(at) if first == last else LEFT + scale.column(at) * BIN_PX
        if first == last:
            title = f"chunk #{first} \u00b7 {secs(at)} \u00b7 {size:,} bytes"
            attributes = 'class="chunk"'
        else:
            count = last - first + 1
            title = f"chunks #{first}\u2013#{last} \u00b7 {at:.3f}\u2013{secs(until)} \u00b7 "
            title += f"{count} chunks, {size:,} bytes"
            attributes = f'class="chunk" data-count="{count}"'
        yield (
            f'<rect {attributes} x="{num(x)}" y="{num(baseline - height)}" width="1.6" '
            f'height="{num(height)}"><title>{esc(title)}</title></rect>'
        )


def _chunk_groups(view: StreamView, scale: Scale) -> list[tuple[int, int, int]]:
    """(first, last, bytes) of each mark: each chunk, or each column's chunks when thinned."""
    times, sizes = view.chunk_times, view.chunk_sizes
    if len(times) <= MAX_MARKS:
        return [(number, number, size) for number, size in enumerate(sizes)]
    groups: list[tuple[int, int, int]] = []
    first = 0
    for _, members in itertools.groupby(scale.columns(times)):
        last = first + sum(1 for _ in members) - 1
        groups.append((first, last, sum(sizes[first : last + 1])))
        first = last + 1
    return groups


def _markers(view: StreamView, scale: Scale, top: float, bottom: float) -> Iterator[str]:
    figures, end = view.timing, view.end
    stopped = end.truncated and not view.closed_after_end
    end_class = "end bad" if end.error else "end stop" if stopped else "end"
    label = CLOSED_AFTER_END_TEXT if view.closed_after_end else end_label(end)
    end_title = f"the body ended at {secs(end.at)}: {label}"
    if end.message:
        end_title += f": {hide_shapes(end.message)}"
    markers: list[tuple[str, float | None, str, str]] = [
        ("ttfb", figures.ttfb, "TTFB", f"headers at {secs(view.headers_at)}, first body byte at "),
        ("ttft", figures.ttft, "TTFT", "first text delta at "),
        (end_class, end.at, end_label(end, view.closed_after_end), end_title),
    ]
    if not figures.tokens:
        markers[1] = ("ttft", figures.ttft, "first event", "no text delta; first event at ")
    for row, (css, at, name, title) in enumerate(markers):
        if at is None:
            continue
        x = scale.x(at)
        y = top + row * _MARK_ROW
        anchor, text_x = ("end", x - 3) if x > LEFT + PLOT * 0.8 else ("start", x + 3)
        hover = title + secs(at) if title.endswith(" at ") else title
        yield (
            f'<g class="marker {css}" data-at="{at:.6f}">'
            f'<line x1="{num(x)}" y1="{num(y + 2)}" x2="{num(x)}" y2="{num(bottom)}"/>'
            f'<text x="{num(text_x)}" y="{num(y + 11)}" text-anchor="{anchor}">'
            f"{esc(f'{name} {secs(at)}')}</text><title>{esc(hover)}</title></g>"
        )
