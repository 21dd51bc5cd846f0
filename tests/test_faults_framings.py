"""Faults on every framing: "after N events", cuts, stalls and re-chunking fall at the events
of SSE, NDJSON, JSON-array and AWS event-stream bodies alike (one `event_ends`), and, asked
with `inside=`, inside an event-stream message's prelude, headers or payload.

Through real clients against a loopback origin: boto3's `converse_stream` (botocore's own
decoder, which checks every CRC, buffers a message split anywhere and raises its own error
on a cut) and httpx reading a Gemini JSON-array stream and an NDJSON stream.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import boto3
import botocore.config
import httpx
import pytest
import urllib3

import replay
from replay import Chunk, Response, faults, framing
from replay.dialects import ToolCall, converse, gemini
from replay.framing import eventstream
from replay.framing.boundaries import EventEnds, event_ends
from replay.testing import Origin, Script

MODEL = "amazon.nova-micro-v1"
PATH = f"/model/{MODEL}/converse-stream"
NDJSON = [
    b'{"message": {"content": "Hel"}, "done": false}\n',
    b'{"message": {"content": "lo"}, "done": false}\n{"message": {"con',
    b'tent": "!"}, "done": false}\n{"done": true}\n',
]


def _timed(payloads: list[bytes], content_type: str) -> Response:
    chunks = [Chunk(0.1 * (i + 1), data) for i, data in enumerate(payloads)]
    return Response(status=200, headers=[("content-type", content_type)], chunks=chunks)


def _converse() -> Response:
    response = converse.stream("Hello there, how are you?", tool_use=ToolCall("f", {"a": 1}))
    body = response.response.body
    pieces = [body[a:b] for a, b in itertools.pairwise([0, 5, 130, 131, 300, len(body)])]
    return _timed(pieces, eventstream.CONTENT_TYPE)


def _responses() -> dict[str, Response]:
    array = gemini.stream("One two three four", framing="json-array").response
    return {
        "sse": _timed(
            [b"data: one\n\n", b"data: two\n\ndata: th", b"ree\n\n"], "text/event-stream"
        ),
        "ndjson": _timed(NDJSON, "application/x-ndjson"),
        "json-array": _timed(list(array.chunks.payloads), "application/json"),
        "eventstream": _converse(),
    }


def _data(response: Response) -> list[str]:
    kind = framing.detect(response) or "json-array"  # (a one-element array is no stream)
    return [event.data for event in framing.events(response, kind)]


# --- one event_ends for every framing ------------------------------------------------------


@pytest.mark.parametrize("kind", ["sse", "ndjson", "json-array", "eventstream"])
def test_event_ends_finds_every_event_of_every_framing(kind: str) -> None:
    response = _responses()[kind]
    assert framing.detect(response) == kind
    ends = event_ends(response)
    body = response.body
    assert len(ends) == framing.count(response) >= 3
    for n, end in enumerate(ends, 1):  # the first n events are exactly the body up to there
        head = _timed([body[:end]], kind_type(kind))
        assert [e.data for e in framing.events(head, kind)] == _data(response)[:n]  # type: ignore[arg-type]
    # Fed a byte at a time (as `replay record`'s progress counter is), the same offsets.
    counter = EventEnds(kind)  # type: ignore[arg-type]
    fed = [end for at in range(len(body)) for end in counter.feed(body[at : at + 1])]
    assert fed + counter.close() == ends


def kind_type(kind: str) -> str:
    return {
        "sse": "text/event-stream",
        "ndjson": "application/x-ndjson",
        "json-array": "application/json",
        "eventstream": eventstream.CONTENT_TYPE,
    }[kind]


def test_event_stream_ends_are_its_message_ends() -> None:
    response = _converse()
    spans = eventstream.spans(response.body)
    assert event_ends(response) == [start + total for start, total, _ in spans]


@pytest.mark.parametrize("kind", ["sse", "ndjson", "json-array", "eventstream"])
@pytest.mark.parametrize("after", [0, 1, 2])
def test_cut_and_stall_after_events_of_every_framing(kind: str, after: int) -> None:
    response = _responses()[kind]
    cut = faults.cut(after_events=after).apply(response)
    assert _data(cut) == _data(response)[:after]
    assert cut.end.error == "RemoteProtocolError"
    stalled = faults.stall(after_events=after, seconds=5).apply(response)
    assert stalled.body == response.body
    late = [at for at in stalled.chunks.times if at not in response.chunks.times]
    assert late
    assert min(late) >= 5


@pytest.mark.parametrize("kind", ["sse", "ndjson", "json-array", "eventstream"])
def test_rechunk_events_gives_one_chunk_per_event(kind: str) -> None:
    response = _responses()[kind]
    rechunked = faults.rechunk("events").apply(response)
    assert rechunked.body == response.body
    assert _data(rechunked) == _data(response)
    ends = list(itertools.accumulate(map(len, rechunked.chunks.payloads)))
    assert ends[: len(event_ends(response))] == event_ends(response)
    assert len(ends) - len(event_ends(response)) <= 1  # what follows the last event (`]`)
    # No byte comes later than it did, and each recorded chunk still ends at its time.
    assert rechunked.chunks.times[-1] == response.chunks.times[-1]


# --- inside an event-stream message ---------------------------------------------------------


@pytest.mark.parametrize("inside", ["prelude", "headers", "payload"])
def test_a_cut_inside_a_message_falls_in_that_part_of_it(inside: str) -> None:
    response = _converse()
    start, total, headers = eventstream.spans(response.body)[2]
    cut = faults.cut(after_events=2, inside=inside).apply(response)  # type: ignore[arg-type]
    where = len(cut.body) - start
    part = {"prelude": (0, 12), "headers": (12, 12 + headers), "payload": (12 + headers, total)}
    low, high = part[inside]
    assert low < where < high
    parser = eventstream.EventStreamParser()
    assert len(parser.feed(cut.body)) == 2
    assert not parser.complete  # the body ends inside the third message
    assert cut.end.error == "RemoteProtocolError"


def test_rechunk_inside_every_message_splits_each_in_two_and_reads_the_same() -> None:
    response = _converse()
    spans = eventstream.spans(response.body)
    rechunked = faults.rechunk("events", inside="headers").apply(response)
    assert len(rechunked.chunks) == 2 * len(spans)
    firsts = rechunked.chunks.payloads[::2]
    assert [len(p) for p in firsts] == [12 + headers // 2 for _, _, headers in spans]
    assert _data(rechunked) == _data(response)


def test_inside_on_another_framing_falls_in_the_middle_of_the_event() -> None:
    response = _responses()["ndjson"]
    cut = faults.cut(after_events=1, inside="payload").apply(response)
    first, second = event_ends(response)[:2]
    assert len(cut.body) == first + (second - first) // 2
    assert _data(cut)[0] == _data(response)[0]
    assert not cut.body.endswith(b"\n")  # the second line cut in two


@pytest.mark.parametrize(
    "spec",
    [
        "cut(after_events=2, inside='payload')",
        "stall(after_events=1, seconds=0.5, inside='headers')",
        "rechunk('events')",
        "rechunk('events', inside='prelude')",
    ],
)
def test_inside_specs_round_trip(spec: str) -> None:
    fault = faults.parse(spec)
    assert repr(fault) == spec
    assert "inside" in fault.describe() or "per event" in fault.describe()


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        ("cut(after_events=1, inside='middle')", "inside must be one of"),
        ("cut(after_bytes=3, inside='payload')", "goes with after_events"),
        ("rechunk(4, inside='payload')", "goes with rechunk('events')"),
    ],
)
def test_a_bad_inside_is_a_configuration_error(spec: str, problem: str) -> None:
    with pytest.raises(replay.ConfigurationError, match="bad fault") as raised:
        faults.parse(spec)
    assert problem in str(raised.value)


# --- boto3 converse_stream ------------------------------------------------------------------


def _client(url: str) -> Any:
    return boto3.client(
        "bedrock-runtime",
        region_name="us-east-1",
        endpoint_url=url,
        aws_access_key_id="AKIDEXAMPLE",
        aws_secret_access_key="not-a-real-secret-access-key-at-all",
    )


def _events_until_error(url: str) -> tuple[list[str], BaseException | None]:
    response = _client(url).converse_stream(
        modelId=MODEL, messages=[{"role": "user", "content": [{"text": "Say hello."}]}]
    )
    names: list[str] = []
    try:
        for event in response["stream"]:
            names.extend(event)
    except Exception as error:  # what botocore raises, whatever its class
        return names, error
    return names, None


@pytest.fixture
def bedrock_cassette(cassette_path: Path) -> tuple[Path, str, list[str]]:
    """A converse_stream recorded from a loopback origin: the path, the URL, the events."""
    script = Script(
        chunks=[(0.005, piece) for piece in _converse().chunks.payloads],
        headers=[("content-type", eventstream.CONTENT_TYPE)],
    )
    with Origin({PATH: script}) as origin:
        with replay.use_cassette(cassette_path, record_mode="all"):
            live, error = _events_until_error(origin.url)
        assert error is None
        return cassette_path, origin.url, live


def _replayed(cassette: tuple[Path, str, list[str]], fault: faults.Fault) -> Any:
    path, url, _ = cassette
    with replay.use_cassette(path, record_mode="none", faults=[fault]):
        return _events_until_error(url)


def _dropped_live(inside: str | None) -> tuple[list[str], BaseException | None]:
    """What boto3 does when a real origin drops the connection where the fault cuts."""
    response = _converse()
    body = response.body[: faults.cut(after_events=3, inside=inside).offset(response)]  # type: ignore[arg-type]
    script = Script(
        chunks=[(0.0, body)], headers=[("content-type", eventstream.CONTENT_TYPE)], end="drop"
    )
    with Origin({PATH: script}) as origin:
        return _events_until_error(origin.url)


@pytest.mark.parametrize("inside", [None, "prelude", "headers", "payload"])
def test_boto3_sees_a_cut_at_or_inside_a_message_as_a_real_drop(
    bedrock_cassette: tuple[Path, str, list[str]], inside: Any
) -> None:
    live = bedrock_cassette[2]
    events, error = _replayed(bedrock_cassette, faults.cut(after_events=3, inside=inside))
    assert events == live[:3]
    # botocore does not wrap it: urllib3's own error comes out of the event stream, as live.
    dropped_events, dropped = _dropped_live(inside)
    assert dropped_events == events
    assert type(error) is type(dropped), (error, dropped)
    assert isinstance(error, urllib3.exceptions.ProtocolError)


@pytest.mark.parametrize(
    "fault",
    [
        faults.rechunk(1),
        faults.rechunk("events"),
        faults.rechunk("events", inside="prelude"),
        faults.rechunk("events", inside="headers"),
        faults.rechunk("events", inside="payload"),
        faults.stall(after_events=2, seconds=0.05, inside="payload"),
    ],
)
def test_boto3_reads_messages_split_anywhere_as_the_same_events(
    bedrock_cassette: tuple[Path, str, list[str]], fault: faults.Fault
) -> None:
    assert _replayed(bedrock_cassette, fault) == (bedrock_cassette[2], None)


# --- httpx: a Gemini JSON array, an NDJSON stream -------------------------------------------


@pytest.mark.parametrize("kind", ["json-array", "ndjson"])
def test_httpx_reads_cuts_and_event_chunks_of_json_streams(cassette_path: Path, kind: Any) -> None:
    response = _responses()[kind]
    script = Script(
        chunks=[(0.005, piece) for piece in response.chunks.payloads],
        headers=[("content-type", kind_type(kind))],
    )

    def read(url: str) -> tuple[list[bytes], Exception | None]:
        chunks: list[bytes] = []
        with httpx.Client() as client, client.stream("GET", url) as answer:
            try:
                chunks.extend(answer.iter_raw())
            except httpx.RemoteProtocolError as error:
                return chunks, error
        return chunks, None

    with Origin({"/stream": script}) as origin:
        url = f"{origin.url}/stream"
        with replay.use_cassette(cassette_path, record_mode="all"):
            live, _ = read(url)
    body = b"".join(live)
    parsed = [json.loads(e.data) for e in framing.events(_timed([body], kind_type(kind)), kind)]

    with replay.use_cassette(cassette_path, record_mode="none", faults=["cut(after_events=2)"]):
        chunks, error = read(url)
    assert isinstance(error, httpx.RemoteProtocolError)
    kept = framing.events(_timed([b"".join(chunks)], kind_type(kind)), kind)
    assert [json.loads(e.data) for e in kept] == parsed[:2]

    with replay.use_cassette(cassette_path, record_mode="none", faults=["rechunk('events')"]):
        chunks, error = read(url)
    assert error is None
    assert b"".join(chunks) == body
    each = [framing.events(_timed([chunk], kind_type(kind)), kind) for chunk in chunks]
    if kind == "ndjson":  # each chunk holds exactly one line
        assert [len(events) for events in each] == [1] * len(parsed)
    ends = list(itertools.accumulate(map(len, chunks)))
    assert ends[: len(parsed)] == event_ends(_timed([body], kind_type(kind)))


def _until_timeout(url: str) -> tuple[list[str], BaseException | None]:
    client = boto3.client(
        "bedrock-runtime",
        region_name="us-east-1",
        endpoint_url=url,
        aws_access_key_id="AKIDEXAMPLE",
        aws_secret_access_key="not-a-real-secret-access-key-at-all",
        config=botocore.config.Config(read_timeout=0.5, retries={"max_attempts": 0}),
    )
    response = client.converse_stream(
        modelId=MODEL, messages=[{"role": "user", "content": [{"text": "Say hello."}]}]
    )
    names: list[str] = []
    try:
        for event in response["stream"]:
            names.extend(event)
    except Exception as error:  # what botocore raises, whatever its class
        return names, error
    return names, None


def test_boto3_times_out_on_a_stall_inside_a_message_as_on_a_live_one(
    bedrock_cassette: tuple[Path, str, list[str]],
) -> None:
    path, url, live = bedrock_cassette
    stall = faults.stall(after_events=2, seconds=3, inside="payload")
    with replay.use_cassette(path, record_mode="none", speed="instant", faults=[stall]):
        events, error = _until_timeout(url)
    assert events == live[:2]
    # A live origin that goes silent at the same byte, for longer than the read timeout.
    response = _converse()
    middle = faults.cut(after_events=2, inside="payload").offset(response)
    body = response.body
    script = Script(
        chunks=[(0.0, body[:middle]), (3.0, body[middle:])],
        headers=[("content-type", eventstream.CONTENT_TYPE)],
    )
    with Origin({PATH: script}) as origin:
        live_events, live_error = _until_timeout(origin.url)
    assert live_events == events
    assert type(error) is type(live_error), (error, live_error)
    assert isinstance(error, urllib3.exceptions.ReadTimeoutError)  # urllib3's, as live
