"""`replay report`: a stream's timing drawn on one self-contained HTML page.

    html = report(Cassette.load("a.msgpack"))                      # every interaction
    html = report(a, b, names=("before", "after"), interaction=0)  # two, side by side

For each interaction the page shows its figures (status, dialect, events, bytes, TTFB, TTFT,
duration, tokens/s, the `replay check` findings), a timeline (each chunk sized by its bytes,
each event coloured by its kind, the TTFB and TTFT markers, the end as recorded) and the
text as it grew. Given two cassettes, interactions are paired as `replay diff` pairs them,
their timelines share one time axis, and a table gives both figures and the change.

Nothing is parsed or timed here: the events are `replay.framing`'s, the figures
`replay.inspect.timing.summary`'s, the kinds and pieces `replay.dialects.kinds`'s, the findings
`replay.inspect.check`'s. `replay.inspect.report_view` gathers them (`StreamView`), this
module lays out the page, and `replay.inspect.report_svg` draws. The page is a pure function of the
cassettes: no clock, no random ids, no network (inline CSS and SVG, hover through SVG `<title>`).
Everything recorded is escaped before it is written, and the URL goes through the
`Redactor` again: a cassette from a pull request is hostile input.
"""

from __future__ import annotations

from collections.abc import Sequence

from replay.dialects.kinds import KINDS
from replay.errors import ConfigurationError
from replay.framing.bulk import building
from replay.inspect.diff import pairs
from replay.inspect.report_growth import growth
from replay.inspect.report_svg import KIND_COLOURS, KIND_NAMES, esc, thinning_notes, timeline
from replay.inspect.report_table import figures_table
from replay.inspect.report_view import StreamView, view
from replay.store.cassette import Cassette

__all__ = ["StreamView", "report", "view"]


def report(
    a: Cassette,
    b: Cassette | None = None,
    *,
    names: Sequence[str] = (),
    interaction: int | None = None,
) -> str:
    """The HTML page of cassette `a`'s interactions, or of `a` and `b` side by side.

    Args:
        a: the cassette.
        b: a second cassette: its interactions are paired with `a`'s as `replay diff`
            pairs them (by position), drawn on one time axis with a table of the changes.
        names: what the page calls `a` and `b` (their paths, say); nothing by default.
        interaction: only this interaction (this pair); None for all.

    Raises:
        ConfigurationError: there is no interaction `interaction`, or none at all.
    """
    with building():  # a long stream's views are millions of small values
        groups = _views(a, b)
    groups = _chosen(groups, interaction)
    sections = [_section(group, b is not None) for group in groups]
    return _page(list(names)[: 1 if b is None else 2], sections)


def _views(a: Cassette, b: Cassette | None) -> list[list[StreamView]]:
    if b is None:
        return [[view(item, index)] for index, item in enumerate(a.interactions)]
    return [
        [view(item, index, side) for item, side in ((one, "A"), (other, "B")) if item is not None]
        for index, one, other in pairs(a, b)
    ]


def _chosen(groups: list[list[StreamView]], interaction: int | None) -> list[list[StreamView]]:
    count = len(groups)
    if count == 0:
        raise ConfigurationError("the cassette has no interactions to report")
    if interaction is None:
        return groups
    if not 0 <= interaction < count:
        raise ConfigurationError(
            f"there is no interaction {interaction}: the cassette has {count} "
            f"(choose 0 to {count - 1})"
        )
    return [groups[interaction]]


def _section(views: list[StreamView], paired: bool) -> str:
    first = views[0]
    heading = f"#{first.index} {_request_line(first)}"
    if paired and len(views) == 1:
        heading += f" (only in {first.label})"
    elif paired and _request_line(views[1]) != _request_line(first):
        heading = f"#{first.index} A: {_request_line(first)}; B: {_request_line(views[1])}"
    parts = [
        f'<section class="interaction" id="i{first.index}">',
        f"<h2>{esc(heading)}</h2>",
        figures_table(views, paired),
        *(f'<p class="problem">{esc(_problem(v))}</p>' for v in views if v.problem),
        *(f'<p class="thinned">{esc(note)}</p>' for note in thinning_notes(views)),
        timeline(views),
        growth(views),
        "</section>",
    ]
    return "\n".join(parts)


