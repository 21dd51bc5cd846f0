"""One notion of a stream and its framing (`replay.framing`), and the NDJSON parser.

The NDJSON parser is fed every stream whole, one byte at a time, and split at every index,
as the SSE parser is. Detection is checked by content type and by body. End to end, an
Ollama `/api/chat` stream recorded from the local origin through httpx shows its events,
has them with their times, and has a time to first token.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

import replay
from replay import framing
from replay.framing import ndjson
from replay.framing.sse import Event
from replay.inspect import describe, diff, timing
from replay.model import Chunk, Response, StreamEnd
from replay.testing import Origin, Script


def ollama_line(content: str, *, done: bool = False) -> bytes:
    message = {"role": "assistant", "content": content}
    line: dict[str, object] = {"model": "m", "message": message, "done": done}
    if done:
        line |= {"done_reason": "stop", "eval_count": 3}
    return json.dumps(line, separators=(",", ":")).encode() + b"\n"


OLLAMA = [ollama_line("Hel"), ollama_line("lo"), ollama_line("!"), ollama_line("", done=True)]
OLLAMA_BODY = b"".join(OLLAMA)


# --- the NDJSON parser -----------------------------------------------------------------------


def feed_whole(data: bytes) -> list[Event]:
    return ndjson.parse(data)


def feed_bytewise(data: bytes) -> list[Event]:
    parser = ndjson.NDJSONParser()
    events = [event for index in range(len(data)) for event in parser.feed(data[index : index + 1])]
    return events + parser.close()


def feed_split(data: bytes, at: int) -> list[Event]:
    parser = ndjson.NDJSONParser()
    return parser.feed(data[:at]) + parser.feed(data[at:]) + parser.close()


NDJSON_CASES = {
    "ollama": (OLLAMA_BODY, ["message", "message", "message", "done"]),
    "typed lines": (b'{"type":"a"}\n{"type":"b.c"}\n', ["a", "b.c"]),
    "crlf and blank lines": (b'{"x":1}\r\n\r\n  \n{"x":2}\r\n', ["message", "message"]),
    "no final newline": (b'{"x":1}\n{"x":2}', ["message", "message"]),
    "bom and utf-8": ('\ufeff{"t":"é中"}\n'.encode(), ["message"]),
    "not json": (b"plain\n[1]\n", ["message", "message"]),
}


@pytest.mark.parametrize(("body", "names"), NDJSON_CASES.values(), ids=NDJSON_CASES.keys())
def test_ndjson_is_parsed_the_same_however_it_is_fed(body: bytes, names: list[str]) -> None:
    events = feed_whole(body)
    assert [event.event for event in events] == names
    assert feed_bytewise(body) == events
    for at in range(len(body) + 1):
        assert feed_split(body, at) == events, at


def test_an_ndjson_event_is_its_line_without_the_line_ending() -> None:
    events = ndjson.parse(b'\xef\xbb\xbf{"a": 1}\r\n{"t":"\xc3\xa9"}\n')
    assert [event.data for event in events] == ['{"a": 1}', '{"t":"é"}']


def test_ndjson_parser_refuses_data_after_close() -> None:
    parser = ndjson.NDJSONParser()
    parser.feed(b'{"a":1}')
    assert parser.close() == [Event(event="message", data='{"a":1}')]
    assert parser.close() == []
    with pytest.raises(RuntimeError):
        parser.feed(b"x")


# --- detection -------------------------------------------------------------------------------


def response(body: bytes, content_type: str | None = None, *, pieces: int = 1) -> Response:
    headers = [] if content_type is None else [("content-type", content_type)]
    size = max(1, -(-len(body) // pieces))
    chunks = [
        Chunk(round(0.1 * (n + 1), 6), body[at : at + size])
        for n, at in enumerate(range(0, len(body), size))
    ]
    return Response(status=200, headers=headers, chunks=chunks)


DETECT_CASES = {
    "event-stream": (b"", "text/event-stream; charset=utf-8", "sse"),
    "x-ndjson": (b"", "application/x-ndjson", "ndjson"),
    "jsonl": (b"", "application/jsonl", "ndjson"),
    "sse body, no headers": (b"event: a\ndata: 1\n\n", None, "sse"),
    "sse comment first, wrong type": (b": ping\n\ndata: 1\n\n", "application/json", "sse"),
    "ndjson body, no headers": (OLLAMA_BODY, None, "ndjson"),
    "ndjson body as application/json": (OLLAMA_BODY, "application/json", "ndjson"),
    "one json object": (b'{"a":1}\n', "application/json", None),
    "pretty json": (b'{\n  "a": 1\n}\n', None, None),
    "json array": (b'[{"a":1},\n{"a":2}]\n', None, "json-array"),
    "one-element json array": (b'[{"a":1}]\n', "application/json", None),
    "text": (b"hello\nworld\n", "text/plain", None),
    "field without an event": (b"data: 1", None, None),
    "empty": (b"", None, None),
}


@pytest.mark.parametrize(
    ("body", "content_type", "expected"), DETECT_CASES.values(), ids=DETECT_CASES.keys()
)
def test_detect_asks_the_content_type_then_the_body(
    body: bytes, content_type: str | None, expected: str | None
) -> None:
    assert framing.detect(response(body, content_type)) == expected
    assert framing.is_stream(response(body, content_type)) is (expected is not None)


def test_an_undecodable_body_without_a_stream_type_is_no_stream() -> None:
    broken = Response(
        status=200, headers=[("content-encoding", "gzip")], chunks=[Chunk(0.1, b"not gzip")]
    )
    assert framing.detect(broken) is None


def test_events_of_ndjson_are_timed_by_the_chunk_that_completes_them() -> None:
    body = OLLAMA[0] + OLLAMA[1][:5]
    chunks = [Chunk(0.1, body), Chunk(0.3, OLLAMA[1][5:] + OLLAMA[2]), Chunk(0.4, OLLAMA[3])]
    stream = Response(status=200, chunks=chunks, end=StreamEnd(at=0.5))
    events = stream.events()
    assert [(event.at, event.event) for event in events] == [
        (0.1, "message"),
        (0.3, "message"),
        (0.3, "message"),
        (0.4, "done"),
    ]
    assert json.loads(events[1].data)["message"]["content"] == "lo"


# Pieces that make the framings' corner cases when strung together: line endings of each
# kind, fields of each name, comments, a BOM, characters cut in two, bytes that are no UTF-8.
PIECES = [
    b"\r", b"\n", b"\r\n", b"\n\n", b"data", b"data:", b"data: ", b"event:x", b"id: 7",
    b"id:\x00", b"retry: 12", b"retry:x", b":c", b"x", b" ", b"\xef\xbb\xbf", b"\xe2\x82",
    b"\xac", b"\xff", b'{"type":"a"}', b'{"done":true}',
]  # fmt: skip


def fed_chunk_by_chunk(kind: framing.Framing, response: Response) -> list[tuple[object, ...]]:
    """What the incremental parser gives, each event at the time of the chunk it came in."""
    parser = framing.parser(kind)
    timed = [(chunk.at, event) for chunk in response.chunks for event in parser.feed(chunk.data)]
    timed += [(response.end.at, event) for event in parser.close()]
    return [(at, event.event, event.data, event.id, event.retry) for at, event in timed]


@given(
    st.lists(st.sampled_from(PIECES), max_size=30),
    st.lists(st.integers(min_value=0, max_value=200), max_size=8),
    st.sampled_from(["sse", "ndjson"]),
)
def test_events_read_whole_are_those_of_the_parser_fed_chunk_by_chunk(
    pieces: list[bytes], cuts: list[int], kind: framing.Framing
) -> None:
    # `events` reads the body at once and finds which chunk completed each event; the
    # parser fed chunk by chunk is the reference.
    body = b"".join(pieces)
    bounds = [0, *sorted(min(cut, len(body)) for cut in cuts), len(body)]
    chunks = [Chunk(float(n), body[a:b]) for n, (a, b) in enumerate(itertools.pairwise(bounds))]
    response = Response(status=200, chunks=chunks, end=StreamEnd(at=99.0))
    events = framing.events(response, kind)
    assert [(e.at, e.event, e.data, e.id, e.retry) for e in events] == fed_chunk_by_chunk(
        kind, response
    )
    assert framing.count(response, kind) == len(events)


# 200,000 events, some 3 MB: read in segments of about 1 MB cut after an LF, so CR LFs and
# events lie across the cuts (the NDJSON stream ends without its last LF).
LONG = {
    "sse": b"".join(
        b"data: %d\r\n\r\n" % n if n % 3 else b"id: %d\ndata: x\n\n" % n for n in range(200_000)
    ),
    "ndjson": b"".join(b'{"n":%d}\r\n' % n if n % 3 else b'{"n":%d}\n' % n for n in range(200_000))[
        :-1
    ],
}


@pytest.mark.parametrize("kind", ["sse", "ndjson"])
def test_a_long_stream_read_whole_is_the_stream_fed_chunk_by_chunk(kind: framing.Framing) -> None:
    body, step = LONG[kind], 61  # chunks that cut events, line endings and CR LFs anywhere
    chunks = [
        Chunk(n / 1e3, body[at : at + step]) for n, at in enumerate(range(0, len(body), step))
    ]
    response = Response(status=200, chunks=chunks, end=StreamEnd(at=99.0))
    timed = framing.events(response, kind)
    assert len(timed) == 200_000
    assert [(e.at, e.event, e.data, e.id, e.retry) for e in timed] == fed_chunk_by_chunk(
        kind, response
    )


def test_a_body_of_no_framing_is_read_as_sse() -> None:
    assert framing.events(response(b"hello", "text/plain")) == []
    assert [e.data for e in framing.events(response(b"data: x\n\n"), "sse")] == ["x"]


def test_ollama_deltas_are_the_tokens_of_an_ndjson_stream() -> None:
    chunks = [Chunk(round(0.1 * (n + 1), 6), line) for n, line in enumerate(OLLAMA)]
    stream = Response(status=200, headers=[("content-type", "application/x-ndjson")], chunks=chunks)
    assert [event.at for event in timing.token_events(stream)] == [0.1, 0.2, 0.3]
    assert timing.ttft(stream) == 0.1
    summary = timing.summary(stream)
    assert (summary.events, summary.tokens) == (4, 3)


def test_diff_compares_ndjson_events() -> None:
    a = replay.Cassette([interaction(OLLAMA_BODY)])
    changed = OLLAMA_BODY.replace(b'"lo"', b'"LO"')
    result = diff.diff(a, replay.Cassette([interaction(changed)]))
    assert result.differs
    assert [(c.kind, c.a_start, c.a_end) for c in result.interactions[0].changes] == [
        ("changed", 1, 2)
    ]
    assert not diff.diff(a, a).differs


def interaction(body: bytes) -> replay.Interaction:
    request = replay.Request(method="POST", url="http://127.0.0.1/api/chat")
    return replay.Interaction(request, response(body, "application/x-ndjson", pieces=4))


# --- end to end: an Ollama stream recorded from the local origin -------------------------------


@pytest.fixture(scope="module")
def ollama_cassette(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("ollama") / "ollama.msgpack"
    script = Script(
        chunks=[(0.05, OLLAMA[0]), (0.01, OLLAMA[1]), (0.01, OLLAMA[2]), (0.01, OLLAMA[3])],
        headers=[("content-type", "application/x-ndjson")],
    )
    with Origin({"/api/chat": script}) as origin, replay.use_cassette(path):
        body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
        with httpx.stream("POST", origin.url + "/api/chat", json=body) as answer:
            lines = list(answer.iter_lines())
    assert len(lines) == 4
    return path


def test_a_recorded_ollama_stream_has_timed_events_and_a_ttft(ollama_cassette: Path) -> None:
    recorded = replay.Cassette.load(ollama_cassette).interactions[0].response
    events = recorded.events()
    assert [event.event for event in events] == ["message", "message", "message", "done"]
    assert events[0].at >= 0.05  # the origin waited 50 ms before the first line
    assert [event.at for event in events] == sorted(event.at for event in events)
    ttft = timing.ttft(recorded)
    assert ttft is not None
    assert ttft == events[0].at


def test_show_lists_the_events_of_a_recorded_ollama_stream(ollama_cassette: Path) -> None:
    table = describe.table(replay.Cassette.load(ollama_cassette)).splitlines()
    assert table[1].split()[7] == "4"
    shown = subprocess.run(
        [sys.executable, "-m", "replay.cli", "show", "--events", str(ollama_cassette)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.splitlines()
    assert [line.split()[1] for line in shown[1:5]] == ["message", "message", "message", "done"]
    assert '"content":"Hel"' in shown[1]


def test_a_stream_recorded_without_headers_still_shows_its_events() -> None:
    body = b"event: a\ndata: 1\n\nevent: b\ndata: 2\n\n"
    for stream in (response(body, pieces=2), response(OLLAMA_BODY, pieces=4)):
        cassette = replay.Cassette(
            [replay.Interaction(replay.Request(method="GET", url="http://h/"), stream)]
        )
        assert describe.table(cassette).splitlines()[1].split()[7] == str(len(stream.events()))
        assert "not an event stream" not in describe.events(cassette)
        assert len(stream.events()) in (2, 4)


def test_a_stream_recorded_from_an_origin_that_sends_no_content_type_shows_its_events(
    tmp_path: Path,
) -> None:
    path = tmp_path / "bare.msgpack"
    script = Script(chunks=[(0.0, b"data: 1\n\n"), (0.01, b"data: 2\n\n")], headers=())
    with Origin({"/bare": script}) as origin, replay.use_cassette(path):
        httpx.get(origin.url + "/bare")
    cassette = replay.Cassette.load(path)
    assert cassette.interactions[0].response.header("content-type") is None
    assert describe.table(cassette).splitlines()[1].split()[7] == "2"
    assert [line.split()[1:] for line in describe.events(cassette).splitlines()[1:3]] == [
        ["message", "1"],
        ["message", "2"],
    ]


def test_check_validates_a_recorded_ollama_stream(ollama_cassette: Path) -> None:
    checked = subprocess.run(
        [sys.executable, "-m", "replay.cli", "check", str(ollama_cassette)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "1 stream" in checked.stdout + checked.stderr
