"""Every httpx / httpx2 transport goes through the cassette: custom subclasses, wrappers of
another transport, and the openai SDK's aiohttp client; hosts let through with ignore_hosts.

Each case records live from a real local origin, then replays with the origin stopped: the
same bytes, the recorded chunks with increasing times, and no request reaching the origin.
An empty cassette in mode "none" refuses the same request before it leaves.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import httpx
import openai
import pytest
from pacing import assert_paced, due_times

import replay
from replay.testing import HELLO_TEXT, Origin, Script, responses_hello

CHUNKS = tuple((0.04, f"data: {n}\n\n".encode()) for n in range(5))  # 0.2 s, paced
BODY = b"".join(data for _, data in CHUNKS)


class Wrapping(httpx.BaseTransport):
    """A sync transport of the application's own, sending through an inner one."""

    def __init__(self) -> None:
        self.inner = httpx.HTTPTransport()
        self.sent = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.sent += 1
        return self.inner.handle_request(request)

    def close(self) -> None:
        self.inner.close()


class AsyncWrapping(httpx.AsyncBaseTransport):
    """An async transport of the application's own, sending through an inner one."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.sent = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.sent += 1
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


class Subclassed(httpx.AsyncHTTPTransport):
    """A subclass of a concrete transport, overriding its request method."""

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return await super().handle_async_request(request)


def fetch_sync(url: str) -> list[bytes]:
    with httpx.Client(transport=Wrapping()) as client, client.stream("GET", url) as response:
        return list(response.iter_raw())


async def fetch_async(url: str, transport: Any) -> list[bytes]:
    async with (
        httpx.AsyncClient(transport=transport) as client,
        client.stream("GET", url) as response,
    ):
        return [data async for data in response.aiter_raw()]


FETCHES = {
    "sync-wrapper": lambda url: fetch_sync(url),
    "async-wrapper": lambda url: anyio.run(fetch_async, url, AsyncWrapping()),
    "async-subclass": lambda url: anyio.run(fetch_async, url, Subclassed()),
}


@pytest.mark.parametrize("kind", list(FETCHES))
def test_a_custom_transport_records_and_replays_offline(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "custom.msgpack"
    with Origin({"/stream": Script(chunks=CHUNKS)}) as origin:
        url = origin.url + "/stream"
        with replay.use_cassette(path, record_mode="all"):
            live = FETCHES[kind](url)
        [interaction] = replay.Cassette.load(path).interactions  # recorded once, not twice
        hits = len(origin.requests)
    # Stamped as the origin sent them: no chunk before its time, none more than late.
    recorded = [(chunk.at, chunk.data) for chunk in interaction.response.chunks]
    assert_paced(recorded, due_times(CHUNKS, gaps=True))
    with replay.use_cassette(path, record_mode="none"):
        replayed = FETCHES[kind](url)
    assert b"".join(replayed) == b"".join(live) == BODY
    assert hits == 1


@pytest.mark.parametrize("kind", list(FETCHES))
def test_a_custom_transport_never_goes_live_in_mode_none(tmp_path: Path, kind: str) -> None:
    with Origin({"/stream": Script(chunks=CHUNKS)}) as origin:
        with (
            replay.use_cassette(tmp_path / "empty.msgpack", record_mode="none"),
            pytest.raises(replay.CassetteMismatchError),
        ):
            FETCHES[kind](origin.url + "/stream")
        assert origin.requests == []


def test_a_transport_class_defined_inside_a_session_is_covered(tmp_path: Path) -> None:
    with Origin({"/stream": Script(chunks=CHUNKS)}) as origin:
        with replay.use_cassette(tmp_path / "late.msgpack", record_mode="none"):

            class Late(httpx.BaseTransport):
                def handle_request(self, request: httpx.Request) -> httpx.Response:
                    return httpx.HTTPTransport().handle_request(request)

            with (
                httpx.Client(transport=Late()) as client,
                pytest.raises(replay.CassetteMismatchError),
            ):
                client.get(origin.url + "/stream")
        assert origin.requests == []


async def _openai_aiohttp(base_url: str) -> str:
    client = openai.AsyncOpenAI(
        api_key="sk-test", base_url=base_url, http_client=openai.DefaultAioHttpClient()
    )
    async with client:
        text = ""
        async for event in await client.responses.create(model="m", input="hi", stream=True):
            if event.type == "response.output_text.delta":
                text += event.delta
        return text


def test_openai_with_its_aiohttp_client_records_and_replays_the_responses_api(
    tmp_path: Path,
) -> None:
    path = tmp_path / "openai-aiohttp.msgpack"
    with Origin({"/v1/responses": Script(chunks=responses_hello(scale=0.05))}) as origin:
        base_url = origin.url + "/v1"
        with replay.use_cassette(path, record_mode="all"):
            live = anyio.run(_openai_aiohttp, base_url)
        hits = len(origin.requests)
    [interaction] = replay.Cassette.load(path).interactions
    assert len(interaction.response.chunks) > 1
    with replay.use_cassette(path, record_mode="none"):
        replayed = anyio.run(_openai_aiohttp, base_url)
    assert live == replayed == HELLO_TEXT
    assert hits == 1


# -- hosts let through ---------------------------------------------------------------------------


def test_an_ignored_host_goes_live_and_is_not_recorded(tmp_path: Path) -> None:
    path = tmp_path / "ignored.msgpack"
    with Origin({"/stream": Script(chunks=CHUNKS)}) as origin:
        for _ in range(2):
            with replay.use_cassette(path, record_mode="none", ignore_hosts=["127.0.0.1"]):
                assert httpx.get(origin.url + "/stream").content == BODY
        assert len(origin.requests) == 2
    assert not path.exists()


def test_ignore_localhost_lets_loopback_through(tmp_path: Path) -> None:
    path = tmp_path / "c.msgpack"
    with (
        Origin({"/stream": Script(chunks=CHUNKS)}) as origin,
        replay.use_cassette(path, record_mode="none", ignore_localhost=True),
    ):
        url = origin.url.replace("127.0.0.1", "localhost") + "/stream"
        assert httpx.get(url).content == BODY


def mismatch_on(tmp_path: Path, url: str) -> replay.CassetteMismatchError:
    """The error a GET of `url` meets against a cassette holding one api.example.test call."""
    path = tmp_path / "one-host.msgpack"
    request = replay.Request(method="GET", url="https://api.example.test/v1/x")
    replay.Cassette([replay.Interaction(request, replay.Response(status=200))]).save(path)
    transport = httpx.MockTransport(lambda request: httpx.Response(200))
    with (
        replay.use_cassette(path, record_mode="none"),
        httpx.Client(transport=transport) as client,
        pytest.raises(replay.CassetteMismatchError) as caught,
    ):
        client.get(url)
    return caught.value


def test_a_mismatch_on_a_host_the_cassette_never_saw_suggests_ignore_hosts(
    tmp_path: Path,
) -> None:
    error = mismatch_on(tmp_path, "https://telemetry.example.test/v1/traces")
    assert error.unseen_host == "telemetry.example.test"
    assert "ignore_hosts=['telemetry.example.test']" in str(error)


def test_a_mismatch_on_a_known_host_does_not_suggest_ignoring_it(tmp_path: Path) -> None:
    error = mismatch_on(tmp_path, "https://api.example.test/v1/y")
    assert error.unseen_host is None
    assert "ignore_hosts" not in str(error)


def test_openai_with_its_aiohttp_client_never_goes_live_in_mode_none(tmp_path: Path) -> None:
    with Origin({"/v1/responses": Script(chunks=responses_hello(scale=0.05))}) as origin:
        with (
            replay.use_cassette(tmp_path / "empty.msgpack", record_mode="none"),
            pytest.raises(replay.CassetteMismatchError),
        ):
            anyio.run(_openai_aiohttp, origin.url + "/v1")
        assert origin.requests == []


# -- google-genai: its async client sends through aiohttp when aiohttp is installed ----------

GEMINI_TEXTS = ("Hel", "lo ", "there")
GEMINI = tuple(
    (
        0.01,
        b'data: {"candidates": [{"content": {"parts": [{"text": "'
        + text.encode()
        + b'"}], "role": "model"}, "index": 0}]}\r\n\r\n',
    )
    for text in GEMINI_TEXTS
)
GEMINI_PATH = "/v1/models/gemini-test:streamGenerateContent"
#: google-genai subclasses aiohttp's ClientSession, which aiohttp warns about: not ours.
GENAI_SUBCLASSES_SESSION = pytest.mark.filterwarnings(
    "ignore:Inheritance class AiohttpClientSession:DeprecationWarning"
)


async def _gemini(base_url: str) -> str:
    from google import genai
    from google.genai import types

    client = genai.Client(api_key="gm-test-key", http_options=types.HttpOptions(base_url=base_url))
    text = ""
    async for chunk in await client.aio.models.generate_content_stream(
        model="gemini-test", contents="hi"
    ):
        text += chunk.text or ""
    return text


@GENAI_SUBCLASSES_SESSION
def test_google_genai_async_through_aiohttp_records_and_replays(tmp_path: Path) -> None:
    pytest.importorskip("aiohttp")  # the path under test: genai's async client on aiohttp
    path = tmp_path / "gemini.msgpack"
    with Origin({GEMINI_PATH: Script(chunks=GEMINI)}) as origin:
        base_url = origin.url
        with replay.use_cassette(path, record_mode="all"):
            live = anyio.run(_gemini, base_url)
        hits = len(origin.requests)
    [interaction] = replay.Cassette.load(path).interactions
    assert len(interaction.response.chunks) > 1
    assert "gm-test-key" not in repr(interaction)
    with replay.use_cassette(path, record_mode="none"):
        replayed = anyio.run(_gemini, base_url)
    assert live == replayed == "".join(GEMINI_TEXTS)
    assert hits == 1


@GENAI_SUBCLASSES_SESSION
def test_google_genai_async_never_goes_live_in_mode_none(tmp_path: Path) -> None:
    with Origin({GEMINI_PATH: Script(chunks=GEMINI)}) as origin:
        with (
            replay.use_cassette(tmp_path / "empty.msgpack", record_mode="none"),
            pytest.raises(replay.CassetteMismatchError),
        ):
            anyio.run(_gemini, origin.url)
        assert origin.requests == []
