"""Specification of `replay.framing.sse`: the WHATWG "event stream interpretation", fed
incrementally.

Every spec vector is checked fed whole, split in two at every byte index, and byte by byte;
each event must come out of the very feed() whose chunk holds the byte completing it (the
terminator of the dispatching blank line; for CRLF, the CR). Hypothesis then checks that any
re-chunking of generated streams changes nothing, against a naive whole-stream reference.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replay.framing.sse import Event, SSEParser, parse

BOM = b"\xef\xbb\xbf"


# --- a deliberately naive reference: whole stream, byte at a time, straight from the spec ---


def reference(stream: bytes) -> list[tuple[int, Event]]:
    """Each event with the byte index of the terminator of the blank line that dispatched it."""
    out: list[tuple[int, Event]] = []
    data: str | None = None
    event_type, last_id, retry = "", "", None
    i = line_start = 3 if stream.startswith(BOM) else 0
    while i < len(stream):
        if stream[i : i + 1] not in (b"\r", b"\n"):
            i += 1
            continue
        line = stream[line_start:i].decode("utf-8", "replace")
        terminator = i
        i += 2 if stream[i : i + 2] == b"\r\n" else 1
        line_start = i
        if line == "":
            if data is not None:
                event = Event(event_type or "message", data[:-1], last_id, retry)
                out.append((terminator, event))
            data, event_type, retry = None, "", None
            continue
        if line.startswith(":"):
            continue
        if ":" in line:
            name, value = line[: line.index(":")], line[line.index(":") + 1 :]
            if value.startswith(" "):
                value = value[1:]
        else:
            name, value = line, ""
        if name == "data":
            data = (data or "") + value + "\n"
        elif name == "event":
            event_type = value
        elif name == "id" and "\x00" not in value:
            last_id = value
        elif name == "retry" and value and all(c in "0123456789" for c in value):
            retry = int(value)
    return out  # whatever follows the last line terminator is discarded


def feed_chunks(chunks: list[bytes]) -> list[list[Event]]:
    """Feed the chunks to one parser; return the events returned by each feed(), then close."""
    parser = SSEParser()
    per_chunk = [parser.feed(chunk) for chunk in chunks]
    assert parser.close() == []
    return per_chunk


def assert_chunking_is_transparent(stream: bytes, cuts: list[int]) -> None:
    """Split `stream` at `cuts`: same events overall, each from the chunk completing it."""
    bounds = [0, *sorted(cuts), len(stream)]
    spans = list(itertools.pairwise(bounds))
    chunks = [stream[a:b] for a, b in spans]
    per_chunk = feed_chunks(chunks)
    expected = reference(stream)
    assert [e for events in per_chunk for e in events] == [e for _, e in expected]
    for (a, b), events in zip(spans, per_chunk, strict=True):
        assert events == [e for index, e in expected if a <= index < b]


# --- spec vectors ------------------------------------------------------------------------

E = Event
LONG = "x" * 300

VECTORS = [
    # basics, BOM
    pytest.param(b"", [], id="empty-stream"),
    pytest.param(b"data: hello\n\n", [E(data="hello")], id="simple-message"),
    pytest.param(BOM + b"data: a\n\n", [E(data="a")], id="leading-bom-stripped"),
    pytest.param(BOM + BOM + b"data: a\n\ndata: b\n\n", [E(data="b")], id="only-one-bom-stripped"),
    pytest.param(
        b"data: a\n\n" + BOM + b"data: b\n\n", [E(data="a")], id="bom-later-is-not-special"
    ),
    pytest.param(b"data: " + BOM + b"x\n\n", [E(data="\ufeffx")], id="bom-inside-value-kept"),
    # line endings
    pytest.param(b"data: a\n\ndata: b\n\n", [E(data="a"), E(data="b")], id="lf"),
    pytest.param(b"data: a\r\rdata: b\r\r", [E(data="a"), E(data="b")], id="cr"),
    pytest.param(b"data: a\r\n\r\ndata: b\r\n\r\n", [E(data="a"), E(data="b")], id="crlf"),
    pytest.param(b"data: a\rdata: b\ndata: c\r\n\r\n", [E(data="a\nb\nc")], id="mixed-endings"),
    pytest.param(b"data: a\n\rdata: b\n\n", [E(data="a"), E(data="b")], id="lf-cr-is-two-endings"),
    pytest.param(b"data: a\r\r\n", [E(data="a")], id="cr-then-crlf"),
    pytest.param(b"\n\n\r\n\r\r", [], id="blank-lines-only"),
    # comments
    pytest.param(b": hi\ndata: a\n:\n\n", [E(data="a")], id="comments-ignored"),
    pytest.param(b": ping\n\n:\n\n", [], id="comment-only-blocks-dispatch-nothing"),
    pytest.param(b":data: x\n\n", [], id="comment-that-looks-like-a-field"),
    # field syntax
    pytest.param(b"data\n\n", [E(data="")], id="field-without-colon-dispatches-empty-data"),
    pytest.param(b"data:\n\n", [E(data="")], id="empty-data-value"),
    pytest.param(b"data\ndata\n\n", [E(data="\n")], id="two-empty-data-lines"),
    pytest.param(b"data:a\n\n", [E(data="a")], id="no-space-after-colon"),
    pytest.param(b"data:  a\n\n", [E(data=" a")], id="only-one-space-removed"),
    pytest.param(b"data: a \n\n", [E(data="a ")], id="trailing-space-kept"),
    pytest.param(b"data:\ta\n\n", [E(data="\ta")], id="tab-not-removed"),
    pytest.param(b"data: a: b\n\n", [E(data="a: b")], id="later-colons-are-value"),
    pytest.param(b"data : x\n\n", [], id="space-before-colon-is-part-of-name"),
    pytest.param(b"Data: x\n\n", [], id="field-names-case-sensitive"),
    pytest.param(b"foo: bar\ndata: x\nfoo\n\n", [E(data="x")], id="unknown-fields-ignored"),
    # data
    pytest.param(b"data: a\ndata: b\ndata: c\n\n", [E(data="a\nb\nc")], id="multi-line-data"),
    pytest.param(b"data: a\ndata\n\n", [E(data="a\n")], id="only-one-trailing-newline-stripped"),
    pytest.param(b"data: a\x00b\n\n", [E(data="a\x00b")], id="nul-in-data-kept"),
    pytest.param(b"data: " + LONG.encode() + b"\n\n", [E(data=LONG)], id="long-line"),
    # event type
    pytest.param(b"event: add\ndata: 1\n\n", [E("add", "1")], id="event-type"),
    pytest.param(
        b"event: add\ndata: 1\n\ndata: 2\n\n", [E("add", "1"), E(data="2")], id="event-type-reset"
    ),
    pytest.param(b"event:\ndata: x\n\n", [E("message", "x")], id="empty-event-type-is-message"),
    pytest.param(b"event: a\nevent: b\ndata\n\n", [E("b", "")], id="last-event-type-wins"),
    pytest.param(
        b"event: add\n\ndata: x\n\n", [E(data="x")], id="event-without-data-not-dispatched"
    ),
    # id
    pytest.param(b"id: 1\ndata: a\n\n", [E(data="a", id="1")], id="id"),
    pytest.param(b"data: a\nid: 1\n\n", [E(data="a", id="1")], id="id-after-data-in-block"),
    pytest.param(
        b"id: 1\ndata: a\n\ndata: b\n\n",
        [E(data="a", id="1"), E(data="b", id="1")],
        id="id-persists",
    ),
    pytest.param(
        b"id: 7\n\ndata: x\n\n", [E(data="x", id="7")], id="id-from-dataless-block-persists"
    ),
    pytest.param(b"id: 7\n:\ndata: x\n\n", [E(data="x", id="7")], id="id-survives-comment"),
    pytest.param(
        b"id: 1\ndata: a\n\nid\ndata: b\n\n",
        [E(data="a", id="1"), E(data="b")],
        id="id-reset-by-bare-id",
    ),
    pytest.param(
        b"id: 1\ndata: a\n\nid:\ndata: b\n\n",
        [E(data="a", id="1"), E(data="b")],
        id="id-reset-by-empty-id",
    ),
    pytest.param(
        b"id: 1\ndata: a\n\nid: 2\x003\ndata: b\n\n",
        [E(data="a", id="1"), E(data="b", id="1")],
        id="id-with-nul-ignored",
    ),
    pytest.param(b"id:  x \ndata\n\n", [E(data="", id=" x ")], id="id-keeps-inner-spaces"),
    # retry
    pytest.param(b"retry: 1000\ndata: x\n\n", [E(data="x", retry=1000)], id="retry-digits"),
    pytest.param(b"retry: 007\ndata\n\n", [E(data="", retry=7)], id="retry-leading-zeros"),
    pytest.param(b"retry: 10a\ndata\n\n", [E(data="")], id="retry-non-digits-ignored"),
    pytest.param(
        b"retry: -1\ndata\n\nretry: 1.5\ndata\n\n",
        [E(data=""), E(data="")],
        id="retry-sign-or-dot-ignored",
    ),
    pytest.param(b"retry:  10\ndata\n\n", [E(data="")], id="retry-two-spaces-ignored"),
    pytest.param(
        b"retry\ndata\n\nretry:\ndata\n\n", [E(data=""), E(data="")], id="retry-empty-ignored"
    ),
    pytest.param(
        "retry: ١٢\ndata\n\nretry: ²\ndata\n\n".encode(),
        [E(data=""), E(data="")],
        id="retry-non-ascii-digits-ignored",
    ),
    pytest.param(
        b"retry: 5\nretry: x\ndata\n\n", [E(data="", retry=5)], id="invalid-retry-keeps-earlier"
    ),
    pytest.param(
        b"retry: 5\ndata: a\n\ndata: b\n\n",
        [E(data="a", retry=5), E(data="b")],
        id="retry-belongs-to-its-block",
    ),
    pytest.param(
        b"retry: 5\n\ndata: b\n\n", [E(data="b")], id="retry-only-block-dispatches-nothing"
    ),
    # end of stream
    pytest.param(b"data: a\n", [], id="pending-data-discarded-at-eof"),
    pytest.param(b"data: a\n\ndata: b\n", [E(data="a")], id="pending-second-event-discarded"),
    pytest.param(
        b"data: a\n\ndata: b", [E(data="a")], id="trailing-line-without-newline-discarded"
    ),
    pytest.param(b"data: a\n\n\n\n", [E(data="a")], id="extra-blank-lines"),
    # UTF-8
    pytest.param("data: €😀é\n\n".encode(), [E(data="€😀é")], id="multibyte-utf8"),
    pytest.param(b"data: \xff\xfe\n\n", [E(data="\ufffd\ufffd")], id="invalid-utf8-replaced"),
    pytest.param(b"data: \xe2\x82\n\n", [E(data="\ufffd")], id="truncated-utf8-before-newline"),
    pytest.param(b"da\xffta: x\n\n", [], id="invalid-utf8-in-name"),
    pytest.param(b"\xef\xbbdata: x\n\n", [], id="partial-bom-is-garbage"),
    pytest.param(b"data: x\n\ndata: \xe2\x82", [E(data="x")], id="truncated-utf8-at-eof"),
    # the examples of the WHATWG spec ("Parsing an event stream" / "Interpreting ...")
    pytest.param(
        b"data: This is the first message.\n\n"
        b"data: This is the second message, it\ndata: has two lines.\n\n"
        b"data: This is the third message.\n\n",
        [
            E(data="This is the first message."),
            E(data="This is the second message, it\nhas two lines."),
            E(data="This is the third message."),
        ],
        id="whatwg-three-messages",
    ),
    pytest.param(
        b"event: add\ndata: 73857293\n\nevent: remove\ndata: 2153\n\nevent: add\ndata: 113411\n\n",
        [E("add", "73857293"), E("remove", "2153"), E("add", "113411")],
        id="whatwg-stock-events",
    ),
    pytest.param(
        b": test stream\n\ndata: first event\nid: 1\n\ndata:second event\nid\n\n"
        b"data:  third event\n\n",
        [E(data="first event", id="1"), E(data="second event"), E(data=" third event")],
        id="whatwg-four-blocks",
    ),
    pytest.param(
        b"data\n\ndata\ndata\n\ndata:", [E(data=""), E(data="\n")], id="whatwg-empty-data"
    ),
    pytest.param(
        b"data:test\n\ndata: test\n\n", [E(data="test"), E(data="test")], id="whatwg-space-optional"
    ),
]


@pytest.mark.parametrize(("stream", "expected"), VECTORS)
class TestSpecVectors:
    def test_fed_whole(self, stream: bytes, expected: list[Event]) -> None:
        assert parse(stream) == expected

    def test_reference_agrees(self, stream: bytes, expected: list[Event]) -> None:
        assert [e for _, e in reference(stream)] == expected

    def test_split_at_every_byte(self, stream: bytes, expected: list[Event]) -> None:
        for cut in range(len(stream) + 1):
            assert_chunking_is_transparent(stream, [cut])

    def test_byte_by_byte(self, stream: bytes, expected: list[Event]) -> None:
        per_byte = feed_chunks([stream[i : i + 1] for i in range(len(stream))])
        assert [e for events in per_byte for e in events] == expected

    def test_each_event_returned_by_the_feed_holding_its_terminator(
        self, stream: bytes, expected: list[Event]
    ) -> None:
        per_byte = feed_chunks([stream[i : i + 1] for i in range(len(stream))])
        emitted_at = [(i, e) for i, events in enumerate(per_byte) for e in events]
        assert emitted_at == reference(stream)
        for i, _ in emitted_at:
            # the blank line's terminator: a CR (also the CR of a CRLF) or a lone LF
            assert stream[i : i + 1] == b"\r" or (
                stream[i : i + 1] == b"\n" and stream[i - 1 : i] != b"\r"
            )


# --- targeted behaviour -------------------------------------------------------------------


def test_cr_at_chunk_end_dispatches_immediately() -> None:
    parser = SSEParser()
    assert parser.feed(b"data: a\r\n\r") == [Event(data="a")]
    assert parser.feed(b"\n") == []  # the LF of the split CRLF: not a second blank line


def test_lf_after_split_cr_is_skipped_not_an_empty_line() -> None:
    parser = SSEParser()
    assert parser.feed(b"data: a\r") == []
    assert parser.feed(b"\ndata: b\n\n") == [Event(data="a\nb")]


def test_skipped_lf_may_arrive_after_empty_and_partial_chunks() -> None:
    parser = SSEParser()
    assert parser.feed(b"data: a\r") == []
    assert parser.feed(b"") == []
    assert parser.feed(b"\n") == []
    assert parser.feed(b"data: \xe2") == []
    assert parser.feed(b"\x82\xac\r") == []
    assert parser.feed(b"") == []
    assert parser.feed(b"\n\r") == [Event(data="a\n€")]


def test_only_one_lf_is_skipped_after_split_cr() -> None:
    parser = SSEParser()
    assert parser.feed(b"data: a\r") == []
    assert parser.feed(b"\n\n") == [Event(data="a")]


def test_bom_split_across_feeds_is_stripped() -> None:
    parser = SSEParser()
    assert parser.feed(b"\xef") == []
    assert parser.feed(b"\xbb") == []
    assert parser.feed(b"\xbfdata: a\n\n") == [Event(data="a")]


def test_leading_empty_feeds_do_not_disable_bom_stripping() -> None:
    parser = SSEParser()
    assert parser.feed(b"") == []
    assert parser.feed(BOM + b"data: a\n\n") == [Event(data="a")]


def test_last_event_id_is_committed_at_each_blank_line() -> None:
    parser = SSEParser()
    assert parser.last_event_id == ""
    parser.feed(b"id: 1\n")
    assert parser.last_event_id == ""  # not yet: the block has not ended
    parser.feed(b"\n")
    assert parser.last_event_id == "1"  # even though nothing was dispatched
    parser.feed(b"data: a\n\nid: 2\x00\n\n")
    assert parser.last_event_id == "1"
    parser.feed(b"id\ndata: b\n\n")
    assert parser.last_event_id == ""
    parser.feed(b"id: 3\n\nid: 4\n")
    parser.close()
    assert parser.last_event_id == "3"  # the unfinished block is discarded


def test_close_discards_pending_and_is_idempotent() -> None:
    parser = SSEParser()
    assert parser.feed(b"event: x\ndata: a\ndata: b") == []
    assert parser.close() == []
    assert parser.close() == []


def test_feed_after_close_is_an_error() -> None:
    parser = SSEParser()
    parser.close()
    with pytest.raises(RuntimeError, match="after close"):
        parser.feed(b"data: a\n\n")


def test_event_defaults_and_immutability() -> None:
    event = Event()
    assert (event.event, event.data, event.id, event.retry) == ("message", "", "", None)
    with pytest.raises(AttributeError):
        event.data = "x"  # type: ignore[misc]
    assert Event(data="a") == Event("message", "a", "", None)
    assert len({Event(data="a"), Event(data="a")}) == 1


def test_ten_thousand_chunks() -> None:
    blocks = [f"id: {n}\nevent: tick\ndata: {n}\ndata: {'é' * (n % 7)}\n\n" for n in range(2000)]
    stream = ("".join(blocks) + "data: " + "y" * 20_000).encode()
    size = len(stream) // 10_000 + 1
    chunks = [stream[i : i + size] for i in range(0, len(stream), size)]
    assert len(chunks) >= 9_000
    events = [e for per in feed_chunks(chunks) for e in per]
    assert events == [Event("tick", f"{n}\n{'é' * (n % 7)}", str(n)) for n in range(2000)]


def test_long_line_in_tiny_chunks() -> None:
    stream = b"data: " + b"z" * 50_000 + b"\r\n\r\n"
    per_chunk = feed_chunks([stream[i : i + 5] for i in range(0, len(stream), 5)])
    assert [e for per in per_chunk for e in per] == [Event(data="z" * 50_000)]


# --- properties: re-chunking never changes anything ----------------------------------------

EOLS = st.sampled_from([b"\n", b"\r", b"\r\n"])
NAMES = st.sampled_from(["data", "event", "id", "retry", "foo", "", "Data", "\ufeffdata"])
VALUES = st.one_of(
    st.text(st.characters(exclude_characters="\r\n", exclude_categories=("Cs",)), max_size=8),
    st.from_regex(r"[0-9]{1,4}", fullmatch=True),
    st.sampled_from(["", " ", "  x", "a\x00b", "€", "😀", ":"]),
)
FIELD = st.builds(
    lambda name, sep, value: (name + sep + value).encode(),
    NAMES,
    st.sampled_from(["", ":", ": ", ":  "]),
    VALUES,
)
COMMENT = VALUES.map(lambda v: (":" + v).encode())
LINE = st.tuples(st.one_of(FIELD, FIELD, COMMENT, st.just(b"")), EOLS).map(b"".join)
GARBAGE = st.sampled_from([b"\xff", b"\xe2\x82", b"\xc3", BOM, b"\xac"])
STRUCTURED = st.builds(
    lambda bom, parts, tail: bom + b"".join(parts) + tail,
    st.sampled_from([b"", BOM, BOM + BOM, b"\xef\xbb"]),
    st.lists(st.one_of(LINE, LINE, LINE, GARBAGE), max_size=25),
    st.one_of(st.just(b""), FIELD),
)
TOKENS = [b"\r", b"\n", b"\r\n", b":", b" ", b"data", b"id", b"event", b"retry", b"1", b"x"]
TOKENS += [b"\x00", BOM, b"\xe2\x82", b"\xac", b"\xff", "é".encode()]
TOKEN_SOUP = st.lists(st.sampled_from(TOKENS), max_size=60).map(b"".join)


def cuts_for(stream: bytes) -> st.SearchStrategy[list[int]]:
    return st.lists(st.integers(0, len(stream)), max_size=len(stream) + 2)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.one_of(STRUCTURED, TOKEN_SOUP))
def test_any_rechunking_yields_the_same_events_at_the_same_time(
    data: st.DataObject, stream: bytes
) -> None:
    assert parse(stream) == [e for _, e in reference(stream)]
    assert_chunking_is_transparent(stream, data.draw(cuts_for(stream), label="cuts"))


@settings(max_examples=100, deadline=None)
@given(STRUCTURED)
def test_byte_by_byte_equals_whole(stream: bytes) -> None:
    per_byte = feed_chunks([stream[i : i + 1] for i in range(len(stream))])
    assert [e for events in per_byte for e in events] == parse(stream)


def test_a_retry_field_too_long_to_use_is_ignored() -> None:
    parser = SSEParser()
    events = parser.feed(b"retry: " + b"9" * 5000 + b"\ndata: x\n\n")
    assert [(event.data, event.retry) for event in events] == [("x", None)]
