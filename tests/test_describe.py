"""`replay show` and `replay play`: the views of a cassette, and the body at its recorded pace.

Views are checked on a cassette recorded from a real local origin and on hand-built
cassettes that hold every kind of ending, binary and compressed bodies. Timing is checked
on a `VirtualClock`, so the sleeps asserted are exact. The CLI is run as a user runs it.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import attrs
import httpx
import pytest
from commands import replay_bytes as run_replay

import replay
from replay.inspect import describe
from replay.model import Chunk, Interaction, Request, Response, StreamEnd
from replay.store.cassette import Cassette
from replay.testing import Origin, Script

SSE = (("content-type", "text/event-stream"),)
LONG = "x" * 150


def sse_interaction(**changes: Any) -> Interaction:
    """A clean SSE stream: headers at 0.05 s, three chunks, the end at 0.4 s."""
    response = Response(
        status=200,
        headers=SSE,
        headers_at=0.05,
        chunks=[
            Chunk(0.1, b"event: greeting\ndata: hello\n\n"),
            Chunk(0.25, b"data: line one\ndata: line two\n\n"),
            Chunk(0.25, f"data: {LONG}\n\n".encode()),
        ],
        end=StreamEnd(at=0.4),
    )
    request = Request(
        method="POST",
        url="https://api.example.com/v1/chat/completions",
        headers=[("Content-Type", "application/json"), ("Authorization", "REDACTED")],
        body=b'{"stream":true}',
    )
    return attrs.evolve(Interaction(request, response), **changes)


def hand_built() -> Cassette:
    """Every kind of ending and body, one interaction each."""
    stream = sse_interaction()
    get = Request(method="GET", url="http://127.0.0.1:8080/stream?n=2")
    return Cassette(
        [
            stream,  # 0: clean end
            Interaction(  # 1: the server dropped the connection
                get,
                Response(
                    status=200,
                    headers=SSE,
                    chunks=[Chunk(0.5, b"data: a\n\n")],
                    end=StreamEnd(
                        at=1.5, error="RemoteProtocolError", message="peer closed\nearly"
                    ),
                ),
            ),
            Interaction(  # 2: the client stopped reading
                get,
                Response(
                    status=200,
                    headers=SSE,
                    chunks=[Chunk(0.2, b"data: a\n\n")],
                    end=StreamEnd(at=0.2, truncated=True),
                ),
            ),
            Interaction(  # 3: a binary body that is not UTF-8
                get,
                Response(
                    status=200,
                    headers=[("content-type", "application/octet-stream")],
                    chunks=[Chunk(0.0, b"\xff\xfe\x00raw")],
                ),
            ),
            Interaction(  # 4: gzip-compressed events
                get,
                Response(
                    status=200,
                    headers=[*SSE, ("content-encoding", "gzip")],
                    chunks=[Chunk(0.3, gzip.compress(b"data: zipped\n\ndata: again\n\n", mtime=0))],
                ),
            ),
            Interaction(get, Response(status=204, headers_at=0.01)),  # 5: no body at all
        ]
    )


# -- table ------------------------------------------------------------------------------------


NOTES = ("times: ", "#")  # the lines under the table: not rows


def rows(text: str) -> list[list[str]]:
    """The table's rows (not its header, nor the notes under it)."""
    return [line.split() for line in text.splitlines()[1:] if not line.startswith(NOTES)]


def test_table_has_a_header_and_one_row_per_interaction() -> None:
    text = describe.table(hand_built())
    header = text.splitlines()[0].split()
    assert header == [
        "#", "method", "status", "chunks", "bytes", "ttfb_ms", "duration_ms", "events", "end",
        "digest", "url",
    ]  # fmt: skip
    assert text.endswith("\n")
    assert [row[0] for row in rows(text)] == ["0", "1", "2", "3", "4", "5"]


def test_table_row_gives_counts_sizes_and_milliseconds() -> None:
    row = rows(describe.table(hand_built()))[0]
    digest = row.pop(9)
    assert row == [
        "0", "POST", "200", "3", str(len(hand_built().interactions[0].response.body)),
        "100.0", "400.0", "3", "eof", "https://api.example.com/v1/chat/completions",
    ]  # fmt: skip
    assert len(digest) == 12
    int(digest, 16)