def _request_line(stream: StreamView) -> str:
    return f"{stream.method} {stream.url} \u2192 {stream.status}"


def _problem(stream: StreamView) -> str:
    where = f"{stream.label}: " if stream.label else ""
    return f"{where}the body's events cannot be read: {stream.problem}"


_CSS = """\
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;color:#1f2937;margin:24px}
main,p,table{max-width:1060px}
h1{font-size:20px;margin:0 0 4px}h2{font-size:15px;margin:28px 0 8px;word-break:break-all}
p.files{color:#4b5563;margin:0 0 8px}p.thinned,p.problem{color:#92400e;margin:4px 0}
table.figures{border-collapse:collapse;margin:6px 0 10px;font-variant-numeric:tabular-nums}
table.figures th,table.figures td{border-bottom:1px solid #e5e7eb;padding:2px 10px 2px 0;
text-align:left;vertical-align:top}table.figures th{color:#6b7280;font-weight:500}
.legend span{display:inline-block;margin-right:14px}.legend i{display:inline-block;width:10px;
height:10px;margin-right:4px;border-radius:2px}
svg{display:block;margin:6px 0;overflow:visible;width:100%;max-width:1600px;height:auto}
svg text{font:10px system-ui,sans-serif;fill:#374151}svg .lane{font-size:11px;fill:#6b7280}
svg .side{font-weight:600;font-size:12px}
.axis line,.grid{stroke:#e5e7eb}.chunk{fill:#64748b}.headers{fill:#0891b2}
.ev{stroke-width:1.2}.marker line{stroke-width:1.4;stroke-dasharray:4 3}
.ttfb line{stroke:#0891b2}.ttfb text{fill:#0e7490}.ttft line{stroke:#2563eb}
.ttft text{fill:#1d4ed8}.end line{stroke:#111827}.end.bad line{stroke:#dc2626}
.end.bad text{fill:#b91c1c}.end.stop line{stroke:#d97706}.end.stop text{fill:#b45309}
.curve{fill:none;stroke-width:1.6}.curve.a{stroke:#334155}.curve.b{stroke:#db2777}
.curve-label{font-weight:600}.curve-label.a{fill:#334155}.curve-label.b{fill:#db2777}
.rate{stroke:#6b7280;stroke-dasharray:2 3}.gap{fill:#fde68a;opacity:.55}.gap-label{fill:#92400e}
"""


def _legend() -> str:
    items = "".join(
        f'<span><i class="k-{kind}"></i>{esc(KIND_NAMES[kind])}</span>' for kind in KINDS
    )
    return f'<p class="legend">{items}</p>'


def _kind_css() -> str:
    return "".join(
        f".k-{kind}{{background:{colour}}}.ev.{kind}{{stroke:{colour}}}"
        for kind, colour in KIND_COLOURS.items()
    )


_DOT = " \u00b7 "


def _page(files: list[str], sections: list[str]) -> str:
    title = "replay report" + (": " + " vs ".join(files) if files else "")
    if len(files) > 1:
        files = [f"{side}: {name}" for side, name in zip("AB", files, strict=False)]
    head = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        '<head><meta charset="utf-8">',
        f"<title>{esc(title)}</title>",
        f"<style>\n{_CSS}{_kind_css()}\n</style>",
        "</head>",
        "<body>",
        "<h1>replay report</h1>",
        *([f'<p class="files">{esc(_DOT.join(files))}</p>'] if files else []),
        _legend(),
    ]
    return "\n".join([*head, *sections, "</body>", "</html>"]) + "\n"
