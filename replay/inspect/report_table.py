"""The figures of `replay report`: one interaction's at a glance, or two side by side with
the change between them. Every figure is the library's (`timing.summary`, `replay check`,
`replay.dialects`); this only writes them down."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from replay.inspect.report_svg import end_label, esc

if TYPE_CHECKING:
    from replay.inspect.report_view import StreamView

__all__ = ["FIGURES", "figures_table"]

Value = float | int | str | None


def _findings(view: StreamView) -> str:
    if not view.findings:
        return "none"
    rules = ", ".join(f"{finding.rule} ({finding.severity})" for finding in view.findings)
    return f"{len(view.findings)}: {rules}"


def _kind(view: StreamView) -> str:
    if view.framing is None:
        return "not a stream"
    return view.dialect or f"{view.framing}, no known dialect"


#: (name, what it is of a view, its unit: "s" seconds, "n" a count, "/s" a rate, "" text).
FIGURES: tuple[tuple[str, Callable[[StreamView], Value], str], ...] = (
    ("status", lambda v: str(v.status), ""),
    ("dialect", _kind, ""),
    ("events", lambda v: len(v.events), "n"),
    ("chunks", lambda v: len(v.chunk_times), "n"),
    ("bytes", lambda v: v.body_bytes, "n"),
    ("TTFB", lambda v: v.timing.ttfb, "s"),
    ("TTFT", lambda v: v.timing.ttft, "s"),
    ("duration", lambda v: v.timing.duration, "s"),
    ("text deltas", lambda v: v.timing.tokens, "n"),
    ("output tokens (usage)", lambda v: v.output_tokens, "n"),
    ("tokens/s", lambda v: v.timing.tokens_per_second, "/s"),
    ("largest gap", lambda v: v.timing.max_gap, "s"),
    ("end", lambda v: end_label(v.end, v.closed_after_end), ""),
    ("check findings", _findings, ""),
)


def _shown(value: Value, unit: str) -> str:
    if value is None:
        return "\u2013"
    if isinstance(value, str):
        return value
    if unit == "s":
        return f"{value:.3f} s"
    if unit == "/s":
        return "all at once" if math.isinf(value) else f"{value:.1f}/s"
    return f"{value:,}"


def _change(a: Value, b: Value, unit: str) -> str:
    if a == b:
        return "same"
    if isinstance(a, str) or isinstance(b, str) or a is None or b is None:
        return "changed"
    if math.isinf(a) or math.isinf(b):
        return "changed"
    delta = b - a
    shown = {"s": f"{delta:+.3f} s", "/s": f"{delta:+.1f}/s"}.get(unit, f"{delta:+,}")
    return f"{shown} ({delta / a:+.0%})" if a else shown


def figures_table(views: Sequence[StreamView], paired: bool) -> str:
    """The figures of one interaction: a row of them, or (`paired`) a table of A, B and
    the change between them."""
    if not paired:
        return _one(views[0])
    header = "".join(f"<th>{esc(view.label)}</th>" for view in views)
    rows = [f"<tr><th>figure</th>{header}<th>change</th></tr>"]
    for name, figure, unit in FIGURES:
        values = [figure(view) for view in views]
        cells = "".join(f"<td>{esc(_shown(value, unit))}</td>" for value in values)
        if len(values) == 2:
            change = _change(values[0], values[1], unit)
        else:
            change = f"only in {views[0].label}"
        rows.append(f"<tr><th>{esc(name)}</th>{cells}<td>{esc(change)}</td></tr>")
    return '<table class="figures pair">\n' + "\n".join(rows) + "\n</table>"


def _one(view: StreamView) -> str:
    rows = []
    half = (len(FIGURES) + 1) // 2
    for part in (FIGURES[:half], FIGURES[half:]):
        rows.append("<tr>" + "".join(f"<th>{esc(name)}</th>" for name, _, _ in part) + "</tr>")
        values = (esc(_shown(figure(view), unit)) for _, figure, unit in part)
        rows.append("<tr>" + "".join(f"<td>{value}</td>" for value in values) + "</tr>")
    return '<table class="figures">\n' + "\n".join(rows) + "\n</table>"