@pytest.mark.parametrize(
    ("index", "end", "events"),
    [(0, "eof", "3"), (1, "RemoteProtocolError", "1"), (2, "truncated", "1"),
     (3, "eof", "0"), (4, "eof", "2"), (5, "eof", "0")],
    ids=["clean", "error", "truncated", "binary", "gzip", "empty"],
)  # fmt: skip
def test_table_tells_how_each_body_ended_and_counts_events(
    index: int, end: str, events: str
) -> None:
    row = rows(describe.table(hand_built()))[index]
    assert (row[7], row[8]) == (events, end)


def test_table_shows_a_dash_for_the_first_byte_of_an_empty_body() -> None:
    row = rows(describe.table(hand_built()))[5]
    assert row[4:7] == ["0", "-", "10.0"]


def test_table_marks_events_it_cannot_decode() -> None:
    broken = sse_interaction(
        response=Response(
            status=200,
            headers=[*SSE, ("content-encoding", "gzip")],
            chunks=[Chunk(0.0, b"not gzip at all")],
        )
    )
    assert rows(describe.table(Cassette([broken])))[0][7] == "?"


def test_table_is_the_same_text_every_time_and_names_no_file(tmp_path: Path) -> None:
    cassette = hand_built()
    cassette.save(tmp_path / "a.msgpack")
    text = describe.table(Cassette.load(tmp_path / "a.msgpack"))
    assert text == describe.table(cassette) == describe.table(hand_built())
    assert "a.msgpack" not in text


def test_changing_one_interaction_changes_only_its_row() -> None:
    before = hand_built()
    after = hand_built()
    after.interactions[3] = attrs.evolve(
        after.interactions[3],
        request=attrs.evolve(after.interactions[3].request, body=b"a different prompt"),
    )
    old, new = describe.table(before).splitlines(), describe.table(after).splitlines()
    assert [i for i, (a, b) in enumerate(zip(old, new, strict=True)) if a != b] == [4]


def test_every_row_is_aligned_with_the_header() -> None:
    lines = describe.table(hand_built()).splitlines()
    url_column = lines[0].index("url")
    # The longest error names of the served libraries fit the `end` column too.
    assert all(line.index("http") == url_column for line in lines[1:])
    long_error = attrs.evolve(hand_built().interactions[1].response.end, error="E" * 30)
    cut = attrs.evolve(hand_built().interactions[1].response, end=long_error)
    (line,) = describe.table(Cassette([Interaction(sse_interaction().request, cut)])).splitlines()[
        1:
    ]
    assert line.index("http") == url_column
    assert "E" * 19 + "~" in line


def test_table_of_an_empty_cassette_says_so() -> None:
    assert describe.table(Cassette()).splitlines()[1] == "(no interactions)"


# -- events -----------------------------------------------------------------------------------


def test_events_lists_each_event_with_its_time_name_and_data() -> None:
    lines = describe.events(Cassette([sse_interaction()])).splitlines()
    assert lines[0] == "#0 POST https://api.example.com/v1/chat/completions -> 200"
    assert lines[1].split(maxsplit=2) == ["0.100", "greeting", "hello"]
    assert lines[2].split(maxsplit=2) == ["0.250", "message", "line one\\nline two"]
    assert lines[-1].split() == ["0.400", "(end:", "eof)"]


def test_events_cuts_long_data_to_one_short_line() -> None:
    line = describe.events(Cassette([sse_interaction()])).splitlines()[3]
    data = line.split(maxsplit=2)[2]
    assert len(data) == describe.DATA_WIDTH
    assert data.endswith("...")
    assert data.startswith("xxx")


