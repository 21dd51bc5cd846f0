"""`replay report`'s layout (issue 32), checked on the drawings' geometry (no browser here):
the drawings scale to the window's width, no label reaches past a drawing's right edge, the
gap labels of two cassettes never print over each other, and the value axis says its unit
plainly."""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET

import attrs

from replay import faults
from replay.dialects import responses
from replay.dialects.synth import synthesize
from replay.inspect.report import report
from replay.inspect.report_svg import CHAR_PX, WIDTH
from replay.model import Interaction
from replay.store.cassette import Cassette


def drawings(page: str) -> list[ET.Element]:
    return [ET.fromstring(svg) for svg in re.findall(r"<svg\b.*?</svg>", page, re.S)]


def stalled(interaction: Interaction, *after: int) -> Interaction:
    response = interaction.response
    for events in after:
        response = faults.stall(after_events=events, seconds=0.8).apply(response)
    return attrs.evolve(interaction, response=response)


def test_the_drawings_take_the_pages_width_at_any_window_width() -> None:
    page = report(Cassette([synthesize("responses", "Hello there.", ttft=0.3)]))
    svgs = drawings(page)
    assert svgs
    for svg in svgs:
        assert svg.get("width") is None  # no fixed size: the CSS gives it the page's width
        assert re.fullmatch(rf"0 0 {WIDTH} [\d.]+", svg.get("viewBox", ""))
    css = page.split("<style>")[1].split("</style>")[0]
    assert re.search(r"svg\{[^}]*width:100%[^}]*height:auto", css)
    assert "body{" in css
    assert "max-width" not in css.split("body{")[1].split("}")[0]  # the window is the limit
    # At 800 px and at 1400 px of page, the drawing's scale is the page's width over WIDTH:
    # its proportions are kept (meet), so the labels checked below stay inside it.
    for svg in svgs:
        assert svg.get("preserveAspectRatio") == "xMinYMin meet"


def right_edge(text: ET.Element) -> float:
    """Where a label's text ends, at CHAR_PX a character (a wide estimate)."""
    content = "".join(text.itertext())
    transform = text.get("transform", "")
    if match := re.match(r"translate\(([\d.]+),[\d.]+\) rotate\(-55\)", transform):
        return float(match[1]) + len(content) * CHAR_PX * math.cos(math.radians(55))
    x = float(text.get("x", "0"))
    if text.get("text-anchor") == "end":
        return x
    if text.get("text-anchor") == "middle":
        return x + len(content) * CHAR_PX / 2
    return x + len(content) * CHAR_PX


def test_no_label_reaches_past_the_right_edge() -> None:
    # Long event types last, at the right edge: "output_text.done", "content_part.done"…
    interaction = responses.stream("Hello there, how may I assist you today?")
    a = Cassette([stalled(interaction, 3)])
    b = Cassette([stalled(interaction, 5)])
    for page in (report(a), report(a, b, names=["a.msgpack", "b.msgpack"])):
        for svg in drawings(page):
            for text in svg.iter("text"):
                if text.get("class") == "curve-label":
                    continue  # "A"/"B" at a curve's end: one character
                label = "".join(text.itertext())
                assert right_edge(text) <= WIDTH, (label, right_edge(text))


def gap_labels(svg: ET.Element) -> list[tuple[float, float, float, str]]:
    """Each gap label as (y, left, right, text)."""
    found = []
    for group in svg.iter("g"):
        if group.get("class") == "gap-mark":
            text = group.find("text")
            assert text is not None
            content = "".join(text.itertext())
            left = float(text.get("x", "0"))
            found.append((float(text.get("y", "0")), left, right_edge(text), content))
    return found


def test_the_gap_labels_of_two_cassettes_never_overprint() -> None:
    interaction = synthesize("chat", "One two three four five six seven eight nine.", ttft=0.2)
    # The same gaps in both, and two close together in each: every label wants one place.
    a = Cassette([stalled(interaction, 4, 5)])
    b = Cassette([stalled(interaction, 4, 5)])
    page = report(a, b, names=["a.msgpack", "b.msgpack"])
    (growth,) = [svg for svg in drawings(page) if svg.get("class") == "growth"]
    labels = gap_labels(growth)
    assert len(labels) == 4
    assert {label[3][:2] for label in labels} == {"A:", "B:"}
    for number, (y, left, right, _) in enumerate(labels):
        for other_y, other_left, other_right, _ in labels[number + 1 :]:
            assert y != other_y or right <= other_left or other_right <= left, labels
    top = min(float(rect.get("y", "0")) for rect in growth.iter("rect"))
    assert all(y < top for y, *_ in labels)  # above the plot, not in it


def test_the_value_axis_names_its_unit_plainly() -> None:
    with_usage = Cassette([synthesize("responses", "Hello there.", ttft=0.3)])
    (growth,) = [svg for svg in drawings(report(with_usage)) if svg.get("class") == "growth"]
    units = [text for text in growth.iter("text") if text.get("class") == "lane"]
    assert [text.text for text in units] == ["output tokens"]
    explained = units[0].find("title")
    assert explained is not None
    assert explained.text is not None
    assert "usage" in explained.text
