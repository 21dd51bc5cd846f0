"""Redaction inside AWS event streams: a secret in a message's JSON payload is replaced, the
message encoded anew with fresh CRCs (its headers kept byte for byte), the chunks around it
kept in place and time; and boto3's `converse_stream` and `invoke_model_with_response_stream`
(whose model events are base64 inside the payload), whose decoder checks every CRC, read the
redacted recording back from the cassette.
"""

from __future__ import annotations

import base64
import itertools
import json
import warnings
import zlib
from pathlib import Path
from typing import Any

import boto3
import pytest

import replay
from replay import Chunk, Interaction, Request, Response
from replay.dialects import converse
from replay.errors import EventStreamError, KeyInResponseWarning
from replay.framing import eventstream
from replay.redact.eventstream import redact_payloads
from replay.redact.redactor import PLACEHOLDER, Redactor
from replay.testing import Origin, Script

MODEL = "amazon.nova-micro-v1"
PATH = f"/model/{MODEL}/converse-stream"
KEY = "sk-proj-" + "a1B2c3D4" * 6
HEADERS = {":event-type": "contentBlockDelta", ":content-type": "application/json"}
HEADERS_EVENT = {**HEADERS, ":message-type": "event"}


def _messages() -> list[bytes]:
    """A Converse stream's messages, the third's text delta holding a key."""
    body = converse.stream("Hi there, your key is here.").response.body
    messages = [body[s : s + t] for s, t, _ in eventstream.spans(body)]
    leak = {"contentBlockIndex": 0, "delta": {"text": f" it is {KEY} ok"}}
    messages[2] = eventstream.encode(HEADERS_EVENT, json.dumps(leak).encode())
    return messages


def _response(chunks: list[bytes]) -> Response:
    timed = [Chunk(0.1 * (i + 1), data) for i, data in enumerate(chunks)]
    return Response(status=200, headers=[("content-type", eventstream.CONTENT_TYPE)], chunks=timed)


def _redacted(response: Response) -> Response:
    request = Request(method="POST", url=f"https://bedrock.test{PATH}")
    cleaned = Redactor().interaction(Interaction(request, response))
    assert cleaned is not None
    return cleaned.response


def test_a_key_in_a_payload_is_redacted_and_the_message_reencoded() -> None:
    messages = _messages()
    response = _response(messages)  # one message a chunk
    cleaned = _redacted(response)

    assert KEY.encode() not in cleaned.body
    events = eventstream.parse(cleaned.body)  # every CRC checked
    assert json.loads(events[2].data)["delta"]["text"] == f" it is {PLACEHOLDER} ok"
    assert [e.event for e in events] == [e.event for e in eventstream.parse(response.body)]
    assert cleaned.chunks.times == response.chunks.times
    changed = [
        i for i, (a, b) in enumerate(zip(messages, cleaned.chunks.payloads, strict=True)) if a != b
    ]
    assert changed == [2]  # only the chunk holding that message
    old, new = messages[2], cleaned.chunks.payloads[2]
    headers = int.from_bytes(old[4:8], "big")
    assert new[12 : 12 + headers] == old[12 : 12 + headers]  # the headers kept byte for byte
    assert len(old) - len(new) == len(KEY) - len(PLACEHOLDER)


def test_chunk_boundaries_keep_their_place_around_and_inside_the_message() -> None:
    body = b"".join(_messages())
    start, total, headers = eventstream.spans(body)[2]
    cuts = [0, 5, start + 3, start + 12 + headers + 10, start + total - 2, start + total + 7]
    pieces = [body[a:b] for a, b in itertools.pairwise([*cuts, len(body)])]
    response = _response(pieces)
    cleaned = _redacted(response)

    ends = list(itertools.accumulate(map(len, cleaned.chunks.payloads)))
    shrink = len(KEY) - len(PLACEHOLDER)
    new_total = total - shrink
    assert ends == [
        5,
        start + 3,
        start + 12 + headers + 10,
        start + new_total - 1,
        *[end - shrink for end in cuts[5:]],
        len(body) - shrink,
    ]
    assert cleaned.chunks.times == response.chunks.times
    assert len(eventstream.parse(cleaned.body)) == len(eventstream.spans(body))


def test_a_chunk_left_empty_by_a_shorter_payload_is_dropped() -> None:
    body = b"".join(_messages())
    start, total, _ = eventstream.spans(body)[2]
    # A chunk holding only the last bytes of the payload the placeholder shortens.
    cuts = [start + total - 12, start + total - 6, start + total]
    pieces = [body[a:b] for a, b in itertools.pairwise([0, *cuts, len(body)])]
    cleaned = _redacted(_response(pieces))
    assert len(cleaned.chunks) == len(pieces) - 1
    assert all(cleaned.chunks.payloads)
    eventstream.parse(cleaned.body)


def test_a_damaged_message_is_left_as_recorded() -> None:
    messages = _messages()
    damaged = bytearray(messages[2])
    damaged[-1] ^= 1
    messages[2] = bytes(damaged)
    response = _response(messages)
    assert redact_payloads(response, Redactor()._json) is response
    with pytest.raises(EventStreamError):
        eventstream.parse(_redacted(response).body)