def test_events_show_a_deltas_text_first_and_cut_where_asked() -> None:
    # A Responses delta carries its text after its item_id: shown first, it is never cut.
    from replay.dialects import responses

    stream = Cassette([responses.stream("Hello there")])
    deltas = [line for line in describe.events(stream).splitlines() if ".delta" in line]
    assert [line.split(maxsplit=2)[2].split("  ")[0] for line in deltas] == [
        '"Hello"',
        '" there"',
    ]
    assert all(len(line.split(maxsplit=2)[2]) == describe.DATA_WIDTH for line in deltas)
    whole = describe.events(stream, width=0).splitlines()
    assert any(line.endswith('"delta":"Hello","logprobs":[]}') for line in whole)


def test_events_tells_how_a_stream_ended_badly() -> None:
    lines = describe.events(hand_built()).splitlines()
    assert "     1.500  (end: RemoteProtocolError: peer closed\\nearly)" in lines
    assert "     0.200  (end: truncated by the client)" in lines


def test_events_decodes_gzip_and_passes_over_other_bodies() -> None:
    text = describe.events(hand_built())
    assert "(not an event stream: content-type application/octet-stream)" in text
    assert "(not an event stream: content-type none)" in text
    zipped = text.split("#4 ")[1].splitlines()
    assert [line.split()[1:] for line in zipped[1:3]] == [
        ["message", "zipped"],
        ["message", "again"],
    ]


# -- raw --------------------------------------------------------------------------------------


def test_raw_shows_request_and_response_as_text() -> None:
    text = describe.raw(Cassette([sse_interaction()]))
    assert text.startswith(
        "== interaction 0 ==\n"
        "> POST https://api.example.com/v1/chat/completions\n"
        "> Content-Type: application/json\n"
        "> Authorization: REDACTED\n"
        ">\n"
        "== request body: 15 bytes ==\n"
        '{"stream":true}\n'
        "< 200  (headers at 0.050 s)\n"
        "< content-type: text/event-stream\n"
        "<\n"
        "== body: 3 chunks, "
    )
    assert "event: greeting\ndata: hello\n\ndata: line one\n" in text
    assert text.endswith("== end: eof at 0.400 s ==\n")


def test_raw_shows_gzip_bodies_decompressed_and_says_so() -> None:
    text = describe.raw(hand_built()).split("== interaction 4 ==")[1]
    assert "bytes of gzip, shown decompressed (27 bytes) ==\ndata: zipped\n" in text


def test_raw_escapes_bytes_that_are_not_utf8() -> None:
    text = describe.raw(hand_built()).split("== interaction 3 ==")[1]
    assert "\\xff\\xfe\\x00raw\n" in text  # (the NUL too: no control character is written)


# -- json -------------------------------------------------------------------------------------


def test_json_holds_every_field_with_bytes_as_text_or_base64() -> None:
    document = json.loads(describe.to_json(hand_built()))
    assert (document["format"], document["version"]) == ("replay-cassette-json", 1)
    first = document["interactions"][0]
    assert first["request"] == {
        "method": "POST",
        "url": "https://api.example.com/v1/chat/completions",
        "headers": [["Content-Type", "application/json"], ["Authorization", "REDACTED"]],
        "body": '{"stream":true}',
    }
    assert first["response"]["chunks"][0] == {
        "at": 0.1,
        "data": "event: greeting\ndata: hello\n\n",
    }
    assert first["response"]["headers_at"] == 0.05
    assert document["interactions"][1]["response"]["end"] == {
        "at": 1.5,
        "error": "RemoteProtocolError",
        "message": "peer closed\nearly",
        "truncated": False,
    }
    binary = document["interactions"][3]["response"]["chunks"][0]
    assert binary == {"at": 0.0, "data_base64": "//4AcmF3"}


# -- play -------------------------------------------------------------------------------------


class Writes(io.BytesIO):
    """A binary stream that notes the virtual time of each write and each flush."""

    def __init__(self, clock: replay.VirtualClock) -> None:
        super().__init__()
        self.clock = clock
        self.log: list[tuple[str, float, bytes]] = []

    def write(self, data: bytes) -> int:  # type: ignore[override]
        self.log.append(("write", self.clock.time, bytes(data)))
        return super().write(data)

    def flush(self) -> None:
        self.log.append(("flush", self.clock.time, b""))


