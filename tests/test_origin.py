"""The local streaming origin and the stream builders, checked with real clients and SDKs.

Strict response validation in the SDKs turns a missing required field into an error, so these
tests also prove the built streams are complete enough for the typed event classes.
"""

from __future__ import annotations

import importlib
import json
import time
from collections.abc import Callable, Iterable, Iterator
from types import ModuleType

import anthropic
import httpx
import openai
import pytest

from replay.testing import (
    HELLO_TEXT,
    Origin,
    Script,
    TimedChunks,
    anthropic_hello,
    chat_hello,
    responses_hello,
)

FAST = 0.01  # scale for the realistic streams: ~10 ms instead of ~1 s each

EVENTS = tuple((0.02, b"data: %d\n\n" % i) for i in range(5))
"""Five SSE events 20 ms apart: short, but real waits between chunks."""


@pytest.fixture
def origin() -> Iterator[Origin]:
    routes = {
        "/v1/responses": Script(chunks=responses_hello(scale=FAST)),
        "/v1/chat/completions": Script(chunks=chat_hello(scale=FAST, include_usage=True)),
        "/v1/messages": Script(chunks=anthropic_hello(scale=FAST)),
    }
    with Origin(routes) as running:
        yield running


@pytest.fixture(params=["httpx", "httpx2"])
def http(request: pytest.FixtureRequest) -> ModuleType:
    """The client library under test: httpx and its fork httpx2 must see the same stream."""
    return importlib.import_module(request.param)


# --- wire behaviour ---------------------------------------------------------------------


def test_iter_raw_sees_each_scripted_chunk(origin: Origin, http: ModuleType) -> None:
    origin.route("/events", Script(chunks=EVENTS))
    with http.Client() as client, client.stream("GET", origin.url + "/events") as response:
        assert response.headers["content-type"] == "text/event-stream"
        assert list(response.iter_raw()) == [data for _, data in EVENTS]


def test_chunks_arrive_on_schedule(origin: Origin) -> None:
    origin.route("/slow", Script(header_delay=0.05, chunks=[(0.05, b"a"), (0.05, b"b")]))
    start = time.monotonic()
    with httpx.Client() as client, client.stream("GET", origin.url + "/slow") as response:
        headers_at = time.monotonic() - start
        arrivals = [time.monotonic() - start for _ in response.iter_raw()]
    assert headers_at >= 0.05
    assert arrivals[0] >= 0.10
    assert arrivals[1] >= 0.15
    assert arrivals[1] < 0.15 + 0.5  # generous: shared CI machines stall


def test_drop_raises_after_the_sent_chunks(origin: Origin, http: ModuleType) -> None:
    origin.route("/drop", Script(chunks=EVENTS, end="drop"))
    received = []
    with (
        http.Client() as client,
        client.stream("GET", origin.url + "/drop") as response,
        pytest.raises(http.RemoteProtocolError, match="incomplete chunked read"),
    ):
        received.extend(response.iter_raw())
    assert received == [data for _, data in EVENTS]


def test_hang_lets_a_client_leave_after_one_chunk(origin: Origin) -> None:
    origin.route("/forever", Script(chunks=EVENTS[:1], end="hang"))
    start = time.monotonic()
    with httpx.Client() as client, client.stream("GET", origin.url + "/forever") as response:
        first = next(response.iter_raw())
    assert first == EVENTS[0][1]
    assert time.monotonic() - start < 3.0  # the stream never ends: busy, it took ~0.5 s


def test_exit_ends_a_hanging_stream_promptly() -> None:
    with httpx.Client() as client:
        with Origin({"/forever": Script(chunks=EVENTS[:1], end="hang")}) as origin:
            request = client.build_request("GET", origin.url + "/forever")
            response = client.send(request, stream=True)
            chunks = response.iter_raw()
            next(chunks)
            start = time.monotonic()
        assert time.monotonic() - start < 3.0  # the stream never ends: busy, it took ~0.5 s
        # The stream was cut, not finished: the client must not mistake it for a clean end.
        with pytest.raises(httpx.RemoteProtocolError):
            list(chunks)
        response.close()


def test_gzip_keeps_chunk_boundaries_and_decodes(origin: Origin, http: ModuleType) -> None:
    origin.route("/gz", Script(chunks=EVENTS, gzip=True))
    with http.Client() as client:
        with client.stream("GET", origin.url + "/gz") as response:
            assert response.headers["content-encoding"] == "gzip"
            assert list(response.iter_bytes()) == [data for _, data in EVENTS]
        with client.stream("GET", origin.url + "/gz") as response:
            assert "".join(response.iter_text()) == "".join(d.decode() for _, d in EVENTS)


