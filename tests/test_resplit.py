"""The seeded re-split fault: the recorded bytes split where parsers break, reproducibly.

Real clients (the openai SDK, httpx-sse) record a stream with multi-byte characters from a
loopback origin, then replay it offline under `resplit(seed=N)` for several seeds: each
assembles the same text. A deliberately fragile parser fails, and the seed that broke it is
in the failure: on the exception leaving `use_cassette`, and in the pytest report.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import httpx
import httpx_sse
import openai
import pytest
from hypothesis import given
from hypothesis import strategies as st

import replay
from replay import faults
from replay.errors import ConfigurationError
from replay.faults.resplit import points
from replay.testing import Origin, Script, chat_hello

KEY = "sk-test-key"
TOKENS = ["Hé", "llo", " wörld", " ✓", " 日本", "語", " 🎉"]
TEXT = "".join(TOKENS)
SEEDS = range(6)
MESSAGES = [{"role": "user", "content": "hi"}]


def _crlf_events() -> list[tuple[float, bytes]]:
    events = [
        f"id: {n}\r\ndata: {json.dumps({'t': t}, ensure_ascii=False)}\r\n\r\n"
        for n, t in enumerate(TOKENS)
    ]
    return [(0.005, event.encode()) for event in events]  # fmt: skip


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    """A Chat Completions stream (openai SDK) and a CRLF-framed SSE stream (httpx-sse),
    recorded from a loopback origin."""
    path = tmp_path_factory.mktemp("resplit") / "streams.msgpack"
    routes = {
        "/v1/chat/completions": Script(chunks=chat_hello(scale=0.01, tokens=TOKENS)),
        "/crlf": Script(chunks=_crlf_events()),
    }
    with Origin(routes) as origin:
        url = origin.url
        assert chat_text(url, replay.use_cassette(path)) == TEXT
        assert sse_text(url, replay.use_cassette(path, record_mode="new_episodes")) == TEXT
        assert len(origin.requests) == 2
    return url, path


def chat_text(url: str, session: replay.CassetteSession) -> str:
    client = openai.OpenAI(api_key=KEY, base_url=f"{url}/v1", max_retries=0)
    with client, session:
        stream = client.chat.completions.create(model="m", messages=MESSAGES, stream=True)  # type: ignore[arg-type]
        return "".join(c.choices[0].delta.content or "" for c in stream if c.choices)


def sse_text(url: str, session: replay.CassetteSession) -> str:
    with (
        session,
        httpx.Client() as client,
        httpx_sse.connect_sse(client, "GET", f"{url}/crlf") as source,
    ):
        return "".join(json.loads(event.data)["t"] for event in source.iter_sse())


@pytest.mark.parametrize("seed", SEEDS)
def test_the_openai_sdk_assembles_the_same_text_under_every_seed(
    recorded: tuple[str, Path], seed: int
) -> None:
    url, path = recorded
    fault = faults.resplit(seed=seed)
    session = replay.use_cassette(path, record_mode="none", faults=[fault])
    assert chat_text(url, session) == TEXT
    assert session.injector.injected() == (fault,)


@pytest.mark.parametrize("seed", SEEDS)
def test_httpx_sse_assembles_the_same_text_under_every_seed(
    recorded: tuple[str, Path], seed: int
) -> None:
    url, path = recorded
    session = replay.use_cassette(path, record_mode="none", faults=[f"resplit(seed={seed})"])
    assert sse_text(url, session) == TEXT


def _responses(path: Path) -> list[replay.Response]:
    return [i.response for i in replay.Cassette.load(path).interactions]


def test_the_split_falls_inside_characters_and_separators_and_merges_events(
    recorded: tuple[str, Path],
) -> None:
    _, path = recorded
    inside_character = inside_separator = merged = False
    for response in _responses(path):
        for seed in SEEDS:
            played = faults.resplit(seed=seed).apply(response)
            assert played.body == response.body
            assert played.end == response.end
            assert list(played.chunks.times) == sorted(played.chunks.times)
            for chunk in played.chunks.payloads:
                try:
                    chunk.decode()
                except UnicodeDecodeError:
                    inside_character = True
                cut = chunk.endswith((b"\r", b"\r\n\r", b"\n")) and not chunk.endswith(b"\n\n")
                inside_separator |= cut
                merged |= chunk.count(b"data:") >= 2
    assert inside_character
    assert inside_separator
    assert merged


def test_the_same_seed_splits_the_same_way_and_another_seed_otherwise(
    recorded: tuple[str, Path],
) -> None:
    _, path = recorded
    response = _responses(path)[0]
    assert points(response, 3) == points(response, 3)
    assert len({tuple(points(response, seed)) for seed in SEEDS}) > 1
    every = faults.resplit(at=(), every=4).apply(response)
    assert all(len(chunk) == 4 for chunk in every.chunks.payloads[:-1])


def test_the_spec_reads_back_and_bad_ones_are_one_line() -> None:
    for spec in ("resplit(seed=7)", "resplit(seed=0, at='utf8,events', every=5)"):
        assert repr(faults.parse(spec)) == spec
    with pytest.raises(ConfigurationError, match="at must name some of utf8"):
        faults.parse("resplit(at='emoji')")
    with pytest.raises(ConfigurationError, match="would split nowhere"):
        faults.resplit(at=())


def fragile_text(url: str, session: replay.CassetteSession) -> str:
    """A parser that trusts each network read to hold whole characters and whole events."""
    text = ""
    with session, httpx.Client() as client, client.stream("GET", f"{url}/crlf") as response:
        for chunk in response.iter_raw():
            for event in chunk.decode().split("\r\n\r\n"):
                if event:
                    data = event.split("data: ", 1)[1]
                    text += json.loads(data)["t"]
    return text


def test_a_fragile_parser_fails_with_the_seed_in_its_message(recorded: tuple[str, Path]) -> None:
    url, path = recorded
    assert fragile_text(url, replay.use_cassette(path, record_mode="none")) == TEXT
    with pytest.raises(Exception) as raised:  # noqa: PT011 - whatever the parser raises
        fragile_text(url, replay.use_cassette(path, record_mode="none", faults=["resplit(seed=3)"]))
    notes = "\n".join(getattr(raised.value, "__notes__", []))
    assert "replay: resplit(seed=3): re-split inside UTF-8 characters" in notes


def test_the_pytest_report_names_the_seed(recorded: tuple[str, Path], tmp_path: Path) -> None:
    url, path = recorded
    test = tmp_path / "test_fragile.py"
    test.write_text(
        textwrap.dedent(f"""
            import json, httpx, pytest

            @pytest.mark.use_cassette({str(path)!r}, record_mode="none", faults=["resplit(seed=5)"])
            def test_fragile():
                with httpx.Client() as client, client.stream("GET", "{url}/crlf") as response:
                    for chunk in response.iter_raw():
                        chunk.decode()
                        assert chunk.endswith(b"\\r\\n\\r\\n")
        """)
    )
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(test)],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 1, result.stdout
    assert "replay: faults injected" in result.stdout
    assert "resplit(seed=5): re-split" in result.stdout


@given(
    texts=st.lists(st.text(min_size=1, max_size=12), min_size=1, max_size=8),
    seed=st.integers(0, 1000),
    every=st.integers(0, 5),
)
def test_any_stream_keeps_its_bytes_order_and_end(texts: list[str], seed: int, every: int) -> None:
    events = [f"data: {text}\r\n\r\n".encode() for text in texts]
    response = replay.Response(
        status=200,
        headers=[("content-type", "text/event-stream")],
        chunks=[replay.Chunk(0.1 * (n + 1), event) for n, event in enumerate(events)],
    )
    played = faults.resplit(seed=seed, every=every).apply(response)
    assert played.body == response.body
    assert played.end == response.end
    assert list(played.chunks.times) == sorted(played.chunks.times)
    assert played.chunks.times[-1] == response.chunks.times[-1]
    assert all(played.chunks.payloads)
