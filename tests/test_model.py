"""Specification of `replay.model`: values that cannot lie, and the cassette's bookkeeping.

Times are finite, non-negative seconds on one timeline (headers, then chunks in order, then
the end); bodies are bytes; statuses are 100–599. `Response.events()` gives each server-sent
event the arrival time of the chunk that completed it, however the body was cut. A cassette
hands out each recorded interaction once, identical requests in recorded order.
"""

from __future__ import annotations

import gzip
import math
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import httpx
import httpx2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replay import (
    Cassette,
    Chunk,
    ConfigurationError,
    Interaction,
    Request,
    Response,
    StreamEnd,
    TimedEvent,
)
from replay.adapters.httpx_capture import request_from_httpx
from replay.model import Chunks

# --- validators ----------------------------------------------------------------------------

INVALID: dict[str, tuple[Callable[[], object], type[Exception], str]] = {
    "chunk at negative": (lambda: Chunk(-0.001, b""), ValueError, "non-negative"),
    "chunk at NaN": (lambda: Chunk(math.nan, b""), ValueError, "not nan"),
    "chunk at infinite": (lambda: Chunk(math.inf, b""), ValueError, "finite"),
    "chunk at as str": (lambda: Chunk("1", b""), TypeError, "number of seconds"),
    "chunk at as None": (lambda: Chunk(None, b""), TypeError, "number of seconds"),
    "chunk at as bool": (lambda: Chunk(True, b""), TypeError, "number of seconds"),
    "chunk data as str": (lambda: Chunk(0.0, "data: x\n\n"), TypeError, "bytes"),
    "chunk data as bytearray": (lambda: Chunk(0.0, bytearray(b"x")), TypeError, "bytes"),
    "end at negative": (lambda: StreamEnd(at=-1.0), ValueError, "non-negative"),
    "end at NaN": (lambda: StreamEnd(at=math.nan), ValueError, "nan"),
    "end error as exception": (
        lambda: StreamEnd(at=0.0, error=ValueError("x")),
        TypeError,
        "error",
    ),
    "end truncated as int": (lambda: StreamEnd(at=0.0, truncated=1), TypeError, "truncated"),
    "status 99": (lambda: Response(status=99), ValueError, "100-599"),
    "status 600": (lambda: Response(status=600), ValueError, "100-599"),
    "status 700": (lambda: Response(status=700), ValueError, "100-599"),
    "status as str": (lambda: Response(status="200"), TypeError, "int"),
    "status as float": (lambda: Response(status=200.0), TypeError, "int"),
    "status as bool": (lambda: Response(status=True), TypeError, "int"),
    "headers_at negative": (lambda: Response(status=200, headers_at=-1), ValueError, "headers_at"),
    "headers_at NaN": (lambda: Response(status=200, headers_at=math.nan), ValueError, "nan"),
    "chunks out of order": (
        lambda: Response(status=200, chunks=[Chunk(0.2, b"a"), Chunk(0.1, b"b")]),
        ValueError,
        "chunk 1 arrives at 0.1 s, before chunk 0 (0.2 s)",
    ),
    "chunk before the headers": (
        lambda: Response(status=200, headers_at=0.5, chunks=[Chunk(0.4, b"a")]),
        ValueError,
        "before the headers",
    ),
    "chunk not a Chunk": (
        lambda: Response(status=200, chunks=[(0.1, b"a")]),
        TypeError,
        "must be a Chunk",
    ),
    "end before the last chunk": (
        lambda: Response(status=200, chunks=[Chunk(1.0, b"a")], end=StreamEnd(at=0.5)),
        ValueError,
        "ends at 0.5 s",
    ),
    "end before the headers": (
        lambda: Response(status=200, headers_at=1.0, end=StreamEnd(at=0.5)),
        ValueError,
        "ends at 0.5 s",
    ),
    "end not a StreamEnd": (lambda: Response(status=200, end=1.0), TypeError, "StreamEnd"),
    "header not a pair": (
        lambda: Response(status=200, headers=[("a", "b", "c")]),
        ValueError,
        "pair",
    ),
    "header as one str": (lambda: Response(status=200, headers=["ab"]), ValueError, "pair"),
    "header as bytes pair": (
        lambda: Request(method="GET", url="http://h/", headers=[(b"a", b"b")]),
        TypeError,
        "str",
    ),
    "header not latin-1": (
        lambda: Request(method="GET", url="http://h/", headers=[("a", "€")]),
        ValueError,
        "latin-1",
    ),
    "request body as str": (
        lambda: Request(method="POST", url="http://h/", body="{}"),
        TypeError,
        "body",
    ),
    "request method as bytes": (
        lambda: Request(method=b"GET", url="http://h/"),
        TypeError,
        "method",
    ),
    "interaction of an httpx request": (
        lambda: Interaction(httpx.Request("GET", "http://h/"), Response(status=200)),
        TypeError,
        "request",
    ),
    "interaction without a response": (
        lambda: Interaction(Request(method="GET", url="http://h/"), None),
        TypeError,
        "response",
    ),
    "request url as httpx.URL": (
        lambda: Request(method="GET", url=httpx.URL("http://h/")),
        TypeError,
        "url",
    ),
}


