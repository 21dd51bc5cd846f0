"""Long streams: the inspecting verbs stay near-linear, and what they print stays bounded.

Each cassette is built here: one stream of many tiny events (`data: x`), or of many equal
ones. The verbs run as a user runs them, in a subprocess. Their work is measured as the
function calls that subprocess makes (cProfile's count), which does not depend on how
loaded the machine is: the calls one more event costs, between a stream and one twice as
long, is what must stay small (a verb that costs a Python call or two per chunk, or does a
quadratic amount of work, makes hundreds or thousands). What a verb prints of a long
stream is thinned, and says so.
"""

from __future__ import annotations

import math
import pstats
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest
from commands import replay_text
from hypothesis import given
from hypothesis import strategies as st

from replay import Cassette, Interaction, Request, Response
from replay.dialects import chat
from replay.inspect.diff import diff, format_diff
from replay.inspect.diff_text import MAX_RUNS, RUN_EVENTS, TEXT_WIDTH
from replay.inspect.report_svg import LEFT, PLOT, Scale, axis
from replay.model import Chunks

TINY = b"data: x\n\n"


def sse(payloads: Sequence[bytes], times: Sequence[float] | None = None) -> Cassette:
    """One SSE interaction of these chunks (by default a microsecond apart)."""
    if times is None:
        times = [index / 1e6 for index in range(len(payloads))]
    response = Response(
        status=200,
        headers=[("content-type", "text/event-stream")],
        chunks=Chunks(times, payloads),
    )
    return Cassette([Interaction(Request(method="GET", url="http://h/"), response)])


def stream(count: int, data: bytes = TINY, *, last: bytes | None = None) -> Cassette:
    """One SSE interaction of `count` chunks of `data` each (the last one `last`)."""
    payloads = [data] * count
    if last is not None:
        payloads[-1] = last
    return sse(payloads)


def saved(cassette: Cassette, path: Path) -> str:
    cassette.save(path)
    return str(path)


def calls(tmp_path: Path, *args: str) -> int:
    """The function calls `replay ARGS` makes, as cProfile counts them."""
    profile = tmp_path / "calls.prof"
    command = [sys.executable, "-m", "cProfile", "-o", str(profile), "-m", "replay.cli", *args]
    subprocess.run(command, capture_output=True, timeout=120, check=False, cwd=tmp_path)
    return int(pstats.Stats(str(profile)).total_calls)  # type: ignore[attr-defined]