@pytest.mark.parametrize(
    ("speed", "sleeps"),
    # The headers (at 0.05 s) are a step of their own: the wait to the first chunk is split.
    [
        (1, [0.05, 0.05, 0.15, 0.15]),
        ("2x", [0.025, 0.025, 0.075, 0.075]),
        ("0.5", [0.1, 0.1, 0.3, 0.3]),
    ],
    ids=["1x", "2x", "half"],
)
def test_play_writes_each_chunk_at_its_recorded_time(
    speed: float | str, sleeps: list[float]
) -> None:
    clock = replay.VirtualClock(time=100.0)
    out = Writes(clock)
    describe.play(Cassette([sse_interaction()]), 0, speed, out, clock=clock)
    assert clock.sleeps == pytest.approx(sleeps)
    chunks = sse_interaction().response.chunks
    assert [(kind, data) for kind, _, data in out.log] == [
        entry for chunk in chunks for entry in [("write", chunk.data), ("flush", b"")]
    ]
    factor = replay.parse_speed(speed)
    due = [100.0 + chunk.at / factor for chunk in chunks for _ in ("write", "flush")]
    assert [at for _, at, _ in out.log] == pytest.approx(due)


def test_play_at_instant_speed_never_waits() -> None:
    clock = replay.VirtualClock()
    out = io.BytesIO()
    describe.play(Cassette([sse_interaction()]), 0, "instant", out, clock=clock)
    assert clock.sleeps == []
    assert out.getvalue() == sse_interaction().response.body


def test_play_stops_quietly_where_the_recorded_stream_broke() -> None:
    clock = replay.VirtualClock()
    out = io.BytesIO()
    describe.play(hand_built(), 1, 1, out, clock=clock)
    assert out.getvalue() == b"data: a\n\n"
    assert clock.time == pytest.approx(1.5)


def test_play_decompresses_unless_asked_for_the_recorded_bytes() -> None:
    cassette = hand_built()
    decoded, recorded = io.BytesIO(), io.BytesIO()
    describe.play(cassette, 4, "instant", decoded)
    describe.play(cassette, 4, "instant", recorded, decode=False)
    assert decoded.getvalue() == b"data: zipped\n\ndata: again\n\n"
    assert recorded.getvalue() == cassette.interactions[4].response.body


@pytest.mark.parametrize(
    ("cassette", "index", "message"),
    [
        (hand_built(), 6, "there is no interaction 6: the cassette has 6 (choose 0 to 5)"),
        (hand_built(), -1, "there is no interaction -1: the cassette has 6 (choose 0 to 5)"),
        (Cassette(), 0, "the cassette has no interactions to play"),
    ],
    ids=["past-the-end", "negative", "empty"],
)
def test_play_names_the_valid_range_of_interactions(
    cassette: Cassette, index: int, message: str
) -> None:
    with pytest.raises(replay.ConfigurationError) as caught:
        describe.play(cassette, index, 1, io.BytesIO())
    assert str(caught.value) == message


def test_play_rejects_a_bad_speed() -> None:
    with pytest.raises(replay.ConfigurationError, match="speed"):
        describe.play(hand_built(), 0, "fast", io.BytesIO())


# -- a cassette recorded from a real origin ---------------------------------------------------


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A cassette of three real requests (SSE, gzip SSE, JSON 404), and the origin's URL."""
    path = tmp_path_factory.mktemp("recorded") / "recorded.msgpack"
    routes = {
        "/v1/responses": Script(
            chunks=[(0.02, b"event: response.created\ndata: {}\n\n"), (0.01, b"data: [DONE]\n\n")]
        ),
        "/gz": Script(chunks=[(0.0, b"data: a\n\n"), (0.01, b"data: b\n\n")], gzip=True),
    }
    with Origin(routes) as origin, replay.use_cassette(path):
        httpx.post(origin.url + "/v1/responses", json={"input": "hi", "stream": True})
        httpx.get(origin.url + "/gz")
        httpx.get(origin.url + "/missing")
        url = origin.url
    return path, url


