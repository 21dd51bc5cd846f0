"""End to end: real SDKs and clients record from a real local origin, then replay offline.

Each scenario builds its client *before* entering `use_cassette` (as an application does),
runs once against the live origin while recording, and once more after the origin has been
shut down, replaying. The two outputs must be identical, and the live one must be right.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anthropic
import anyio
import httpx
import httpx2
import httpx_sse
import openai
import pytest

import replay
from replay.testing import HELLO_TEXT, Origin, Script, anthropic_hello, chat_hello, responses_hello

FAST = 0.01  # the realistic streams at 1/100 of their delays: ~10 ms each
KEY = "sk-test-key"
MESSAGES = [{"role": "user", "content": "hi"}]

# Cut inside lines and inside multi-byte UTF-8 characters ("é" is 2 bytes, "✓" is 3).
SPLIT_TEXT = 'data: {"text": "héllo ✓"}\n\nevent: done\ndata: [DONE]\n\n'.encode()
SPLIT_AT = (3, 19, 20, 25, 26, 40)
SPLIT_CHUNKS = tuple(
    SPLIT_TEXT[a:b] for a, b in zip((0, *SPLIT_AT), (*SPLIT_AT, None), strict=True)
)


def _routes() -> dict[str, Script]:
    # 20 ms gaps: long enough that each scripted chunk reaches the client as its own read.
    return {
        "/v1/responses": Script(chunks=responses_hello(scale=FAST)),
        "/v1/chat/completions": Script(chunks=chat_hello(scale=FAST, include_usage=True)),
        "/v1/messages": Script(chunks=anthropic_hello(scale=FAST)),
        "/split": Script(chunks=[(0.02, chunk) for chunk in SPLIT_CHUNKS]),
    }


Scenario = Callable[[str, replay.CassetteSession], Any]


def run(scenario: Scenario, url: str, session: replay.CassetteSession) -> Any:
    """Run a sync scenario, or an async one on asyncio."""
    if inspect.iscoroutinefunction(scenario):
        return anyio.run(scenario, url, session)
    return scenario(url, session)


# --- scenarios: (base URL, session) -> what the application saw ---------------------------


def openai_responses(url: str, session: replay.CassetteSession) -> Any:
    client = openai.OpenAI(api_key=KEY, base_url=f"{url}/v1", max_retries=0)
    with client, session:
        events = list(client.responses.create(model="m", input="hi", stream=True))
    return [event.type for event in events], events[-1].response.output_text


async def openai_responses_async(url: str, session: replay.CassetteSession) -> Any:
    client = openai.AsyncOpenAI(api_key=KEY, base_url=f"{url}/v1", max_retries=0)
    async with client, session:
        stream = await client.responses.create(model="m", input="hi", stream=True)
        events = [event async for event in stream]
    return [event.type for event in events], events[-1].response.output_text


def _chat_output(chunks: list[Any]) -> Any:
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    return len(chunks), text, chunks[-1].usage.total_tokens


def openai_chat(url: str, session: replay.CassetteSession) -> Any:
    client = openai.OpenAI(api_key=KEY, base_url=f"{url}/v1", max_retries=0)
    with client, session:
        chunks = list(
            client.chat.completions.create(
                model="m",
                messages=MESSAGES,  # type: ignore[arg-type]
                stream=True,
                stream_options={"include_usage": True},
            )
        )
    return _chat_output(chunks)


async def openai_chat_async(url: str, session: replay.CassetteSession) -> Any:
    client = openai.AsyncOpenAI(api_key=KEY, base_url=f"{url}/v1", max_retries=0)
    async with client, session:
        stream = await client.chat.completions.create(
            model="m",
            messages=MESSAGES,  # type: ignore[arg-type]
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = [chunk async for chunk in stream]
    return _chat_output(chunks)


def anthropic_messages(url: str, session: replay.CassetteSession) -> Any:
    client = anthropic.Anthropic(api_key=KEY, base_url=url, max_retries=0)
    with (
        client,
        session,
        client.messages.stream(model="m", max_tokens=64, messages=MESSAGES) as stream,  # type: ignore[arg-type]
    ):
        types = [event.type for event in stream]
        final = stream.get_final_message()
    return types, final.content[0].text, final.stop_reason  # type: ignore[union-attr]


async def anthropic_messages_async(url: str, session: replay.CassetteSession) -> Any:
    client = anthropic.AsyncAnthropic(api_key=KEY, base_url=url, max_retries=0)
    async with (
        client,
        session,
        client.messages.stream(model="m", max_tokens=64, messages=MESSAGES) as stream,  # type: ignore[arg-type]
    ):
        types = [event.type async for event in stream]
        final = await stream.get_final_message()
    return types, final.content[0].text, final.stop_reason  # type: ignore[union-attr]


def httpx_sse_events(url: str, session: replay.CassetteSession) -> Any:
    client = httpx.Client()
    with (
        client,
        session,
        httpx_sse.connect_sse(client, "POST", f"{url}/v1/responses", json={"input": "hi"}) as src,
    ):
        return [(sse.event, sse.json()["type"]) for sse in src.iter_sse()]


def httpx_iter_raw(url: str, session: replay.CassetteSession) -> Any:
    client = httpx.Client()
    with client, session, client.stream("GET", f"{url}/split") as response:
        return list(response.iter_raw())


def httpx2_iter_raw(url: str, session: replay.CassetteSession) -> Any:
    client = httpx2.Client()
    with client, session, client.stream("GET", f"{url}/split") as response:
        return list(response.iter_raw())


async def httpx2_aiter_raw(url: str, session: replay.CassetteSession) -> Any:
    client = httpx2.AsyncClient()
    async with client, session, client.stream("GET", f"{url}/split") as response:
        return [chunk async for chunk in response.aiter_raw()]


RESPONSES_TYPES = [
    "response.created",
    "response.in_progress",
    "response.output_item.added",
    "response.content_part.added",
    *["response.output_text.delta"] * 10,
    "response.output_text.done",
    "response.content_part.done",
    "response.output_item.done",
    "response.completed",
]

# (scenario, what the application must see live — and so on replay too)
CASES = [
    pytest.param(openai_responses, (RESPONSES_TYPES, HELLO_TEXT), id="openai-responses"),
    pytest.param(
        openai_responses_async, (RESPONSES_TYPES, HELLO_TEXT), id="openai-responses-async"
    ),
    pytest.param(openai_chat, (13, HELLO_TEXT, 19), id="openai-chat"),
    pytest.param(openai_chat_async, (13, HELLO_TEXT, 19), id="openai-chat-async"),
    pytest.param(anthropic_messages, None, id="anthropic-messages"),
    pytest.param(anthropic_messages_async, None, id="anthropic-messages-async"),
    pytest.param(
        httpx_sse_events,
        [(t, t) for t in RESPONSES_TYPES],
        id="httpx-sse",
    ),
    pytest.param(httpx_iter_raw, list(SPLIT_CHUNKS), id="httpx-iter-raw"),
    pytest.param(httpx2_iter_raw, list(SPLIT_CHUNKS), id="httpx2-iter-raw"),
    pytest.param(httpx2_aiter_raw, list(SPLIT_CHUNKS), id="httpx2-aiter-raw"),
]


@pytest.mark.parametrize(("scenario", "expected"), CASES)
def test_replay_offline_gives_what_the_client_saw_live(
    scenario: Scenario, expected: Any, cassette_path: Path
) -> None:
    with Origin(_routes()) as origin:
        url = origin.url
        live = run(scenario, url, replay.use_cassette(cassette_path))
        assert len(origin.requests) == 1
    # The origin is gone: anything not served from the cassette would fail to connect.
    replayed = run(scenario, url, replay.use_cassette(cassette_path, record_mode="none"))

    if expected is None:  # anthropic: the text and the end are what is known in advance
        assert live[1:] == (HELLO_TEXT, "end_turn")
    else:
        assert live == expected
    assert replayed == live


def _mismatch_in_chain(error: BaseException | None) -> replay.CassetteMismatchError | None:
    seen = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, replay.CassetteMismatchError):
            return error
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return None


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(
            lambda: openai.OpenAI(
                api_key=KEY, base_url="http://127.0.0.1:9/v1", max_retries=0
            ).responses.create(model="m", input="hi", stream=True),
            id="openai",
        ),
        pytest.param(
            lambda: anthropic.Anthropic(
                api_key=KEY, base_url="http://127.0.0.1:9", max_retries=0
            ).messages.create(model="m", max_tokens=8, messages=MESSAGES),  # type: ignore[arg-type]
            id="anthropic",
        ),
    ],
)
def test_unmatched_sdk_request_surfaces_the_mismatch(
    call: Callable[[], Any], cassette_path: Path
) -> None:
    with (
        pytest.raises(Exception) as raised,  # noqa: PT011 - each SDK wraps errors its own way
        replay.use_cassette(cassette_path, record_mode="none"),
    ):
        call()

    mismatch = _mismatch_in_chain(raised.value)
    assert mismatch is not None, f"no CassetteMismatchError behind {raised.value!r}"
    assert mismatch.method == "POST"
    assert mismatch.url.startswith("http://127.0.0.1:9/v1/")


# --- speed ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def timed_cassette(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    """A cassette of one ~0.3 s stream through the openai SDK, recorded from a live origin."""
    path = tmp_path_factory.mktemp("speed") / "timed.msgpack"
    with Origin({"/v1/responses": Script(chunks=responses_hello(scale=0.5))}) as origin:
        url = origin.url
        openai_responses(url, replay.use_cassette(path))
    return url, path


@pytest.mark.parametrize(
    ("speed", "factor"),
    [
        pytest.param(1, 1.0, id="1x"),
        pytest.param(10, 0.1, id="10x"),
        pytest.param("10x", 0.1, id="10x-string"),
        pytest.param(2.5, 0.4, id="2.5x"),
        pytest.param("instant", 0.0, id="instant"),
    ],
)
def test_replay_takes_the_recorded_time_divided_by_speed(
    timed_cassette: tuple[str, Path], speed: float | str, factor: float
) -> None:
    url, path = timed_cassette
    recorded = replay.Cassette.load(path).interactions[0].response
    clock = replay.VirtualClock()  # the waits, exactly, whatever else the machine runs

    session = replay.use_cassette(path, record_mode="none", speed=speed, clock=clock)
    output = openai_responses(url, session)

    assert output == (RESPONSES_TYPES, HELLO_TEXT)
    assert len(clock.sleeps) > 5 or factor == 0  # paced chunk by chunk, or not at all
    assert clock.now() == pytest.approx(recorded.end.at * factor, abs=1e-6)


def test_a_replay_at_1x_waits_the_recorded_time_on_the_real_clock(
    timed_cassette: tuple[str, Path],
) -> None:
    url, path = timed_cassette
    recorded = replay.Cassette.load(path).interactions[0].response

    started = time.monotonic()
    output = openai_responses(url, replay.use_cassette(path, record_mode="none", speed=1))
    elapsed = time.monotonic() - started

    assert output == (RESPONSES_TYPES, HELLO_TEXT)
    # Deadlines are absolute: it can't finish early; a busy machine only makes it late.
    assert recorded.end.at - 0.002 <= elapsed < recorded.end.at + 1.0
