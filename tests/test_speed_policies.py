"""Speed policies: the time to first token kept, gaps capped, phases, seeded jitter.

Each policy is checked on the virtual clock (the waits, exactly: no stopwatch), through real
clients (httpx and the openai SDK) replaying what they recorded from a loopback origin.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from hypothesis import given
from hypothesis import strategies as st

import replay
from replay.clock import INSTANT, VirtualClock, format_speed, speed_of
from replay.clock.policy import SpeedPolicy, parse_policy
from replay.errors import ConfigurationError
from replay.inspect import timing
from replay.testing import HELLO_TEXT, Origin, Script, responses_hello

KEY = "sk-test-key"
TIMES = [0.1, 0.3, 0.5, 0.9, 1.0]  # headers, three chunks, the end


# -- the policy as a value: recorded times -> played times -----------------------------------


def test_a_plain_factor_stays_a_factor() -> None:
    assert speed_of("10x") == 10.0
    assert speed_of("instant") == INSTANT
    assert speed_of(SpeedPolicy("2x")) == 2.0
    assert speed_of("rest=2x") == 2.0
    assert speed_of({"rest": "instant"}) == INSTANT


def test_ttft_recorded_keeps_the_time_to_first_token_and_plays_the_rest_instantly() -> None:
    policy = parse_policy("ttft=recorded,rest=instant")
    assert policy.timeline(TIMES, ttft=0.5) == [0.1, 0.3, 0.5, 0.5, 0.5]
    # Without a known first token, the first chunk's time is kept.
    assert policy.timeline(TIMES) == [0.1, 0.3, 0.3, 0.3, 0.3]


def test_ttft_with_a_factor_for_the_rest() -> None:
    played = parse_policy("ttft=recorded,rest=10x").timeline(TIMES, ttft=0.3)
    assert played == pytest.approx([0.1, 0.3, 0.32, 0.36, 0.37])


def test_max_gap_caps_every_gap_and_keeps_the_order() -> None:
    played = parse_policy("max_gap=0.05").timeline(TIMES)
    assert played == pytest.approx([0.05, 0.1, 0.15, 0.2, 0.25])
    assert played == sorted(played)


def test_max_gap_leaves_the_kept_time_to_first_token_alone() -> None:
    played = parse_policy("ttft=recorded,max_gap=0.05").timeline(TIMES, ttft=0.3)
    assert played == pytest.approx([0.1, 0.3, 0.35, 0.4, 0.45])


def test_per_phase_factors() -> None:
    played = parse_policy("headers=recorded,first=instant,body=2x").timeline(TIMES)
    assert played == pytest.approx([0.1, 0.1, 0.2, 0.4, 0.45])
    # `first` runs to the first complete event (here the second chunk's).
    played = parse_policy("first=recorded,rest=instant").timeline(TIMES, first_event=0.5)
    assert played == pytest.approx([0.0, 0.2, 0.4, 0.4, 0.4])
    # A phase not named plays at `rest`.
    assert parse_policy("headers=1,rest=instant").timeline(TIMES) == [0.1] * 5


def test_jitter_is_reproducible_by_its_seed_and_keeps_the_order() -> None:
    policy = parse_policy("rest=instant,jitter=0.01,seed=7")
    played = policy.timeline(TIMES)
    assert played == policy.timeline(TIMES) == parse_policy(str(policy)).timeline(TIMES)
    assert played == sorted(played)
    assert all(0 <= b - a <= 0.01 for a, b in itertools.pairwise([0.0, *played]))
    assert played != parse_policy("rest=instant,jitter=0.01,seed=8").timeline(TIMES)
    assert played != policy.timeline(TIMES, salt=1)  # each interaction its own draw


timelines = st.lists(st.floats(0, 100), min_size=2, max_size=30).map(sorted)
factors = st.sampled_from(["recorded", "instant", "10x", "0.5x", None])


@given(
    times=timelines,
    ttft=factors,
    body=factors,
    max_gap=st.sampled_from([None, 0.0, 0.05, 3.0]),
    jitter=st.sampled_from([None, 0.01, 1.0]),
    seed=st.integers(0, 10),
)
def test_every_policy_keeps_the_order_and_its_promises(
    times: list[float],
    ttft: str | None,
    body: str | None,
    max_gap: float | None,
    jitter: float | None,
    seed: int,
) -> None:
    policy = SpeedPolicy("3x", ttft=ttft, body=body, max_gap=max_gap, jitter=jitter, seed=seed)
    mark = times[len(times) // 2]
    played = policy.timeline(times, ttft=mark)
    assert len(played) == len(times)
    assert played == sorted(played)
    assert played[0] >= 0
    kept = [n for n, at in enumerate(times) if at <= mark]
    if ttft == "recorded":  # the time to first token exactly as recorded
        assert played[kept[-1]] == pytest.approx(times[kept[-1]])
    if max_gap is not None:
        gaps = [b - a for a, b in itertools.pairwise(played)]
        outside = gaps[kept[-1] :] if ttft is not None else gaps
        assert all(gap <= max_gap + 1e-9 for gap in outside)


def test_a_random_seed_is_drawn_once_and_written_in_the_spec() -> None:
    policy = parse_policy("jitter=0.01,seed=random")
    assert f"seed={policy.seed}" in str(policy)
    again = parse_policy(str(policy))
    assert again == policy
    assert again.timeline(TIMES) == policy.timeline(TIMES)


def test_the_spec_reads_back() -> None:
    for spec in (
        "ttft=recorded,rest=instant",
        "headers=recorded,first=instant,body=20x",
        "rest=10x,max_gap=0.05",
        "max_gap=0.05,jitter=0.02,seed=3",
    ):
        assert str(parse_policy(spec)) == spec
        assert format_speed(speed_of(spec)) == spec
    assert parse_policy("10x, max_gap=50ms") == parse_policy("rest=10x,max_gap=0.05")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("ttft=fast", "speed policy ttft='fast': not a factor"),
        ("max_gap=-1", "speed policy max_gap='-1': not seconds"),
        ("speed=1", "unknown key 'speed'"),
        ("ttft=1,ttft=2", "each key once"),
        ("jitter=0.1,seed=x", "seed='x': not a whole number"),
        ("rest=0", "not a factor from 0.001 up"),
    ],
)
def test_a_bad_spec_is_one_readable_line(spec: str, message: str) -> None:
    with pytest.raises(ConfigurationError) as raised:
        speed_of(spec)
    assert message in str(raised.value)
    assert "\n" not in str(raised.value)


def test_use_cassette_refuses_a_bad_policy_at_once() -> None:
    with pytest.raises(ConfigurationError, match="unknown key 'tfft'"):
        replay.use_cassette("never.msgpack", speed="tfft=recorded")


# -- through real clients, on the virtual clock ------------------------------------------------


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    """A Responses stream (~0.2 s) recorded through the openai SDK from a loopback origin."""
    path = tmp_path_factory.mktemp("policies") / "responses.msgpack"
    with Origin({"/v1/responses": Script(chunks=responses_hello(scale=0.3))}) as origin:
        url = origin.url
        assert responses_seen(url, replay.use_cassette(path), VirtualClock())[1] == HELLO_TEXT
        assert len(origin.requests) == 1
    return url, path


def responses_seen(
    url: str, session: replay.CassetteSession, clock: VirtualClock
) -> tuple[list[tuple[str, float]], str]:
    """Each event the openai SDK gave, with the clock reading when it came; the text."""
    client = openai.OpenAI(api_key=KEY, base_url=f"{url}/v1", max_retries=0)
    seen = []
    with client, session:
        for event in client.responses.create(model="m", input="hi", stream=True):
            seen.append((event.type, clock.now()))
            if event.type == "response.completed":
                text = event.response.output_text
    return seen, text


def play(path: Path, url: str, speed: Any) -> tuple[list[tuple[str, float]], str, VirtualClock]:
    clock = VirtualClock()
    session = replay.use_cassette(path, record_mode="none", speed=speed, clock=clock)
    seen, text = responses_seen(url, session, clock)
    return seen, text, clock


def first_delta(seen: list[tuple[str, float]]) -> float:
    return next(at for kind, at in seen if kind == "response.output_text.delta")


def test_openai_sdk_sees_the_recorded_ttft_and_the_rest_at_once(recorded: tuple[str, Path]) -> None:
    url, path = recorded
    response = replay.Cassette.load(path).interactions[0].response
    ttft = timing.ttft(response)
    assert ttft is not None
    assert ttft > 0.05

    seen, text, clock = play(path, url, "ttft=recorded,rest=instant")

    assert text == HELLO_TEXT
    assert first_delta(seen) == pytest.approx(ttft, abs=1e-9)
    assert clock.now() == pytest.approx(ttft, abs=1e-9)  # nothing waits after it
    # At 10x everywhere, by contrast, the TTFT is a tenth.
    seen, _, _ = play(path, url, 10)
    assert first_delta(seen) == pytest.approx(ttft / 10, abs=1e-9)


def test_openai_sdk_under_max_gap(recorded: tuple[str, Path]) -> None:
    url, path = recorded
    response = replay.Cassette.load(path).interactions[0].response
    steps = 2 + len(response.chunks)

    seen, text, clock = play(path, url, {"max_gap": 0.005})

    assert text == HELLO_TEXT
    assert all(gap <= 0.005 + 1e-9 for gap in clock.sleeps)
    assert clock.now() <= steps * 0.005 + 1e-9
    assert [at for _, at in seen] == sorted(at for _, at in seen)


def test_openai_sdk_with_seeded_jitter_is_reproducible(recorded: tuple[str, Path]) -> None:
    url, path = recorded
    policy = SpeedPolicy("instant", jitter=0.01, seed=11)
    first = play(path, url, policy)
    again = play(path, url, str(policy))
    other = play(path, url, "rest=instant,jitter=0.01,seed=12")

    assert first[1] == again[1] == other[1] == HELLO_TEXT
    assert first[2].sleeps == again[2].sleeps
    assert first[2].sleeps != other[2].sleeps


def test_httpx_per_phase_on_the_virtual_clock(recorded: tuple[str, Path]) -> None:
    url, path = recorded
    response = replay.Cassette.load(path).interactions[0].response
    clock = VirtualClock()
    session = replay.use_cassette(
        path, record_mode="none", speed="headers=recorded,first=recorded,body=instant", clock=clock
    )
    body = b""
    with session, httpx.Client() as client:
        sent = {"input": "hi", "model": "m", "stream": True}
        with client.stream("POST", f"{url}/v1/responses", json=sent) as answer:
            headers_at = clock.now()
            for piece in answer.iter_raw():
                body += piece
    assert body == response.body
    assert headers_at == pytest.approx(response.headers_at, abs=1e-9)
    assert clock.now() == pytest.approx(response.chunks.times[0], abs=1e-9)


def test_a_policy_in_a_virtual_time_session(recorded: tuple[str, Path]) -> None:
    url, path = recorded
    response = replay.Cassette.load(path).interactions[0].response
    ttft = timing.ttft(response)
    session = replay.use_cassette(path, record_mode="none", speed="virtual,ttft=recorded,rest=10x")
    client = openai.OpenAI(api_key=KEY, base_url=f"{url}/v1", max_retries=0)
    import time

    with client, session:
        started = time.monotonic()  # virtual time here: what the client's clock sees
        firsts = [
            time.monotonic() - started
            for event in client.responses.create(model="m", input="hi", stream=True)
            if event.type == "response.output_text.delta"
        ]
    assert ttft is not None
    # Virtual time: the waits pass, and what the process spent waiting otherwise (a few ms
    # at most on a loaded machine), never its computing.
    assert ttft - 1e-6 <= firsts[0] < ttft + 0.05


def test_the_pytest_option_takes_a_policy(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path),
         "--replay-speed", "ttft=recorded,rest=nonsense"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode != 0
    assert "--replay-speed: speed policy rest='nonsense': not a factor" in result.stderr


def test_serve_plays_a_policy(recorded: tuple[str, Path]) -> None:
    import anyio

    from replay.server.serve import SERVE_MATCH_ON, ReplayApp

    _, path = recorded
    cassette = replay.Cassette.load(path, match_on=SERVE_MATCH_ON)
    ttft = timing.ttft(cassette.interactions[0].response)
    clock = VirtualClock()
    app = ReplayApp(cassette, speed="ttft=recorded,rest=instant", clock=clock, log=lambda _: None)

    async def ask() -> bytes:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            sent = {"input": "hi", "model": "m", "stream": True}
            answer = await client.post("/v1/responses", json=sent)
            return answer.content

    assert anyio.run(ask) == cassette.interactions[0].response.body
    assert clock.now() == pytest.approx(ttft, abs=1e-9)


def test_a_failure_under_jitter_shows_the_seed(recorded: tuple[str, Path], tmp_path: Path) -> None:
    url, path = recorded
    spec = "rest=instant,jitter=0.001,seed=42"
    session = replay.use_cassette(path, record_mode="none", speed=spec, clock=VirtualClock())
    client = openai.OpenAI(api_key=KEY, base_url=f"{url}/v1", max_retries=0)
    with pytest.raises(AssertionError) as raised, session:  # noqa: PT012 - inside the session
        list(client.responses.create(model="m", input="hi", stream=True))
        raise AssertionError("the client's own check failed")
    assert f"replay: speed policy {spec} (seed 42" in "\n".join(raised.value.__notes__)

    test = tmp_path / "test_jittered.py"
    test.write_text(
        "import pytest\n\n"
        f"@pytest.mark.use_cassette({str(path)!r}, record_mode='none', speed={spec!r})\n"
        "def test_fails():\n"
        "    assert False\n"
    )
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(test)],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 1
    assert "replay: speed policy" in result.stdout
    assert f"speed policy {spec} (seed 42: the same spec replays the same times)" in result.stdout


def test_the_pytest_option_plays_a_policy(recorded: tuple[str, Path], tmp_path: Path) -> None:
    url, path = recorded
    ttft = timing.ttft(replay.Cassette.load(path).interactions[0].response)
    test = tmp_path / "test_paced.py"
    test.write_text(
        "import time, openai, pytest\n\n"
        f"@pytest.mark.use_cassette({str(path)!r}, record_mode='none')\n"
        "def test_ttft_kept():\n"
        f"    client = openai.OpenAI(api_key='k', base_url='{url}/v1', max_retries=0)\n"
        "    started = time.monotonic()\n"
        "    stream = client.responses.create(model='m', input='hi', stream=True)\n"
        "    times = [(e.type, time.monotonic() - started) for e in stream]\n"
        "    first = next(at for kind, at in times if kind.endswith('.delta'))\n"
        f"    assert {ttft!r} <= first < {ttft!r} + 0.05\n"
        "    assert times[-1][1] == pytest.approx(first, abs=0.005)\n"
    )
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(test),
         "--replay-speed", "virtual,ttft=recorded,rest=instant"],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout


def test_the_first_token_of_a_long_stream_is_found_past_its_first_chunks() -> None:
    from replay.engine.stepper import played_times

    def chunk(n: int, delta: dict[str, str]) -> replay.Chunk:
        choices = [{"index": 0, "delta": delta}]
        body = {"id": "c", "object": "chat.completion.chunk", "choices": choices}
        return replay.Chunk(0.01 * (n + 1), f"data: {json.dumps(body)}\n\n".encode())

    chunks = [chunk(n, {"role": "assistant"}) for n in range(300)]
    chunks += [chunk(300 + n, {"content": "hi"}) for n in range(10)]
    response = replay.Response(
        status=200, headers=[("content-type", "text/event-stream")], chunks=chunks
    )
    ttft = timing.ttft(response)
    assert ttft == pytest.approx(3.01)
    played = played_times(response, parse_policy("ttft=recorded,rest=instant"))
    assert played[301] == pytest.approx(ttft)
    assert played[-1] == pytest.approx(ttft)
