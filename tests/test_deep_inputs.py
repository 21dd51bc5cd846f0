"""Input nested past Python's recursion limit, or damaged, in the framings and frames added
for Bedrock, Gemini and WebSockets: read as the rest are, never a RecursionError, and a
damaged event stream read in memory bounded by its size."""

from __future__ import annotations

import base64
import json
import tracemalloc
from pathlib import Path

import pytest

from replay import faults
from replay.convert.json_export import import_json
from replay.convert.migrate import mark_path, recorded_under
from replay.errors import CassetteFormatError, ConfigurationError
from replay.framing import eventstream, invoke, jsonarray
from replay.matching.frames import frame_key
from replay.model.frames import Frame

DEEP = b"[" * 100_000 + b"]" * 100_000


def test_a_deep_text_frame_is_no_json_event_and_is_keyed_at_any_depth() -> None:
    frame = Frame(0.1, "client", "text", DEEP)
    assert frame.json() is None
    assert frame.event_type is None
    shallow = b"[" * 10 + b"]" * 10
    assert frame_key("text", DEEP)[0] == frame_key("text", shallow)[0] == "json"
    recorded = json.dumps({"type": "x", "event_id": "a", "v": [1, {"event_id": "b"}]})
    sent = json.dumps({"event_id": "c", "v": [1, {"event_id": "d"}], "type": "x"})
    assert frame_key("text", recorded.encode()) == frame_key("text", sent.encode())


def test_a_deep_invoke_chunk_and_exception_stay_as_they_came() -> None:
    payload = json.dumps({"bytes": base64.b64encode(DEEP).decode()})
    assert invoke.inner(payload) is None
    assert invoke.unwrap([(9, "chunk", payload, None, None)]) == [(9, "chunk", payload, None, None)]


def test_a_deep_json_array_element_is_read_piece_by_piece() -> None:
    body = b"[" + DEEP + b"]"
    assert len(jsonarray.scan([body])) <= 1  # no RecursionError; at most the one element


def test_a_large_damaged_event_stream_is_read_up_to_the_damage_in_bounded_memory() -> None:
    good = eventstream.encode({":event-type": "messageStart"}, b'{"role":"assistant"}')
    big = bytearray(eventstream.encode({":event-type": "chunk"}, b"x" * 8_000_000))
    big[-1] ^= 0xFF  # its message CRC no longer matches
    body = good + bytes(big)
    tracemalloc.start()
    try:
        events, problem, cut = eventstream.read_whole(body)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert (len(events), bool(problem), cut) == (1, True, False)
    assert peak < 5 * len(body)  # the body a few times over (byte by byte it was ~90 times)


@pytest.mark.parametrize(
    "spec",
    [
        "cut(after_events=" + "-" * 50_000 + "1)",
        "cut(after_events=" + "1 if 1 else 2 " * 3000 + ")",
    ],
    ids=["huge", "deep"],
)
def test_a_huge_or_deep_fault_spec_is_one_short_configuration_error(spec: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        faults.parse(spec)
    assert len(str(caught.value)) < 200
    assert str(caught.value).startswith("bad fault 'cut(after_events=")


@pytest.mark.parametrize(
    "mark", [b"[" * 30_000, b"\xff\xfe{", b"{" * 70_000], ids=["deep", "not-utf8", "too-large"]
)
def test_a_damaged_migration_mark_is_a_cassette_format_error(tmp_path: Path, mark: bytes) -> None:
    cassette = tmp_path / "c.msgpack"
    mark_path(cassette).write_bytes(mark)
    with pytest.raises(CassetteFormatError, match="not a mark of `replay migrate`"):
        recorded_under(cassette)


def test_a_bad_frame_kind_in_a_json_export_is_one_plain_line() -> None:
    response = {"status": 101, "headers": [], "headers_at": 0.1, "chunks": [],
                "end": {"at": 0.1, "error": None, "message": "", "truncated": False}}  # fmt: skip
    frame = {"at": 0.2, "from": "client", "kind": "continuation", "data": "{}"}
    request = {"method": "GET", "url": "ws://h/", "headers": [], "body": ""}
    interaction = {"request": request, "response": response, "frames": [frame]}
    doc = {"format": "replay-cassette-json", "version": 1, "interactions": [interaction]}
    with pytest.raises(CassetteFormatError) as caught:
        import_json(json.dumps(doc), "c.json")
    message = str(caught.value)
    assert "frames[0]: 'kind' must be in" in message
    assert "Attribute(" not in message