def test_a_clean_stream_is_the_same_object_and_a_reasoning_signature_is_kept() -> None:
    signature = {"contentBlockIndex": 0, "delta": {"reasoningContent": {"signature": "EqoBCk"}}}
    messages = [eventstream.encode(HEADERS_EVENT, json.dumps(signature).encode())]
    response = _response(messages)
    assert redact_payloads(response, Redactor()._json) is response
    request = {"reasoningContent": {"reasoningText": {"text": "hm", "signature": "EqoBCk"}}}
    assert b"EqoBCk" in Redactor()._json(json.dumps(request).encode())


def test_reencode_keeps_headers_of_every_type_and_refuses_a_part() -> None:
    raw = bytes([1]) + b"i" + bytes([4]) + (7).to_bytes(4, "big")
    prelude = (16 + len(raw) + 2).to_bytes(4, "big") + len(raw).to_bytes(4, "big")
    prelude += zlib.crc32(prelude).to_bytes(4, "big")
    message = prelude + raw + b"{}"
    message += zlib.crc32(message).to_bytes(4, "big")
    again = eventstream.reencode(message, b'{"a": 1}')
    assert eventstream.headers_of(again[12 : 12 + len(raw)])["i"] == 7
    assert eventstream.parse(again)[0].data == '{"a": 1}'
    with pytest.raises(EventStreamError):
        eventstream.reencode(message[:-1], b"{}")


# --- boto3 --------------------------------------------------------------------------------


def _converse(url: str) -> list[tuple[str, Any]]:
    client = boto3.client(
        "bedrock-runtime",
        region_name="us-east-1",
        endpoint_url=url,
        aws_access_key_id="AKIDEXAMPLE",
        aws_secret_access_key="not-a-real-secret-access-key-at-all",
    )
    response = client.converse_stream(
        modelId=MODEL, messages=[{"role": "user", "content": [{"text": "Say hello."}]}]
    )
    return [(name, value) for event in response["stream"] for name, value in event.items()]


def test_boto3_replays_a_redacted_converse_stream_whose_crcs_it_checks(
    cassette_path: Path,
) -> None:
    body = b"".join(_messages())
    cuts = [0, 7, 90, 200, 201, 333, len(body)]  # inside preludes, headers and payloads
    pieces = [body[a:b] for a, b in itertools.pairwise(cuts)]
    script = Script(
        chunks=[(0.01, piece) for piece in pieces],
        headers=[("content-type", eventstream.CONTENT_TYPE)],
    )
    with Origin({PATH: script}) as origin:
        url = origin.url
        with warnings.catch_warnings():
            warnings.simplefilter("error", KeyInResponseWarning)  # nothing left to warn of
            with replay.use_cassette(cassette_path, record_mode="all"):
                live = _converse(url)
    assert KEY in live[2][1]["delta"]["text"]  # the client saw it live
    assert KEY.encode() not in cassette_path.read_bytes()

    with replay.use_cassette(cassette_path, record_mode="none") as cassette:
        replayed = _converse(url)  # botocore checks each message's CRCs
    assert cassette.all_played
    assert replayed[2][1]["delta"]["text"] == f" it is {PLACEHOLDER} ok"
    assert replayed[:2] + replayed[3:] == live[:2] + live[3:]


def _chunk_message(event: dict[str, Any]) -> bytes:
    inner = base64.b64encode(json.dumps(event).encode()).decode()
    headers = {":event-type": "chunk", ":content-type": "application/json"}
    return eventstream.encode(
        {**headers, ":message-type": "event"}, json.dumps({"bytes": inner, "p": "abc"}).encode()
    )


def test_boto3_invoke_model_stream_gets_the_key_redacted_inside_its_base64(
    cassette_path: Path,
) -> None:
    events = [
        {"type": "message_start", "message": {"role": "assistant"}},
        {"type": "content_block_delta", "delta": {"type": "text_delta", "text": f"key {KEY}"}},
        {"type": "message_stop"},
    ]
    body = b"".join(map(_chunk_message, events))
    script = Script(
        chunks=[(0.01, body[:100]), (0.01, body[100:])],
        headers=[("content-type", eventstream.CONTENT_TYPE)],
    )

    def invoke(url: str) -> list[dict[str, Any]]:
        client = boto3.client(
            "bedrock-runtime",
            region_name="us-east-1",
            endpoint_url=url,
            aws_access_key_id="AKIDEXAMPLE",
            aws_secret_access_key="not-a-real-secret-access-key-at-all",
        )
        response = client.invoke_model_with_response_stream(modelId=MODEL, body=b"{}")
        return [json.loads(event["chunk"]["bytes"]) for event in response["body"]]

    with Origin({f"/model/{MODEL}/invoke-with-response-stream": script}) as origin:
        url = origin.url
        with replay.use_cassette(cassette_path, record_mode="all"):
            live = invoke(url)
    assert live == events
    stored = cassette_path.read_bytes()
    assert KEY.encode() not in stored
    assert base64.b64encode(json.dumps(events[1]).encode()) not in stored

    with replay.use_cassette(cassette_path, record_mode="none"):
        replayed = invoke(url)  # botocore checks each message's CRCs
    assert replayed[1]["delta"]["text"] == f"key {PLACEHOLDER}"
    assert [replayed[0], replayed[2]] == [events[0], events[2]]