@pytest.mark.parametrize(("make", "error", "fragment"), INVALID.values(), ids=INVALID.keys())
def test_invalid_values_are_refused(
    make: Callable[[], object], error: type[Exception], fragment: str
) -> None:
    with pytest.raises(error, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        make()


VALID: dict[str, tuple[Callable[[], Any], Callable[[Any], object], object]] = {
    # (what is built, what is read back from it, what that must be: the edge value kept)
    "chunk at zero": (lambda: Chunk(0, b""), lambda c: (c.at, c.data), (0, b"")),
    "chunk at an int": (lambda: Chunk(3, b"x"), lambda c: (c.at, c.data), (3, b"x")),
    "status 100": (lambda: Response(status=100), lambda r: r.status, 100),
    "status 599": (lambda: Response(status=599), lambda r: r.status, 599),
    "chunks at the same time": (
        lambda: Response(status=200, chunks=[Chunk(0.1, b"a"), Chunk(0.1, b"b")]),
        lambda r: [(c.at, c.data) for c in r.chunks],
        [(0.1, b"a"), (0.1, b"b")],
    ),
    "chunk at the headers' time": (
        lambda: Response(status=200, headers_at=0.1, chunks=[Chunk(0.1, b"a")]),
        lambda r: (r.headers_at, r.ttfb),
        (0.1, 0.1),
    ),
    "end with the last chunk": (
        lambda: Response(status=200, chunks=[Chunk(0.1, b"a")], end=StreamEnd(0.1)),
        lambda r: (r.chunks[-1].at, r.end.at),
        (0.1, 0.1),
    ),
    "headers as a mapping": (
        lambda: Request(method="GET", url="http://h/", headers={"a": "b"}),
        lambda r: [tuple(header) for header in r.headers],
        [("a", "b")],
    ),
    "latin-1 header": (
        lambda: Request(method="GET", url="http://h/", headers=[("a", "café")]),
        lambda r: r.header("a"),
        "café",
    ),
}


@pytest.mark.parametrize(("make", "read", "expected"), VALID.values(), ids=VALID.keys())
def test_valid_edge_values_are_accepted(
    make: Callable[[], Any], read: Callable[[Any], object], expected: object
) -> None:
    value = make()
    assert read(value) == expected
    assert attrs.evolve(value) == value  # and validated again, as a copy, without complaint


def test_evolve_validates_too() -> None:
    response = Response(status=200, chunks=[Chunk(1.0, b"a")])
    with pytest.raises(ValueError, match="ends at"):
        attrs.evolve(response, end=StreamEnd(at=0.0))


def test_values_are_frozen() -> None:
    chunk = Chunk(0.0, b"a")
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        chunk.at = 1.0  # type: ignore[misc]


def test_headers_become_tuples_of_pairs() -> None:
    request = Request(method="GET", url="http://h/", headers=[["A", "1"], ["a", "2"]])
    assert request.headers == (("A", "1"), ("a", "2"))
    assert Request(method="GET", url="http://h/", headers={"A": "1"}).headers == (("A", "1"),)


def test_chunks_become_a_tuple() -> None:
    response = Response(status=200, chunks=[Chunk(0.0, b"a")])
    assert response.chunks == (Chunk(0.0, b"a"),)


@pytest.mark.parametrize(
    "headers",
    [[("Authorization", b"sk-secret")], ["sk-secret"], [("Authorization", "sk-secret", "x")]],
    ids=["bytes value", "bare str", "triple"],
)
def test_header_errors_never_echo_a_value(headers: list[Any]) -> None:
    with pytest.raises((TypeError, ValueError)) as caught:
        Request(method="GET", url="http://h/", headers=headers)
    assert "sk-secret" not in str(caught.value)


# --- Chunks: the body as two columns ---------------------------------------------------------


def test_chunks_are_columns_read_as_chunk_values() -> None:
    chunks = Chunks([0.1, 0.2], [b"a", b"b"])
    assert (chunks.times, chunks.payloads) == ((0.1, 0.2), (b"a", b"b"))
    assert list(chunks) == [Chunk(0.1, b"a"), Chunk(0.2, b"b")]
    assert chunks[-1] == Chunk(0.2, b"b")
    assert chunks[1:] == Chunks([0.2], [b"b"])
    assert Chunks.of(chunks) is chunks
    assert Chunks.of([Chunk(0.1, b"a"), Chunk(0.2, b"b")]) == chunks


NAN, INF = math.nan, math.inf

# (times, payloads, error, the whole message)
BAD_COLUMNS: dict[str, tuple[list[Any], list[Any], type[Exception], str]] = {
    "more times than payloads": ([0.1, 0.2], [b"a"], ValueError, "2 chunk times for 1 payloads"),
    "more payloads than times": ([], [b"a"], ValueError, "0 chunk times for 1 payloads"),
    "time as str": (
        [0.1, "0.2"],
        [b"a", b"b"],
        TypeError,
        "chunk 1: at must be a number of seconds, not str of length 3",
    ),
    "time as bool": (
        [False],
        [b"a"],
        TypeError,
        "chunk 0: at must be a number of seconds, not bool",
    ),
    "first time negative": (
        [-0.5, 0.1],
        [b"a", b"b"],
        ValueError,
        "chunk 0: at must be a finite, non-negative number of seconds, not -0.5",
    ),
    "NaN in the middle": (
        [0.1, NAN, 0.3],
        [b"a", b"b", b"c"],
        ValueError,
        "chunk 1: at must be a finite, non-negative number of seconds, not nan",
    ),
    "NaN last": (
        [0.1, 0.2, NAN],
        [b"a", b"b", b"c"],
        ValueError,
        "chunk 2: at must be a finite, non-negative number of seconds, not nan",
    ),
    "infinite from the middle on": (
        [0.1, INF, INF],
        [b"a", b"b", b"c"],
        ValueError,
        "chunk 1: at must be a finite, non-negative number of seconds, not inf",
    ),
    "out of order": (
        [0.1, 0.3, 0.2],
        [b"a", b"b", b"c"],
        ValueError,
        "chunk 2 arrives at 0.2 s, before chunk 1 (0.3 s)",
    ),
    "payload as str": (
        [0.1, 0.2],
        [b"a", "b"],
        TypeError,
        "chunk 1: data must be bytes, not str of length 1",
    ),
    "payload as bytearray": (
        [0.1],
        [bytearray(b"a")],
        TypeError,
        "chunk 0: data must be bytes, not bytearray",
    ),
}


@pytest.mark.parametrize(
    ("times", "payloads", "error", "message"), BAD_COLUMNS.values(), ids=BAD_COLUMNS.keys()
)
def test_bad_columns_are_refused_naming_the_first_chunk_at_fault(
    times: list[Any], payloads: list[Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error) as caught:
        Chunks(times, payloads)
    assert str(caught.value) == message


def test_payload_errors_never_echo_a_payload() -> None:
    with pytest.raises(TypeError) as caught:
        Chunks([0.1], ["sk-secret"])
    assert "sk-secret" not in str(caught.value)


def first_bad_time(times: list[float]) -> int | None:
    """The index of the first time that is not finite, non-negative and >= the one before."""
    for index, at in enumerate(times):
        if not 0 <= at < math.inf or (index and at < times[index - 1]):
            return index
    return None


@settings(max_examples=300, deadline=None)
@given(
    times=st.lists(
        st.floats(min_value=-1, max_value=3, allow_nan=False, allow_infinity=False)
        | st.integers(-1, 3)
        | st.sampled_from([NAN, INF, -INF, 0.0, -0.0]),
        min_size=1,
        max_size=8,
    ).map(lambda times: sorted(times) if len(times) % 2 else times)  # half of them in order
)
def test_times_are_refused_exactly_when_one_is_bad(times: list[float]) -> None:
    bad = first_bad_time(times)
    if bad is None:
        assert Chunks(times, [b""] * len(times)).times == tuple(times)
    else:
        with pytest.raises(ValueError, match=rf"^chunk {bad}\b"):
            Chunks(times, [b""] * len(times))


# --- capturing an httpx request --------------------------------------------------------------

Capture = Callable[[Any], Request]

#: The adapters' capture (cached, past the validators).
CAPTURES = pytest.mark.parametrize("capture", [request_from_httpx], ids=["adapter"])


@CAPTURES
@pytest.mark.parametrize("module", [httpx, httpx2], ids=["httpx", "httpx2"])
def test_from_httpx_captures_method_url_headers_and_body(module: Any, capture: Capture) -> None:
    original = module.Request(
        "POST",
        "https://api.example.com/v1/chat?x=1&x=2",
        headers=[("X-Dup", "1"), ("Content-Type", "application/json"), ("x-dup", "2")],
        content=b'{"a":1}',
    )
    request = capture(original)
    assert request.method == "POST"
    assert request.url == "https://api.example.com/v1/chat?x=1&x=2"
    assert request.headers == (
        ("Host", "api.example.com"),
        ("X-Dup", "1"),
        ("Content-Type", "application/json"),
        ("x-dup", "2"),
        ("Content-Length", "7"),
    )
    assert request.body == b'{"a":1}'


@CAPTURES
@pytest.mark.parametrize("module", [httpx, httpx2], ids=["httpx", "httpx2"])
def test_from_httpx_keeps_latin1_header_bytes(module: Any, capture: Capture) -> None:
    original = module.Request("GET", "http://h/", headers=[(b"X-Name", b"caf\xe9")])
    assert capture(original).header("x-name") == "caf\xe9"


@CAPTURES
@pytest.mark.parametrize("module", [httpx, httpx2], ids=["httpx", "httpx2"])
def test_from_httpx_of_a_bodiless_request_has_an_empty_body(module: Any, capture: Capture) -> None:
    assert capture(module.Request("GET", "http://h/")).body == b""


@CAPTURES
@pytest.mark.parametrize("module", [httpx, httpx2], ids=["httpx", "httpx2"])
def test_from_httpx_of_requests_that_repeat_or_change_a_url_and_headers(
    module: Any, capture: Capture
) -> None:
    # The texts are looked up by the parts they are made of: each request still gets its own.
    def captured(url: str, value: str) -> Request:
        return capture(module.Request("GET", url, headers=[("X-A", value)]))

    first, again = captured("http://h/a?q=1", "1"), captured("http://h/a?q=1", "1")
    other = captured("http://h/a?q=2", "2")
    original = module.Request("GET", "http://h/a?q=1", headers=[("X-A", "1")])
    original.headers["X-A"] = "3"  # changed after it was made, as an event hook may
    changed = capture(original)
    assert (
        (first.url, first.header("x-a"))
        == (again.url, again.header("x-a"))
        == ("http://h/a?q=1", "1")
    )
    assert (other.url, other.header("x-a")) == ("http://h/a?q=2", "2")
    assert changed.header("x-a") == "3"


def test_request_header_is_case_insensitive_and_first_wins() -> None:
    request = Request(method="GET", url="http://h/", headers=[("X-A", "1"), ("x-a", "2")])
    assert request.header("x-A") == "1"
    assert request.header("missing") is None


# --- Response accessors ----------------------------------------------------------------------


def test_body_joins_the_chunks() -> None:
    response = Response(status=200, chunks=[Chunk(0.1, b"ab"), Chunk(0.2, b""), Chunk(0.3, b"c")])
    assert response.body == b"abc"


def test_ttfb_is_the_first_chunk_time_or_none() -> None:
    assert Response(status=200, chunks=[Chunk(0.3, b"a"), Chunk(0.5, b"b")]).ttfb == 0.3
    assert Response(status=204, headers_at=0.2).ttfb is None


def test_duration_is_the_end_time() -> None:
    response = Response(status=200, chunks=[Chunk(0.3, b"a")], end=StreamEnd(at=0.9))
    assert response.duration == 0.9


def test_default_end_is_a_clean_end_at_the_last_byte() -> None:
    assert Response(status=200, chunks=[Chunk(0.3, b"a")]).end == StreamEnd(at=0.3)
    assert Response(status=200, headers_at=0.2).end == StreamEnd(at=0.2)
    assert Response(status=200).end.is_clean


def test_an_error_end_is_not_clean() -> None:
    assert not StreamEnd(at=1.0, error="ReadTimeout").is_clean


def test_response_header_is_case_insensitive_and_first_wins() -> None:
    response = Response(status=200, headers=[("Set-Cookie", "a"), ("set-cookie", "b")])
    assert response.header("SET-COOKIE") == "a"
    assert response.header("content-type") is None


# --- Response.events(): the time each event became complete ---------------------------------

STREAM = "event: delta\ndata: héllo\nid: 7\n\ndata: two\nretry: 50\n\n: comment\ndata: [DONE]\n\n"
BODY = STREAM.encode()
EVENTS = [
    ("delta", "héllo", "7", None),
    ("message", "two", "7", 50),
    ("message", "[DONE]", "7", None),
]
#: Index of the byte completing each event (the LF ending its blank line).
COMPLETES = [i for i in range(1, len(BODY)) if BODY[i - 1 : i + 1] == b"\n\n"]


def sse(*chunks: tuple[float, bytes], end: float | None = None, **kwargs: Any) -> Response:
    return Response(
        status=200,
        chunks=[Chunk(at, data) for at, data in chunks],
        end=StreamEnd(at=end if end is not None else chunks[-1][0]),
        **kwargs,
    )


def described(events: list[TimedEvent]) -> list[tuple[str, str, str, int | None]]:
    return [(e.event, e.data, e.id, e.retry) for e in events]


def test_events_of_a_whole_body_arrive_with_it() -> None:
    events = sse((0.5, BODY)).events()
    assert described(events) == EVENTS
    assert [e.at for e in events] == [0.5, 0.5, 0.5]


def test_events_are_timed_by_the_chunk_completing_them_for_every_split() -> None:
    assert len(COMPLETES) == 3
    for split in range(len(BODY) + 1):
        events = sse((1.0, BODY[:split]), (2.0, BODY[split:])).events()
        assert described(events) == EVENTS, split
        assert [e.at for e in events] == [1.0 if i < split else 2.0 for i in COMPLETES], split


def test_events_fed_byte_by_byte_take_the_time_of_their_last_byte() -> None:
    chunks = [(index / 100, BODY[index : index + 1]) for index in range(len(BODY))]
    events = sse(*chunks).events()
    assert described(events) == EVENTS
    assert [e.at for e in events] == [i / 100 for i in COMPLETES]


def test_an_event_split_inside_a_utf8_character_decodes_whole() -> None:
    cut = BODY.index("é".encode()) + 1  # between the two bytes of é
    events = sse((0.1, BODY[:cut]), (0.2, BODY[cut:])).events()
    assert events[0] == TimedEvent(at=0.2, event="delta", data="héllo", id="7")


def test_an_unfinished_last_event_is_dropped() -> None:
    events = sse((0.1, b"data: done\n\ndata: cut off"), end=0.5).events()
    assert [(e.at, e.data) for e in events] == [(0.1, "done")]


def test_events_of_an_empty_body_are_none() -> None:
    assert Response(status=200).events() == []


def compressed_in_step(compress: Any, pieces: list[bytes]) -> list[bytes]:
    """Each piece compressed and sync-flushed, so chunk i decodes to exactly piece i."""
    chunks = [compress.compress(piece) + compress.flush(zlib.Z_SYNC_FLUSH) for piece in pieces]
    chunks[-1] += compress.flush()
    return chunks


ENCODINGS = {
    "gzip": lambda: zlib.compressobj(wbits=zlib.MAX_WBITS | 16),
    "x-gzip": lambda: zlib.compressobj(wbits=zlib.MAX_WBITS | 16),
    "deflate": lambda: zlib.compressobj(wbits=zlib.MAX_WBITS),
    "raw deflate": lambda: zlib.compressobj(wbits=-zlib.MAX_WBITS),
}


@pytest.mark.parametrize(("encoding", "make"), ENCODINGS.items(), ids=ENCODINGS.keys())
def test_compressed_events_are_decoded_and_timed_by_their_chunk(
    encoding: str, make: Callable[[], Any]
) -> None:
    pieces = [b"data: one\n\n", b"data: t", b"wo\n\n", b"data: three\n\n"]
    chunks = compressed_in_step(make(), pieces)
    header = "deflate" if encoding == "raw deflate" else encoding
    response = sse(
        *[(float(i), chunk) for i, chunk in enumerate(chunks)],
        headers=[("Content-Encoding", header.upper())],
    )
    assert [(e.at, e.data) for e in response.events()] == [
        (0.0, "one"),
        (2.0, "two"),
        (3.0, "three"),
    ]


def test_gzip_body_cut_into_tiny_chunks_decodes_the_same() -> None:
    data = gzip.compress(BODY)
    response = sse(
        *[(i / 10, data[i : i + 3]) for i in range(0, len(data), 3)],
        headers=[("content-encoding", "gzip")],
    )
    assert described(response.events()) == EVENTS


def test_body_stays_compressed() -> None:
    data = gzip.compress(b"data: x\n\n")
    response = sse((0.1, data), headers=[("content-encoding", "gzip")])
    assert response.body == data


def test_unsupported_content_encoding_is_a_value_error() -> None:
    response = sse((0.1, b"\x00"), headers=[("content-encoding", "compress")])
    with pytest.raises(ValueError, match="'compress'"):
        response.events()


def test_corrupt_gzip_is_a_value_error() -> None:
    response = sse((0.1, b"not gzip at all"), headers=[("content-encoding", "gzip")])
    with pytest.raises(ValueError, match="not valid gzip"):
        response.events()


def test_identity_encoding_is_read_as_is() -> None:
    response = sse((0.1, b"data: x\n\n"), headers=[("content-encoding", " Identity ")])
    assert [e.data for e in response.events()] == ["x"]


# --- Cassette bookkeeping --------------------------------------------------------------------


def interaction(path: str = "/a", body: bytes = b"data: 1\n\n") -> Interaction:
    return Interaction(
        Request(method="GET", url=f"http://h{path}"),
        Response(status=200, chunks=[Chunk(0.1, body)]),
    )


def ask(path: str = "/a") -> Request:
    return Request(method="GET", url=f"http://h{path}")


def test_an_empty_cassette_is_all_played() -> None:
    cassette = Cassette()
    assert cassette.interactions == []
    assert cassette.play_count == 0
    assert cassette.all_played
    assert cassette.unplayed == []
    assert cassette.path is None


def test_find_returns_the_index_and_counts_it_played() -> None:
    cassette = Cassette([interaction("/a"), interaction("/b")])
    assert cassette.find(ask("/b")) == 1
    assert cassette.play_count == 1
    assert cassette.play_counts == [0, 1]
    assert not cassette.all_played
    assert cassette.unplayed == [interaction("/a")]


def test_find_unknown_request_is_none_and_counts_nothing() -> None:
    cassette = Cassette([interaction("/a")])
    assert cassette.find(ask("/z")) is None
    assert cassette.play_count == 0


def test_identical_requests_play_in_recorded_order_each_once() -> None:
    cassette = Cassette(
        [interaction("/a", b"first"), interaction("/b"), interaction("/a", b"second")]
    )
    assert cassette.find(ask("/a")) == 0
    assert cassette.find(ask("/a")) == 2
    assert cassette.find(ask("/a")) is None
    assert cassette.play_count == 2
    assert cassette.unplayed == [interaction("/b")]


def test_all_played_once_every_interaction_was_found() -> None:
    cassette = Cassette([interaction("/a"), interaction("/b")])
    cassette.find(ask("/b"))
    cassette.find(ask("/a"))
    assert cassette.all_played
    assert cassette.unplayed == []
    assert cassette.play_count == 2


def test_allow_playback_repeats_replays_after_all_were_played() -> None:
    cassette = Cassette(
        [interaction("/a", b"first"), interaction("/a", b"second")], allow_playback_repeats=True
    )
    assert [cassette.find(ask("/a")) for _ in range(4)] == [0, 1, 0, 0]
    assert cassette.play_count == 4
    assert cassette.play_counts == [3, 1]


def test_match_on_decides_what_is_identical() -> None:
    cassette = Cassette([interaction("/a"), interaction("/b")], match_on=["method", "host"])
    assert [cassette.find(ask("/z")) for _ in range(3)] == [0, 1, None]


def test_append_counts_as_used_not_as_played() -> None:
    cassette = Cassette([interaction("/a")])
    cassette.append(interaction("/new"))
    assert cassette.interactions == [interaction("/a"), interaction("/new")]
    assert cassette.recorded == [interaction("/new")]
    assert cassette.play_count == 0
    assert cassette.unplayed == [interaction("/a")]
    cassette.find(ask("/a"))
    assert cassette.all_played


@pytest.mark.parametrize("searched_before", [False, True], ids=["fresh", "index built"])
def test_appended_interactions_can_be_found(searched_before: bool) -> None:
    cassette = Cassette([interaction("/a")])
    if searched_before:
        assert cassette.find(ask("/new")) is None
    cassette.append(interaction("/new"))
    assert cassette.find(ask("/new")) == 1


def test_explain_names_the_nearest_request() -> None:
    cassette = Cassette([interaction("/a")])
    nearest, differences = cassette.explain(ask("/b"))
    assert nearest == "GET http://h/a"
    assert [name for name, _ in differences] == ["path"]


def test_save_and_load_through_the_class(tmp_path: Path) -> None:
    path = tmp_path / "c.msgpack"
    assert Cassette([interaction("/a")]).save(path) == path
    loaded = Cassette.load(str(path), allow_playback_repeats=True)
    assert loaded.interactions == [interaction("/a")]
    assert loaded.path == path
    assert loaded.allow_playback_repeats
    assert loaded.play_counts == [0]


def test_save_without_an_argument_uses_its_path(tmp_path: Path) -> None:
    path = tmp_path / "c.msgpack"
    cassette = Cassette([interaction("/a")], path=path)
    assert cassette.save() == path
    assert Cassette.load(path).interactions == [interaction("/a")]


def test_save_with_no_path_at_all_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="no path") as caught:
        Cassette([interaction("/a")]).save()
    assert isinstance(caught.value, ValueError)