def test_views_of_a_recorded_cassette(recorded: tuple[Path, str]) -> None:
    path, url = recorded
    cassette = Cassette.load(path)
    table = rows(describe.table(cassette))
    assert [(r[1], r[2], r[7], r[8], r[10]) for r in table] == [
        ("POST", "200", "2", "eof", f"{url}/v1/responses"),
        ("GET", "200", "2", "eof", f"{url}/gz"),
        ("GET", "404", "0", "eof", f"{url}/missing"),
    ]
    assert float(table[0][5]) >= 20.0  # the origin waited 20 ms before the first event
    assert describe.table(cassette).splitlines()[-1].startswith("times: ")  # where from
    events = describe.events(cassette).splitlines()
    assert events[1].split()[1:] == ["response.created", "{}"]
    assert events[2].split()[1:] == ["message", "[DONE]"]
    assert "shown decompressed (18 bytes) ==\ndata: a\n\ndata: b\n" in describe.raw(cassette)
    assert len(json.loads(describe.to_json(cassette))["interactions"]) == 3


# -- timeline ---------------------------------------------------------------------------------


def test_timeline_draws_each_interactions_chunk_arrivals_beside_its_timing() -> None:
    text = describe.timeline(hand_built())
    lines = text.splitlines()
    assert lines[0].split()[:2] == ["#", "chunk"]
    assert lines[0].split()[-5:] == ["ttfb_ms", "ttft_ms", "duration_ms", "end", "url"]
    first = lines[1]
    spark = first.split("|")[1]
    assert len(spark) == describe.SPARK_WIDTH
    # Chunks at 0.1 s and twice at 0.25 s over 0.4 s: a low block, then a full one.
    assert spark.strip() == "\u2584" + " " * 14 + "\u2588"
    assert first.split("|")[2].split() == [
        "100.0", "100.0", "400.0", "eof", "POST", "https://api.example.com/v1/chat/completions"
    ]  # fmt: skip
    figures = [line.split("|")[2].split()[:4] for line in lines[2:]]
    assert figures == [
        ["500.0", "500.0", "1500.0", "RemoteProtocolError"],
        ["200.0", "200.0", "200.0", "truncated"],
        ["0.0", "-", "0.0", "eof"],
        ["300.0", "300.0", "300.0", "eof"],
        ["-", "-", "10.0", "eof"],  # no body: it ends with its headers
    ]
    assert text.endswith("\n")


@pytest.mark.parametrize(
    ("times", "duration", "expected"),
    [
        ([], 1.0, "    "),
        ([0.0, 0.0, 0.5, 0.99], 1.0, "\u2588 \u2584\u2584"),
        ([0.0], 0.0, "\u2588   "),
        ([2.0], 1.0, "   \u2588"),  # past the end: the last block
    ],
    ids=["none", "mixed", "no-duration", "late"],
)
def test_sparkline_blocks_are_as_high_as_their_share_of_the_chunks(
    times: list[float], duration: float, expected: str
) -> None:
    assert describe.sparkline(times, duration, 4) == expected


def test_timeline_of_an_empty_cassette_says_so() -> None:
    assert describe.timeline(Cassette()).splitlines()[1] == "(no interactions)"


# -- the command line -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("saved") / "hand.msgpack"
    hand_built().save(path)
    return path


@pytest.mark.parametrize(
    ("flag", "view"),
    [
        ("", describe.table),
        ("--events", describe.events),
        ("--raw", describe.raw),
        ("--timeline", describe.timeline),
    ],
    ids=["table", "events", "raw", "timeline"],
)
def test_show_prints_each_view(saved: Path, flag: str, view: object) -> None:
    result = run_replay("show", str(saved), *([flag] if flag else []))
    assert result.returncode == 0, result.stderr
    assert result.stdout.decode() == view(hand_built())  # type: ignore[operator]


def test_show_takes_one_view_at_a_time(saved: Path) -> None:
    result = run_replay("show", str(saved), "--timeline", "--events")
    assert result.returncode == 2
    assert result.stderr.decode().splitlines()[0] == (
        "replay: error: argument --events: not allowed with argument --timeline"
        " (see replay show --help)"
    )