@pytest.mark.parametrize(
    "content",
    [b'{"n": 1}', iter([b'{"n":', b" 1}"])],
    ids=["content-length", "chunked-request"],
)
def test_echo_returns_the_request_body(origin: Origin, content: bytes | Iterable[bytes]) -> None:
    origin.route("/echo", Script(echo=True))
    with httpx.Client() as client:
        response = client.post(origin.url + "/echo", content=content)
    assert response.headers["content-type"] == "application/json"
    assert response.json() == {"n": 1}
    assert origin.requests[-1].body == response.content


def test_unknown_path_is_a_json_404(origin: Origin) -> None:
    response = httpx.get(origin.url + "/nowhere")
    assert response.status_code == 404
    assert "error" in response.json()


def test_requests_record_what_reached_the_origin(origin: Origin) -> None:
    origin.route("/echo", Script(echo=True))
    httpx.put(origin.url + "/echo?a=1", headers={"Authorization": "Bearer sk-secret"}, content=b"x")
    seen = origin.requests[-1]
    assert (seen.method, seen.path, seen.query, seen.body) == ("PUT", "/echo", "a=1", b"x")
    assert seen.header("authorization") == "Bearer sk-secret"
    assert ("Authorization", "Bearer sk-secret") in seen.headers


def test_keep_alive_reuses_the_connection(origin: Origin) -> None:
    origin.route("/events", Script(chunks=EVENTS[:2]))
    with httpx.Client() as client:
        for _ in range(3):
            client.get(origin.url + "/events")
    assert len({seen.client_port for seen in origin.requests}) == 1


# --- the official SDKs on the built streams ---------------------------------------------


def test_openai_responses_stream_ends_with_the_full_text(origin: Origin) -> None:
    with openai.OpenAI(
        api_key="sk-test", base_url=origin.url + "/v1", _strict_response_validation=True
    ) as client:
        events = list(client.responses.create(model="gpt-4.1", input="Hi", stream=True))
    assert [event.sequence_number for event in events] == list(range(len(events)))
    assert events[-1].type == "response.completed"
    assert events[-1].response.output_text == HELLO_TEXT
    deltas = [event.delta for event in events if event.type == "response.output_text.delta"]
    assert "".join(deltas) == HELLO_TEXT
    assert origin.requests[-1].header("authorization") == "Bearer sk-test"


def test_openai_chat_stream_gives_the_text_and_usage(origin: Origin) -> None:
    with openai.OpenAI(
        api_key="sk-test", base_url=origin.url + "/v1", _strict_response_validation=True
    ) as client:
        chunks = list(
            client.chat.completions.create(
                model="gpt-4o-mini",
                messages=[{"role": "user", "content": "Hi"}],
                stream=True,
                stream_options={"include_usage": True},
            )
        )
    assert chunks[0].choices[0].delta.role == "assistant"
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == HELLO_TEXT
    assert chunks[-2].choices[0].finish_reason == "stop"
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == 10


def test_anthropic_stream_gives_the_text(origin: Origin) -> None:
    with anthropic.Anthropic(
        api_key="x", base_url=origin.url, _strict_response_validation=True
    ) as client:
        with client.messages.stream(
            model="claude-sonnet-4-20250514",
            max_tokens=64,
            messages=[{"role": "user", "content": "Hi"}],
        ) as stream:
            assert stream.get_final_text() == HELLO_TEXT
        raw = client.messages.create(
            model="claude-sonnet-4-20250514",
            max_tokens=64,
            messages=[{"role": "user", "content": "Hi"}],
            stream=True,
        )
        kinds = [event.type for event in raw]
    assert kinds[0] == "message_start"
    assert kinds[-2:] == ["message_delta", "message_stop"]


# --- the builders -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "build",
    [responses_hello, chat_hello, anthropic_hello],
    ids=["responses", "chat", "anthropic"],
)
def test_builders_wait_before_the_first_event_and_scale(build: Callable[..., TimedChunks]) -> None:
    real = build()
    assert real[0][0] == pytest.approx(0.3)
    assert all(0 < delay <= 0.3 for delay, _ in real)
    assert all(delay == 0 for delay, _ in build(scale=0))
    assert all(data.endswith(b"\n\n") and data.count(b"\n\n") == 1 for _, data in real)


def test_responses_events_are_numbered_in_order() -> None:
    payloads = [json.loads(data.split(b"data: ", 1)[1]) for _, data in responses_hello()]
    assert [p["sequence_number"] for p in payloads] == list(range(len(payloads)))
    first, last = payloads[0], payloads[-1]
    assert (first["type"], last["type"]) == ("response.created", "response.completed")
