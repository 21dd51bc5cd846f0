"""`replay report`: the page drawn from cassettes, read back as a browser would.

Every page is parsed: its tags must balance, and each `<svg>` must be well-formed XML. Then
what it draws is checked against what the library computes of the same cassette: one mark
per chunk (or the note that says they were thinned), one tick per event with its type, the
TTFB, TTFT and end markers at the recorded times. The shipped sample cassettes cover the
three dialects; a cut stream, a client's stop, an NDJSON stream, a 10,000-event stream, two
cassettes side by side, hostile strings and secrets are built here. The command is run as a
user runs it.
"""

from __future__ import annotations

import re
import time
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import attrs
import pytest
from commands import replay_bytes as run_replay

from replay import faults, framing
from replay.dialects import chat, responses
from replay.dialects.kinds import event_kinds
from replay.dialects.synth import synthesize
from replay.errors import ConfigurationError
from replay.inspect import timing
from replay.inspect.report import report
from replay.inspect.report_svg import BIN_PX, LEFT, MAX_MARKS, PLOT
from replay.model import Chunk, Interaction, Request, Response, StreamEnd
from replay.store.cassette import Cassette

SAMPLES = sorted((Path(__file__).parents[1] / "cassettes").glob("*.msgpack"))
_VOID = {"meta", "br", "img", "input", "link", "hr", "wbr"}


# --- reading a page -----------------------------------------------------------------------