def test_show_json_is_json(saved: Path) -> None:
    result = run_replay("show", str(saved), "--json")
    assert result.returncode == 0, result.stderr
    assert len(json.loads(result.stdout)["interactions"]) == 6


def test_play_writes_the_body_to_stdout(saved: Path) -> None:
    result = run_replay("play", str(saved), "-i", "4", "--speed", "instant")
    assert result.returncode == 0, result.stderr
    assert result.stdout == b"data: zipped\n\ndata: again\n\n"


def test_play_applies_a_fault_as_replay_does(saved: Path) -> None:
    fault = "cut(after_events=1)"
    result = run_replay("play", str(saved), "-i", "0", "--speed", "instant", "--fault", fault)
    assert result.returncode == 0, result.stderr
    assert result.stdout == b"event: greeting\ndata: hello\n\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["show", "{missing}"], "replay: error: {missing}: no such file or directory\n"),
        (["show", "{corrupt}"], "replay: error: cannot read cassette "),
        (["play", "{corrupt}"], "replay: error: cannot read cassette "),
        (["play", "{saved}", "-i", "9"], "replay: error: there is no interaction 9: "),
        (["play", "{saved}", "--speed", "0"], "replay: error: speed must be positive"),
        (["play", "{saved}", "--fault", "cut(x=1)"], "replay: error: bad fault 'cut(x=1)'"),
    ],
    ids=["missing", "corrupt-show", "corrupt-play", "bad-index", "bad-speed", "bad-fault"],
)
def test_errors_are_one_line_without_a_traceback(
    tmp_path: Path, saved: Path, args: list[str], message: str
) -> None:
    corrupt = tmp_path / "corrupt.msgpack"
    corrupt.write_bytes(b"\x83\xa6format")
    paths = {"missing": tmp_path / "nope.msgpack", "corrupt": corrupt, "saved": saved}
    result = run_replay(*(arg.format(**paths) for arg in args))
    assert result.returncode == 1
    stderr = result.stderr.decode()
    assert stderr.startswith(message.format(**paths))
    assert stderr.count("\n") == 1
    assert "Traceback" not in stderr


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_git_diff_of_a_cassette_is_readable_through_textconv(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "HOME": str(tmp_path),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
    }

    def git(*args: str) -> str:
        done = subprocess.run(
            ["git", *args], cwd=tmp_path, env=env, capture_output=True, text=True, check=True
        )
        return done.stdout

    git("init", "-q")
    git("config", "diff.replay.textconv", f"{shlex.quote(sys.executable)} -m replay.cli show")
    (tmp_path / ".gitattributes").write_text("*.msgpack diff=replay\n")
    cassette = hand_built()
    cassette.save(tmp_path / "c.msgpack")
    git("add", ".")
    git("commit", "-q", "-m", "record")
    cassette.interactions[3] = attrs.evolve(
        cassette.interactions[3],
        request=attrs.evolve(cassette.interactions[3].request, method="PUT"),
    )
    cassette.save(tmp_path / "c.msgpack")
    diff = git("diff", "--", "c.msgpack")
    changed = [line for line in diff.splitlines() if line[:1] in "+-" and line[:3] not in "+++---"]
    assert [line[:12] for line in changed] == ["-  3  GET   ", "+  3  PUT   "]
    assert "Binary files differ" not in diff


@pytest.mark.parametrize("view", [describe.table, describe.events, describe.raw])
def test_no_view_writes_control_characters_from_a_cassette(view: Any) -> None:
    hostile = "https://api.example.com/v1/\x1b]0;pwned\x07?q=\u202etxt.exe"
    request = Request(method="GET", url=hostile, headers=[("x-note", "\x1b[2J\x9b")])
    response = Response(
        status=200,
        headers=[("content-type", "text/event-stream"), ("x-echo", "\x1b[31mred")],
        chunks=[Chunk(0.1, b"data: \x1b[5mblink\x07\n\n")],
    )
    shown = view(Cassette([Interaction(request, response)]))
    assert not set(shown) & {"\x1b", "\x07", "\x9b", "\u202e", "\r"}
    assert "\\x1b" in shown