def calls_per_event(tmp_path: Path, verb: list[str], build: list[Cassette], count: int) -> float:
    """The calls one more event costs `replay VERB FILES`: between `build[0]`'s files (of
    `count` events) and `build[1]`'s (of `2 * count`)."""
    totals = []
    for size, cassettes in (
        ("small", build[: len(build) // 2]),
        ("large", build[len(build) // 2 :]),
    ):
        files = [saved(c, tmp_path / f"{size}{n}.msgpack") for n, c in enumerate(cassettes)]
        totals.append(calls(tmp_path, *verb, *files))
    return (totals[1] - totals[0]) / count


# --- show and check: no Python call per chunk -----------------------------------------------


@pytest.mark.parametrize("verb", ["show", "check"])
def test_show_and_check_cost_a_few_calls_per_chunk(tmp_path: Path, verb: str) -> None:
    # Before, each chunk went through the incremental parser (and was made a Chunk): some
    # 28 calls a chunk for show, 60 for check; 1,000,000 chunks took 35 s.
    count = 50_000
    per_event = calls_per_event(tmp_path, [verb], [stream(count), stream(2 * count)], count)
    assert per_event < {"show": 8, "check": 20}[verb]


def test_show_counts_the_events_of_a_million_tiny_chunks(tmp_path: Path) -> None:
    path = saved(stream(1_000_000), tmp_path / "long.msgpack")
    shown = replay_text("show", path)
    assert shown.returncode == 0, shown.stderr
    (row,) = shown.stdout.splitlines()[1:]
    assert row.split()[3:5] == ["1000000", "9000000"]  # chunks, bytes
    assert row.split()[7] == "1000000"  # events


# --- diff: near-linear on repeated events; its text thinned -----------------------------------


def test_diff_of_repeated_events_costs_a_few_calls_per_event(tmp_path: Path) -> None:
    # difflib's search costs a step per pair of equal events: quadratic in a run of equal
    # events (20,000 of them took 122 s). Both sizes are past what difflib is let spend.
    count = 3_000
    same, one_more = stream(count), stream(2 * count)
    changed = stream(count, last=b"data: y\n\n")
    changed_more = stream(2 * count, last=b"data: y\n\n")
    cassettes = [same, changed, one_more, changed_more]
    assert calls_per_event(tmp_path, ["diff"], cassettes, count) < 100


def test_diff_of_20000_identical_events_finds_the_one_that_changed(tmp_path: Path) -> None:
    a = saved(stream(20_000, b'data: {"a":1}\n\n'), tmp_path / "a.msgpack")
    b = saved(
        stream(20_000, b'data: {"a":1}\n\n', last=b'data: {"a":2}\n\n'), tmp_path / "b.msgpack"
    )
    result = replay_text("diff", a, b)  # (in 60 s at most; some 1 s on a quiet machine)
    assert result.returncode == 1, result.stderr
    assert "  @@ changed: A event 19999, B event 19999 @@" in result.stdout.splitlines()
    assert replay_text("diff", a, a).returncode == 0


def test_diff_of_long_streams_that_differ_throughout_is_thinned(tmp_path: Path) -> None:
    a = saved(stream(5_000), tmp_path / "a.msgpack")
    b = saved(stream(5_000, b"data: y\n\n"), tmp_path / "b.msgpack")
    lines = replay_text("diff", a, b).stdout.splitlines()
    assert lines[3] == "  @@ changed: A events 0-4999, B events 0-4999 @@"
    assert (
        f"  … showing {RUN_EVENTS} of 5,000 events of A and {RUN_EVENTS} of 5,000 of B in this run"
        in lines
    )
    assert len([line for line in lines if line.startswith(("  -", "  +"))]) == 2 * RUN_EVENTS


def test_diff_shows_the_first_runs_of_changes_and_counts_the_others() -> None:
    a = stream(1_000)
    b = sse([b"data: y%d\n\n" % n if n % 4 == 0 else TINY for n in range(1_000)])
    result = diff(a, b)
    changes = result.interactions[0].changes
    assert len(changes) > MAX_RUNS
    lines = format_diff(result).splitlines()
    assert len([line for line in lines if line.startswith("  @@")]) == MAX_RUNS
    hidden = changes[MAX_RUNS:]
    a_count = sum(change.a_end - change.a_start for change in hidden)
    b_count = sum(change.b_end - change.b_start for change in hidden)
    counted = f"the other {len(hidden)} hold {a_count} events of A and {b_count} of B"
    assert f"  … showing {MAX_RUNS} of {len(changes)} runs of changes; {counted}" in lines


def test_diff_shows_a_long_text_around_its_first_difference() -> None:
    words = " ".join(f"word{n}" for n in range(2_000))
    changed = words.replace("word1500", "WORD1500")
    text = format_diff(diff(Cassette([chat.stream(words)]), Cassette([chat.stream(changed)])))
    lines = text.splitlines()
    heading = next(line for line in lines if line.startswith("  text differs"))
    start = words.index("word1500") - 200
    assert heading == (
        f"  text differs (showing characters {start:,}-{start + TEXT_WIDTH:,} of "
        f"{len(words):,} in A and {len(changed):,} in B):"
    )
    assert f"    A: {words[start : start + TEXT_WIDTH]!r}" in lines
    assert f"    B: {changed[start : start + TEXT_WIDTH]!r}" in lines


# --- report: bounded, thinned, and its time axis safe for any span --------------------------


def test_report_of_a_long_stream_is_a_light_page_that_says_it_is_thinned(tmp_path: Path) -> None:
    path = saved(stream(200_000), tmp_path / "long.msgpack")
    page = tmp_path / "page.html"
    result = replay_text("report", path, "-o", str(page))
    assert result.returncode == 0, result.stderr
    html = page.read_text()
    assert len(html) < 1_000_000
    assert "200,000 events and 200,000 chunks: marks thinned" in html


def test_report_costs_a_bounded_number_of_calls_per_event(tmp_path: Path) -> None:
    # Each event is read, told apart, timed and checked, and its mark binned: some 150
    # calls an event before (1,000,000 tiny chunks: 34 s), under 70 now.
    count = 20_000
    verb = ["report", "-o", "page.html"]
    assert calls_per_event(tmp_path, verb, [stream(count), stream(2 * count)], count) < 100


@given(st.floats(min_value=0.001, max_value=1.7976931348623157e308))
def test_the_time_axis_has_a_few_ticks_within_the_plot_for_any_span(span: float) -> None:
    lines = [part for part in axis(Scale(span), 0, 100) if part.startswith("<line")]
    assert 2 <= len(lines) <= 12
    xs = [float(line.split('x1="')[1].split('"')[0]) for line in lines]
    assert all(math.isfinite(x) and LEFT <= x <= LEFT + PLOT for x in xs)