class _Balance(HTMLParser):
    """Fails on a tag closed out of order, a tag left open, any script, or a `src` / `href`
    that points outside the page."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.open: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_startendtag(tag, attrs)
        if tag not in _VOID:
            self.open.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        assert tag != "script"
        for name, value in attrs:
            if name in ("src", "href", "xlink:href"):
                assert not re.match(r"\s*(?:[a-z][\w+.-]*:|//)", value or "", re.I), value

    def handle_endtag(self, tag: str) -> None:
        assert self.open, tag
        assert self.open[-1] == tag, (tag, self.open[-3:])
        self.open.pop()


def parsed(page: str) -> list[ET.Element]:
    """The page's SVG drawings, parsed as XML, after checking the whole page's tags."""
    balance = _Balance()
    balance.feed(page)
    balance.close()
    assert balance.open == []
    assert page.startswith("<!DOCTYPE html>\n")
    assert not re.search(r"url\(|@import", page)  # nothing fetched by the CSS either
    return [ET.fromstring(svg) for svg in re.findall(r"<svg\b.*?</svg>", page, re.S)]


def timelines(page: str) -> list[ET.Element]:
    return [svg for svg in parsed(page) if svg.get("class") == "timeline"]


def of_class(root: ET.Element, tag: str, name: str) -> list[ET.Element]:
    return [e for e in root.iter(tag) if name in (e.get("class") or "").split()]


def marker(stream: ET.Element, name: str) -> ET.Element:
    (found,) = of_class(stream, "g", name)
    return found


def title(element: ET.Element) -> str:
    found = element.find("title")
    assert found is not None
    assert found.text is not None
    return found.text


def single(interaction: Interaction) -> Cassette:
    return Cassette([interaction])


def ndjson_interaction() -> Interaction:
    lines = [
        b'{"model":"m","message":{"role":"assistant","content":"Hel"},"done":false}\n',
        b'{"model":"m","message":{"role":"assistant","content":"lo!"},"done":false}\n',
        b'{"model":"m","message":{"role":"assistant","content":""},"done":true,"eval_count":2}\n',
    ]
    return Interaction(
        Request(method="POST", url="http://127.0.0.1:11434/api/chat"),
        Response(
            status=200,
            headers=[("content-type", "application/x-ndjson")],
            chunks=[Chunk(0.2 + 0.1 * n, line) for n, line in enumerate(lines)],
            end=StreamEnd(0.5),
        ),
    )


# --- what one stream's page shows ---------------------------------------------------------


def check_stream(page: str, interaction: Interaction) -> ET.Element:
    """The timeline drawn for `interaction` (alone on `page`) says what the library does."""
    (svg,) = timelines(page)
    (stream,) = of_class(svg, "g", "stream")
    response = interaction.response
    chunks = of_class(stream, "rect", "chunk")
    if len(response.chunks) > MAX_MARKS:
        assert "marks thinned" in page
        assert sum(int(rect.get("data-count", "1")) for rect in chunks) == len(response.chunks)
    else:
        assert len(chunks) == len(response.chunks)
        assert [title(rect).split(" \u00b7 ")[1] for rect in chunks] == [
            f"{chunk.at:.3f} s" for chunk in response.chunks
        ]
    events = framing.events(response)
    ticks = of_class(stream, "line", "ev")
    if len(events) <= MAX_MARKS:
        kinds = event_kinds(events)
        assert [tick.get("data-type") for tick in ticks] == [kind.type for kind in kinds]
        assert [tick.get("class") for tick in ticks] == [f"ev {kind.kind}" for kind in kinds]
    figures = timing.summary(response)
    if figures.ttfb is not None:
        ttfb = marker(stream, "ttfb")
        assert ttfb.get("data-at") == f"{figures.ttfb:.6f}"
        line = ttfb.find("line")
        assert line is not None
        assert chunks
        first_chunk = float(chunks[0].get("x", ""))
        assert float(line.get("x1", "")) == pytest.approx(first_chunk, abs=BIN_PX)
    if figures.ttft is not None:
        assert marker(stream, "ttft").get("data-at") == f"{figures.ttft:.6f}"
    assert marker(stream, "end").get("data-at") == f"{response.end.at:.6f}"
    return stream


@pytest.mark.parametrize("path", SAMPLES, ids=[path.stem for path in SAMPLES])
def test_each_sample_cassette_draws_its_chunks_events_and_markers(path: Path) -> None:
    cassette = Cassette.load(path)
    page = report(cassette, names=[path.name])
    (interaction,) = cassette.interactions
    stream = check_stream(page, interaction)
    end = marker(stream, "end")
    assert "".join(end.itertext()).startswith("EOF ")
    assert end.get("class") == "marker end"
    dialect = path.name.split("-")[0]
    assert f"<td>{dialect}</td>" in page


def test_the_samples_cover_the_three_dialects() -> None:
    assert {path.name.split("-")[0] for path in SAMPLES} == {"responses", "chat", "anthropic"}


def test_a_cut_stream_ends_at_the_cut_and_its_finding_is_named() -> None:
    interaction = synthesize("chat", "Once upon a time there was a robot.", failure="cut")
    page = report(single(interaction))
    stream = check_stream(page, interaction)
    end = marker(stream, "end")
    assert end.get("class") == "marker end bad"
    assert "".join(end.itertext()).startswith("cut (RemoteProtocolError) ")
    assert "1: stream.truncated (error)" in page


@pytest.mark.parametrize(
    ("error", "label"),
    [
        ("SocketTimeoutError", "timeout (SocketTimeoutError) "),
        ("ClientPayloadError", "cut (ClientPayloadError) "),
    ],
)
def test_an_end_recorded_under_another_librarys_name_is_labelled_by_its_meaning(
    error: str, label: str
) -> None:
    interaction = synthesize("responses", "Hello there, friend.")
    response = interaction.response
    ended = attrs.evolve(response, end=attrs.evolve(response.end, error=error, message="m"))
    page = report(single(attrs.evolve(interaction, response=ended)))
    end = marker(check_stream(page, attrs.evolve(interaction, response=ended)), "end")
    assert end.get("class") == "marker end bad"
    assert "".join(end.itertext()).startswith(label)


def test_a_client_stop_is_drawn_as_a_stop() -> None:
    interaction = synthesize("responses", "Hello there, friend.")
    response = interaction.response
    stopped = attrs.evolve(
        response,
        chunks=response.chunks[:5],
        end=StreamEnd(response.chunks[4].at + 0.01, truncated=True),
    )
    page = report(single(attrs.evolve(interaction, response=stopped)))
    end = marker(check_stream(page, attrs.evolve(interaction, response=stopped)), "end")
    assert end.get("class") == "marker end stop"
    assert "".join(end.itertext()).startswith("client stop ")


def test_an_ndjson_stream_shows_its_lines_its_text_and_its_usage() -> None:
    interaction = ndjson_interaction()
    page = report(single(interaction))
    stream = check_stream(page, interaction)
    ticks = of_class(stream, "line", "ev")
    assert [(t.get("data-type"), t.get("class")) for t in ticks] == [
        ("message", "ev text"),
        ("message", "ev text"),
        ("done", "ev terminal"),
    ]
    assert "<td>ndjson, no known dialect</td>" in page
    (growth,) = [svg for svg in parsed(page) if svg.get("class") == "growth"]
    assert "tokens" in title(growth)  # its usage says how many: eval_count
    (curve,) = of_class(growth, "polyline", "curve")
    assert title(curve).startswith("2 tokens by 0.300 s")


def test_the_text_curve_counts_characters_without_usage_and_marks_the_largest_gaps() -> None:
    interaction = synthesize("chat", "One two three four five six seven eight.", ttft=0.2)
    stalled = faults.stall(after_events=4, seconds=1.5).apply(interaction.response)
    page = report(single(attrs.evolve(interaction, response=stalled)))
    (growth,) = [svg for svg in parsed(page) if svg.get("class") == "growth"]
    assert "characters" in title(growth)
    (curve,) = of_class(growth, "polyline", "curve")
    assert title(curve).startswith(f"{len('One two three four five six seven eight.')} characters")
    gaps = of_class(growth, "g", "gap-mark")
    assert gaps
    assert [re.match(r"gap 1\.5\d s", "".join(gap.itertext())) is not None for gap in gaps] == [
        True
    ]
    assert "tokens/s" in "".join(of_class(growth, "g", "rate-mark")[0].itertext())


def test_a_stream_of_10000_events_is_drawn_fast_thinned_and_light() -> None:
    text = " ".join(f"w{n}" for n in range(10_000))
    interaction = responses.stream(text, tokens_per_second=200)
    cassette = single(interaction)
    started = time.perf_counter()
    page = report(cassette)
    seconds = time.perf_counter() - started
    assert seconds < 5  # about 0.3 s on a quiet machine; CI boxes are shared
    assert len(page.encode()) < 2_000_000
    assert "10,008 events and 10,008 chunks: marks thinned" in page
    stream = check_stream(page, interaction)
    ticks = of_class(stream, "line", "ev")
    assert len(ticks) < 2_000
    assert sum(int(tick.get("data-count", "1")) for tick in ticks) == 10_008
    assert {tick.get("class") for tick in ticks} == {
        "ev other",
        "ev item",
        "ev text",
        "ev terminal",
    }


def test_two_cassettes_share_one_time_axis_and_a_table_of_changes() -> None:
    a = Cassette([synthesize("responses", "Hello there.", ttft=0.3)])
    b = Cassette([synthesize("responses", "Hello there, how are you?", ttft=0.8), chat.stream("x")])
    page = report(a, b, names=["old.msgpack", "new.msgpack"])
    assert "A: old.msgpack \u00b7 B: new.msgpack" in page
    first, second = timelines(page)
    assert [g.get("data-side") for g in of_class(first, "g", "stream")] == ["A", "B"]
    assert len(of_class(first, "g", "axis")) == 1  # one axis for both
    end_a, end_b = a.interactions[0].response.end.at, b.interactions[0].response.end.at
    assert end_a < end_b
    lines = [marker(g, "end").find("line") for g in of_class(first, "g", "stream")]
    x_of = [float(line.get("x1", "")) for line in lines if line is not None]
    assert x_of == pytest.approx([LEFT + PLOT * end_a / end_b, LEFT + PLOT], abs=0.1)
    assert [g.get("data-side") for g in of_class(second, "g", "stream")] == ["B"]
    assert "(only in B)" in page
    assert "<tr><th>figure</th><th>A</th><th>B</th><th>change</th></tr>" in page
    assert "<tr><th>TTFB</th><td>0.300 s</td><td>0.800 s</td><td>+0.500 s (+167%)</td></tr>" in page


def test_the_same_cassette_gives_the_same_bytes() -> None:
    cassette = Cassette.load(SAMPLES[0])
    assert report(cassette) == report(Cassette.load(SAMPLES[0]))


# --- hostile input ------------------------------------------------------------------------

SECRET = "sk-proj-" + "a1B2c3D4e5F6g7H8i9J0" * 3


def test_recorded_strings_cannot_inject_markup() -> None:
    hostile = '"><script>alert(1)</script><img src=http://evil.example/x>'
    quoted = hostile.replace('"', "'")
    body = (
        f"event: x{hostile}\ndata: {hostile}\x1b[31m\x00\u202e</title></svg>\n\n"
        f'data: {{"type":"{quoted}"}}\n\n'
    ).encode()
    interaction = Interaction(
        Request(method="POST", url=f"https://api.example.com/v1/x?q={hostile}"),
        Response(
            status=200,
            headers=[("content-type", "text/event-stream")],
            chunks=[Chunk(0.1, body)],
            end=StreamEnd(0.2, error=f"Boom{hostile}", message=hostile),
        ),
    )
    page = report(single(interaction), names=[f"a{hostile}.msgpack"])
    parsed(page)  # no script, no external src, every svg well-formed
    for dangerous in ("<img", "<script", "\x1b", "\x00", "\u202e"):
        assert dangerous not in page


def test_a_secret_never_reaches_the_page() -> None:
    interaction = Interaction(
        Request(
            method="POST",
            url=f"https://user:{SECRET}@api.openai.com/v1/responses?api_key={SECRET}",
            headers=[("authorization", f"Bearer {SECRET}")],
        ),
        Response(
            status=200,
            headers=[("content-type", "text/event-stream")],
            chunks=[Chunk(0.1, f'data: {{"echo": "{SECRET}"}}\n\n'.encode())],
            end=StreamEnd(0.2, error="ReadError", message=f"key {SECRET} refused"),
        ),
    )
    page = report(single(interaction))
    parsed(page)
    assert SECRET not in page
    assert SECRET[:24] not in page
    assert "REDACTED" in page


# --- choosing, and errors -----------------------------------------------------------------


def test_one_interaction_can_be_chosen() -> None:
    cassette = Cassette([chat.stream("one"), chat.stream("two"), chat.stream("three")])
    page = report(cassette, interaction=1)
    assert len(timelines(page)) == 1
    assert '<section class="interaction" id="i1">' in page


@pytest.mark.parametrize(
    ("cassette", "interaction", "message"),
    [
        (Cassette([chat.stream("x")]), 1, "there is no interaction 1: the cassette has 1"),
        (Cassette([chat.stream("x")]), -1, "there is no interaction -1"),
        (Cassette(), None, "the cassette has no interactions to report"),
    ],
    ids=["past the end", "negative", "empty"],
)
def test_a_missing_interaction_is_a_configuration_error(
    cassette: Cassette, interaction: int | None, message: str
) -> None:
    with pytest.raises(ConfigurationError, match=re.escape(message)):
        report(cassette, interaction=interaction)


def test_a_response_that_is_not_a_stream_has_chunks_and_an_end_only() -> None:
    interaction = Interaction(
        Request(method="GET", url="https://api.example.com/v1/models"),
        Response(
            status=200, headers=[("content-type", "application/json")], chunks=[Chunk(0.1, b"{}")]
        ),
    )
    page = report(single(interaction))
    stream = check_stream(page, interaction)
    assert of_class(stream, "line", "ev") == []
    assert "<td>not a stream</td>" in page
    assert "No text to draw" in page


# --- the command --------------------------------------------------------------------------


def test_the_command_writes_the_page_and_says_where(tmp_path: Path) -> None:
    out = tmp_path / "timing.html"
    result = run_replay("report", str(SAMPLES[0]), "-o", str(out))
    assert result.returncode == 0, result.stderr
    assert result.stderr.decode().startswith(f"wrote {out}: 1 interaction, ")
    page = out.read_text(encoding="utf-8")
    check_stream(page, Cassette.load(SAMPLES[0]).interactions[0])
    again = run_replay("report", str(SAMPLES[0]), "-o", "-")
    assert again.stdout == out.read_bytes()  # the same bytes, every time


def test_the_command_compares_two_cassettes_and_picks_an_interaction(tmp_path: Path) -> None:
    result = run_replay("report", str(SAMPLES[0]), str(SAMPLES[1]), "-i", "0", "-o", "-")
    assert result.returncode == 0, result.stderr
    page = result.stdout.decode()
    (svg,) = timelines(page)
    assert len(of_class(svg, "g", "stream")) == 2
    assert f"A: {SAMPLES[0]} \u00b7 B: {SAMPLES[1]}" in page


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-i", "4"], "replay: error: there is no interaction 4: the cassette has 1"),
        (["missing.msgpack"], "replay: error: "),
    ],
    ids=["no such interaction", "no such file"],
)
def test_the_commands_errors_are_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    result = run_replay("report", str(SAMPLES[0]), *args, "-o", str(tmp_path / "r.html"))
    assert result.returncode == 1
    lines = result.stderr.decode().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(message)
    assert not (tmp_path / "r.html").exists()
