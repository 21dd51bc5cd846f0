"""The second drawing of `replay report`: what a stream said, as it grew, against time.

The curve climbs by what each event adds to the stream's texts (`EventKind.piece`: text,
reasoning, tool-call arguments), in characters; when every stream drawn reports its output
tokens in its usage, the axis counts tokens instead, the usage's total spread over the
characters. A dashed line runs from the first text delta to the last, labelled with
`timing.tokens_per_second`; the largest silences between events (`timing.gaps`) are shaded.
The x axis is the timeline's, so the two drawings line up.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

import attrs

from replay.inspect.report_svg import (
    CHAR_PX,
    LEFT,
    PLOT,
    WIDTH,
    Scale,
    axis,
    esc,
    num,
    secs,
    side,
    svg_open,
)

if TYPE_CHECKING:
    from replay.inspect.report_view import StreamView

__all__ = ["GAPS_SHOWN", "growth"]

#: How many of a stream's largest gaps are shaded.
GAPS_SHOWN = 3
_UNIT = 14  # the row of the unit's name, above the gaps' labels
_ROW = 11  # one row of gap labels: a label that would overlap another goes a row lower
_HEIGHT = 120
_AXIS = 30
# A gap shorter than this share of the time axis is not worth a band.
_GAP_SHARE = 0.02


def growth(views: Sequence[StreamView]) -> str:
    """The text of one interaction (of two, in two colours) as it grew; a sentence when
    no stream drawn says anything."""
    totals = [sum(len(kind.piece) for kind in view.kinds) for view in views]
    if not any(totals):
        return '<p class="nogrowth">No text to draw: the stream adds nothing to a text.</p>'
    scale = Scale.of(views)
    tokens = all(view.output_tokens for view in views)
    factors = [
        (view.output_tokens or 0) / total if tokens and total else 1.0
        for view, total in zip(views, totals, strict=True)
    ]
    top_value = _nice_top(
        max(total * factor for total, factor in zip(totals, factors, strict=True))
    )
    gaps = _gap_layout([gap for view in views for gap in _gaps_of(view, scale)])
    top = _UNIT + 4 + _ROW * (max((gap.row for gap in gaps), default=-1) + 1)
    height = top + _HEIGHT + _AXIS
    base = top + _HEIGHT

    def y(value: float) -> float:
        return base - _HEIGHT * value / top_value

    unit = "output tokens" if tokens else "characters"
    how = (
        "output tokens: the count in the response's usage, spread evenly over its characters"
        if tokens
        else "characters of text"
    )
    parts = [svg_open("growth", height)]
    parts.append(f"<title>{esc(f'the text as it grew, in {how}')}</title>")
    parts += axis(scale, top, base)
    parts += _value_axis(top_value, y, unit, how)
    parts += (gap.drawn(top) for gap in gaps)
    for number, (view, factor) in enumerate(zip(views, factors, strict=True)):
        points = _cumulative(view, factor)
        parts += _curve(view, scale, y, points, "ab"[number], unit.split()[-1])
        parts += _rate(view, scale, y, points, number)
    parts.append("</svg>")
    return "\n".join(parts)


def _nice_top(value: float) -> float:
    magnitude = 10.0 ** math.floor(math.log10(max(value, 1.0)))
    return next(m * magnitude for m in (1, 1.5, 2, 3, 4, 5, 6, 8, 10) if m * magnitude >= value)


def _value_axis(
    top_value: float, y: Callable[[float], float], unit: str, how: str
) -> Iterator[str]:
    yield '<g class="axis">'
    for share in (0.0, 0.5, 1.0):
        value = top_value * share
        at = num(y(value))
        yield f'<line class="grid" x1="{LEFT}" y1="{at}" x2="{LEFT + PLOT}" y2="{at}"/>'
        yield f'<text x="{LEFT - 6}" y="{num(y(value) + 3)}" text-anchor="end">{value:,.0f}</text>'
    yield (
        f'<text class="lane" x="{LEFT}" y="{_UNIT - 2}">{esc(unit)}<title>{esc(how)}</title></text>'
    )
    yield "</g>"


def _cumulative(view: StreamView, factor: float) -> list[tuple[float, float, int]]:
    """(time, value so far, event index) at each event that adds to a text."""
    points = []
    total = 0
    for number, (event, kind) in enumerate(zip(view.events, view.kinds, strict=True)):
        if kind.piece:
            total += len(kind.piece)
            points.append((event.at, total * factor, number))
    return points


def _curve(
    view: StreamView,
    scale: Scale,
    y: Callable[[float], float],
    points: list[tuple[float, float, int]],
    css: str,
    unit: str,
) -> Iterator[str]:
    """A step line: flat between events, up at each; one step per pixel column at most."""
    if not points:
        return
    steps: dict[str, float] = {}  # x (as written) -> the value there: the column's last
    for at, value, _ in points:
        steps[num(scale.x(at))] = value
    coordinates = [f"{num(scale.x(0.0))},{num(y(0.0))}"]
    previous = 0.0
    for x, value in steps.items():
        coordinates.append(f"{x},{num(y(previous))} {x},{num(y(value))}")
        previous = value
    coordinates.append(f"{num(scale.x(view.end.at))},{num(y(previous))}")
    title = f"{side(view)}{previous:,.0f} {unit} by {secs(points[-1][0])}"
    yield (
        f'<polyline class="curve {css}" points="{" ".join(coordinates)}">'
        f"<title>{esc(title)}</title></polyline>"
    )
    if view.label:  # two curves: say which is which, at their ends
        x, y_end = num(scale.x(view.end.at) + 4), num(y(previous) + 4)
        yield f'<text class="curve-label {css}" x="{x}" y="{y_end}">{esc(view.label)}</text>'


def _rate(
    view: StreamView,
    scale: Scale,
    y: Callable[[float], float],
    points: list[tuple[float, float, int]],
    number: int,
) -> Iterator[str]:
    """The dashed line from the first text delta to the last, labelled with the rate (the
    `number`th stream's label a row lower)."""
    rate = view.timing.tokens_per_second
    texts = [point for point in points if view.kinds[point[2]].kind == "text"]
    if rate is None or len(texts) < 2:
        return
    (start, low, _), (stop, high, _) = texts[0], texts[-1]
    shown = "all at once" if math.isinf(rate) else f"{rate:.1f} tokens/s"
    x1, y1, x2, y2 = scale.x(start), y(low), scale.x(stop), y(high)
    label_x, label_y = num((x1 + x2) / 2 + 6), num((y1 + y2) / 2 + 12 + 12 * number)
    yield (
        f'<g class="rate-mark"><line class="rate" x1="{num(x1)}" y1="{num(y1)}" x2="{num(x2)}" '
        f'y2="{num(y2)}"/><text x="{label_x}" y="{label_y}">'
        f"{esc(side(view) + shown)}</text>"
        f"<title>{esc(f'{side(view)}{shown}: text deltas per second, first to last')}</title></g>"
    )


@attrs.frozen
class _Gap:
    """A shaded silence and its label, on the row of labels it was given."""

    x1: float
    x2: float
    label: str
    title: str
    row: int = 0

    @property
    def label_x(self) -> float:
        """Where the label starts: at the gap, or further left to end inside the drawing."""
        return min(self.x1 + 2, WIDTH - self.width)

    @property
    def width(self) -> float:
        return len(self.label) * CHAR_PX

    def drawn(self, top: float) -> str:
        return (
            f'<g class="gap-mark"><rect class="gap" x="{num(self.x1)}" y="{num(top)}" '
            f'width="{num(max(self.x2 - self.x1, 1.0))}" height="{_HEIGHT}"/>'
            f'<text class="gap-label" x="{num(self.label_x)}" '
            f'y="{num(_UNIT + 4 + _ROW * self.row + _ROW - 3)}">'
            f"{esc(self.label)}</text><title>{esc(self.title)}</title></g>"
        )


def _gaps_of(view: StreamView, scale: Scale) -> Iterator[_Gap]:
    """The largest silences between events of one stream, each with its length."""
    largest = sorted(range(len(view.gaps)), key=lambda index: (-view.gaps[index], index))
    shown = [i for i in largest[:GAPS_SHOWN] if view.gaps[i] >= scale.span * _GAP_SHARE]
    for index in sorted(shown):
        after, before = view.events[index], view.events[index + 1]
        yield _Gap(
            scale.x(after.at),
            scale.x(before.at),
            f"{side(view)}gap {view.gaps[index]:.2f} s",
            f"{side(view)}a gap of {secs(view.gaps[index])} after event #{index} "
            f"({view.kinds[index].type}, at {secs(after.at)})",
        )


def _gap_layout(gaps: list[_Gap]) -> list[_Gap]:
    """Each gap's label on the first row where it overlaps no other (rows from the top)."""
    ends: list[float] = []  # the right end of each row's last label
    placed = []
    for gap in sorted(gaps, key=lambda gap: gap.label_x):
        row = next((r for r, end in enumerate(ends) if gap.label_x >= end + CHAR_PX), len(ends))
        if row == len(ends):
            ends.append(0.0)
        ends[row] = gap.label_x + gap.width
        placed.append(attrs.evolve(gap, row=row))
    return placed
