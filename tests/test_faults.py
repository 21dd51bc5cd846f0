"""Faults at replay (replay.faults): each fault's pure transform, its specs, its behaviour
through the transports and sessions (timing on a VirtualClock, sync and async alike), and
what the real openai and anthropic SDKs do when a recorded stream breaks."""

from __future__ import annotations

import json
import sys
import textwrap
import time
import zlib
from pathlib import Path
from typing import Any

import anthropic
import anyio
import httpx
import httpx2
import openai
import pytest
from sdk_errors import raises_through_anthropic

import replay
from replay import Chunk, Response, VirtualClock, faults
from replay.dialects import anthropic as anthropic_dialect
from replay.dialects import responses
from replay.faults import Outcome
from replay.run.child import replay_command
from replay.run.site import ENV_CASSETTE, ENV_FAULTS, start_from_environment
from replay.testing import Origin, Script, anthropic_hello, responses_hello

pytest_plugins = ["pytester"]

URL = "https://api.example.test/v1/stream"
SSE = (("content-type", "text/event-stream"),)
# Three events over four chunks: the second chunk ends an event and starts the next one.
EVENTS = (b"data: one\n\n", b"data: two\n\ndata: th", b"ree\n\n", b": bye\n\n")


def recorded(chunks: tuple[bytes, ...] = EVENTS, gap: float = 1.0, **options: Any) -> Response:
    """A response whose chunk i arrives at (i + 1) * gap, after headers at 0.5 * gap."""
    timed = [Chunk((i + 1) * gap, data) for i, data in enumerate(chunks)]
    return Response(status=200, headers=SSE, headers_at=0.5 * gap, chunks=timed, **options)


def cassette_of(*responses: Response) -> replay.Cassette:
    request = replay.Request(method="GET", url=URL)
    return replay.Cassette([replay.Interaction(request, response) for response in responses])


# --- each fault as a pure function of the response --------------------------------------------


@pytest.mark.parametrize(
    ("after", "body"),
    [(0, b""), (1, b"data: one\n\n"), (3, b"".join(EVENTS[:3])), (9, b"".join(EVENTS))],
)
def test_cut_after_events_keeps_exactly_those_events_then_drops(after: int, body: bytes) -> None:
    cut = faults.cut(after_events=after).apply(recorded())

    assert cut.body == body
    assert cut.end.error == "RemoteProtocolError"
    assert [e.data for e in cut.events()] == ["one", "two", "three"][:after]


@pytest.mark.parametrize("size", range(len(b"".join(EVENTS)) + 2))
def test_cut_after_bytes_keeps_exactly_those_bytes_at_their_times(size: int) -> None:
    original = recorded()
    cut = faults.cut(after_bytes=size).apply(original)

    assert cut.body == original.body[:size]
    assert cut.end.at == (cut.chunks.times[-1] if cut.chunks else original.headers_at)
    assert all(at in original.chunks.times for at in cut.chunks.times)


def test_cut_of_a_gzip_body_counts_raw_bytes_and_events_by_chunk() -> None:
    compressor = zlib.compressobj(wbits=zlib.MAX_WBITS | 16)  # gzip, flushed at each chunk
    chunks = tuple(
        compressor.compress(data) + compressor.flush(zlib.Z_SYNC_FLUSH) for data in EVENTS
    )
    headers = (*SSE, ("content-encoding", "gzip"))
    original = Response(
        status=200, headers=headers, chunks=[Chunk(1.0 + i, c) for i, c in enumerate(chunks)]
    )

    assert faults.cut(after_bytes=7).apply(original).body == original.body[:7]
    by_events = faults.cut(after_events=1).apply(original)
    assert by_events.chunks.payloads == chunks[:1]


def test_stall_delays_everything_after_the_event_and_keeps_the_bytes() -> None:
    outcome = faults.stall(after_events=2, seconds=30).transform(Outcome(response=recorded()), 0)
    stalled = outcome.response

    assert stalled.body == recorded().body
    # Chunk 1 holds the end of event 2 and the start of event 3: split at the boundary.
    assert stalled.chunks.payloads[1:3] == (b"data: two\n\n", b"data: th")
    assert stalled.chunks.times == (1.0, 2.0, 32.0, 33.0, 34.0)
    assert stalled.end.at == 34.0
    assert outcome.stall_steps() == (2,)


def test_rechunk_to_single_bytes_keeps_bytes_and_each_recorded_chunk_time() -> None:
    original = responses.stream("Hello there, friend.").response
    rechunked = faults.rechunk(1).apply(original)

    assert rechunked.body == original.body
    assert set(map(len, rechunked.chunks.payloads)) == {1}
    assert set(original.chunks.times) <= set(rechunked.chunks.times)
    assert rechunked.events() == original.events()  # one event per chunk: same times too


def test_rechunk_random_is_reproducible_from_its_seed() -> None:
    original = responses.stream("Hello there, friend. How are you?").response
    sizes = {
        seed: [len(p) for p in faults.rechunk("random", seed=seed).apply(original).chunks.payloads]
        for seed in (1, 1, 2)
    }
    again = faults.rechunk("random", seed=1).apply(original)

    assert [len(p) for p in again.chunks.payloads] == sizes[1]
    assert sizes[1] != sizes[2]
    assert again.body == original.body
    assert [e.data for e in again.events()] == [e.data for e in original.events()]


def test_slow_stretches_every_time() -> None:
    slowed = faults.slow(2).apply(recorded())

    assert slowed.headers_at == 1.0
    assert slowed.chunks.times == (2.0, 4.0, 6.0, 8.0)
    assert slowed.end.at == 8.0


@pytest.mark.parametrize("seed", [0, 7])
def test_jitter_moves_chunks_within_its_range_reproducibly(seed: int) -> None:
    original = recorded(gap=0.1)
    jittered = faults.jitter(20, seed=seed).apply(original)

    assert jittered == faults.jitter(20, seed=seed).apply(original)
    assert jittered.chunks.payloads == original.chunks.payloads
    assert list(jittered.chunks.times) == sorted(jittered.chunks.times)
    for moved, at in zip(jittered.chunks.times, original.chunks.times, strict=True):
        assert abs(moved - at) <= 0.020 + 1e-9
    assert faults.jitter(0).apply(original) == original


def test_status_answers_for_the_first_attempts_then_the_recording() -> None:
    fault = faults.status(429, headers={"retry-after": "0"}, times=2)
    answers = [fault.apply(recorded(), attempt) for attempt in range(3)]

    assert [a.status for a in answers] == [429, 429, 200]
    assert answers[0].header("retry-after") == "0"
    assert json.loads(answers[0].body)["error"]["code"] == 429
    assert answers[2] == recorded()


# --- specs, descriptions, targets -------------------------------------------------------------

ROUND_TRIPS = [
    "cut(after_events=5)",
    "cut(after_bytes=100, index=1)",
    "stall(after_events=3, seconds=30.0)",
    "status(429, headers={'retry-after': '0'}, times=1)",
    "status(500, body=b'oops')",
    "rechunk(1)",
    "rechunk('random', seed=3)",
    "slow(2.0)",
    "jitter(20.0, seed=4)",
]


@pytest.mark.parametrize("spec", ROUND_TRIPS)
def test_repr_is_the_spec_that_parses_back(spec: str) -> None:
    fault = faults.parse(spec)

    assert repr(fault) == spec
    assert faults.parse(repr(fault)) == fault


@pytest.mark.parametrize(
    ("fault", "words"),
    [
        (faults.cut(after_events=5), "cut the connection after 5 events (every interaction)"),
        (
            faults.stall(after_events=1, seconds=2.5, index=0),
            "stall 2.5 s after 1 events (interaction 0)",
        ),
        (
            faults.status(529, times=1),
            "answer status 529 for the first 1 attempt(s) (every interaction)",
        ),
        (faults.rechunk(1), "rechunk into 1-byte chunks (every interaction)"),
        (faults.slow(3), "slow down 3x (every interaction)"),
        (faults.jitter(5, seed=2), "jitter ±5 ms (seed 2) (every interaction)"),
    ],
)
def test_describe_says_what_the_fault_does(fault: faults.Fault, words: str) -> None:
    assert fault.describe() == words


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        ("cut(after_events=five)", "literals"),
        ("__import__('os').system('true')", "NAME(key=value"),
        ("explode()", "unknown fault 'explode'"),
        ("cut(after_events=1, after_bytes=2)", "exactly one"),
        ("status(429, where=1)", "where="),
        ("rechunk(0)", "at least 1"),
        ("slow(-1)", "> 0"),
        ("cut(after_events=1", "NAME(key=value"),
        ("stall(seconds=1)", "after_events"),
    ],
)
def test_a_bad_spec_is_a_configuration_error_naming_it(spec: str, problem: str) -> None:
    with pytest.raises(replay.ConfigurationError, match="bad fault") as raised:
        faults.parse(spec)

    assert repr(spec) in str(raised.value)
    assert problem in str(raised.value)


def test_targets_pick_interactions_by_index_and_request() -> None:
    request = replay.Request(method="POST", url=URL)
    by_index = faults.cut(after_events=1, index=1)
    by_request = faults.cut(after_events=1, where=lambda r: r.method == "GET")

    assert [by_index.applies_to(i, request) for i in range(3)] == [False, True, False]
    assert not by_request.applies_to(0, request)
    assert "requests where <lambda>" in by_request.describe()


# --- through the transports: bytes, errors and times on a VirtualClock -------------------------

RUNNERS = ["sync", "asyncio", "trio"]
LIBRARIES = {"httpx": httpx, "httpx2": httpx2}


def play(
    library: str, runner: str, cassette: replay.Cassette, fault_list: list[Any], **options: Any
) -> tuple[list[bytes], list[float], Exception | None, VirtualClock]:
    """Replay the next answer at speed 1 on a VirtualClock: chunks, their times, the error."""
    module, clock = LIBRARIES[library], VirtualClock()
    timeout = options.pop("timeout", 5.0)
    seen: tuple[list[bytes], list[float]] = ([], [])

    def sync() -> Exception | None:
        transport = replay.ReplayTransport(cassette, speed=1, clock=clock, faults=fault_list)
        with module.Client(transport=transport, timeout=timeout) as client:
            try:
                with client.stream("GET", URL) as response:
                    for piece in response.iter_raw():
                        seen[0].append(piece)
                        seen[1].append(clock.now())
            except module.TransportError as error:
                return error
        return None

    async def asynchronous() -> Exception | None:
        transport = replay.AsyncReplayTransport(cassette, speed=1, clock=clock, faults=fault_list)
        async with module.AsyncClient(transport=transport, timeout=timeout) as client:
            try:
                async with client.stream("GET", URL) as response:
                    async for piece in response.aiter_raw():
                        seen[0].append(piece)
                        seen[1].append(clock.now())
            except module.TransportError as error:
                return error
        return None

    error = sync() if runner == "sync" else anyio.run(asynchronous, backend=runner)
    return seen[0], seen[1], error, clock


@pytest.mark.parametrize("library", LIBRARIES)
@pytest.mark.parametrize("runner", RUNNERS)
def test_a_cut_raises_the_libraries_own_error_after_exactly_those_bytes(
    library: str, runner: str
) -> None:
    chunks, _, error, _ = play(library, runner, cassette_of(recorded()), ["cut(after_bytes=15)"])

    assert b"".join(chunks) == recorded().body[:15]
    assert type(error) is LIBRARIES[library].RemoteProtocolError


@pytest.mark.parametrize("runner", RUNNERS)
def test_a_stall_longer_than_the_read_timeout_times_out_when_the_read_would(runner: str) -> None:
    stall = faults.stall(after_events=1, seconds=30)
    chunks, times, error, clock = play("httpx2", runner, cassette_of(recorded()), [stall])

    assert chunks == [EVENTS[0]]
    assert type(error) is httpx2.ReadTimeout
    assert clock.now() == pytest.approx(1.0 + 5.0)  # the last chunk, then the 5 s read timeout
    assert times == [1.0]


@pytest.mark.parametrize("timeout", [60.0, None])
@pytest.mark.parametrize("runner", RUNNERS)
def test_a_stall_within_the_read_timeout_only_delays_the_rest(
    runner: str, timeout: float | None
) -> None:
    stall = faults.stall(after_events=1, seconds=30)
    chunks, times, error, _ = play(
        "httpx", runner, cassette_of(recorded()), [stall], timeout=timeout
    )

    assert error is None
    assert b"".join(chunks) == recorded().body
    assert times == pytest.approx([1.0, 32.0, 33.0, 34.0])


def test_a_stall_at_instant_speed_times_out_without_waiting() -> None:
    clock = VirtualClock()
    transport = replay.ReplayTransport(
        cassette_of(recorded()),
        speed="instant",
        clock=clock,
        faults=["stall(after_events=2, seconds=9)"],
    )
    with (
        httpx.Client(transport=transport, timeout=1.0) as client,
        client.stream("GET", URL) as response,
        pytest.raises(httpx.ReadTimeout),
    ):
        response.read()

    assert clock.sleeps == []


@pytest.mark.parametrize("runner", RUNNERS)
def test_slow_jitter_and_rechunk_play_in_both_twins_alike(runner: str) -> None:
    fault_list = ["rechunk('random', seed=5)", "slow(1.5)", "jitter(300.0, seed=1)"]
    expected = recorded()
    for fault in faults.coerce(fault_list):
        expected = fault.apply(expected)

    chunks, times, error, _ = play("httpx", runner, cassette_of(recorded()), fault_list)

    assert error is None
    assert chunks == list(expected.chunks.payloads)
    assert times == pytest.approx(list(expected.chunks.times))


def test_a_status_attempt_does_not_use_the_interaction_up() -> None:
    cassette = cassette_of(recorded())
    transport = replay.ReplayTransport(
        cassette, speed="instant", faults=[faults.status(503, times=1)]
    )
    with httpx.Client(transport=transport) as client:
        first, second = client.get(URL), client.get(URL)

    assert (first.status_code, second.status_code) == (503, 200)
    assert second.content == recorded().body
    assert transport.injector.attempts(0) == 2
    assert cassette.play_count == 1


def test_faults_target_only_their_interactions() -> None:
    cassette = cassette_of(recorded(), recorded())
    transport = replay.ReplayTransport(
        cassette, speed="instant", faults=["cut(after_events=1, index=1)"]
    )
    with httpx.Client(transport=transport) as client:
        whole = client.get(URL).content
        with pytest.raises(httpx.RemoteProtocolError):
            client.get(URL)

    assert whole == recorded().body


def test_the_report_lists_only_the_faults_injected_as_injected() -> None:
    cassette = cassette_of(recorded(), recorded())
    transport = replay.ReplayTransport(
        cassette,
        speed="instant",
        faults=["status(503, times=1, index=0)", "slow(2.0)", "cut(after_events=1, index=1)"],
    )
    with httpx.Client(transport=transport) as client:
        codes = [client.get(URL).status_code for _ in range(2)]

    assert codes == [503, 200]  # the status answered alone, then the recording played, slowed
    assert transport.injector.injected() == (faults.status(503, times=1, index=0), faults.slow(2))
    assert transport.injector.report() == [
        "status(503, times=1, index=0): answer status 503 for the first 1 attempt(s) "
        "(interaction 0)",
        "slow(2.0): slow down 2x (every interaction)",
        "attempts per interaction: #0: 2",
        "cut(after_events=1, index=1): cut the connection after 1 events (interaction 1): "
        "not injected (nothing it targets was replayed)",
    ]


# --- sessions, the pytest marker, `replay run` --------------------------------------------------


def test_a_session_applies_its_faults_and_counts_answered_interactions_as_played(
    tmp_path: Path,
) -> None:
    path = tmp_path / "c.msgpack"
    cassette_of(recorded()).save(path)
    session = replay.use_cassette(path, record_mode="none", faults=["status(429)"])

    with session as cassette, httpx.Client() as client:
        codes = [client.get(URL).status_code for _ in range(3)]

    assert codes == [429, 429, 429]
    assert session.injector.report() == [
        "status(429): answer status 429 always (every interaction)",
        "attempts per interaction: #0: 3",
    ]
    assert cassette.all_played


def test_the_pytest_marker_passes_faults_to_the_session(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    path = tmp_path / "c.msgpack"
    cassette_of(recorded()).save(path)
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(
        textwrap.dedent(f"""
        import httpx, pytest

        @pytest.mark.use_cassette({str(path)!r}, record_mode="none", faults=["cut(after_events=2)"])
        def test_cut():
            with httpx.Client() as client, pytest.raises(httpx.RemoteProtocolError):
                client.get({URL!r})
        """)
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=60)

    result.assert_outcomes(passed=1)


PROGRAM = f"""
import httpx
with httpx.Client() as client, client.stream("GET", {URL!r}) as response:
    try:
        for chunk in response.iter_raw():
            print(chunk)
    except httpx.RemoteProtocolError as error:
        print("dropped:", type(error).__name__)
"""


def test_replay_run_applies_faults_in_the_program(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "c.msgpack"
    cassette_of(recorded()).save(path)
    program = tmp_path / "app.py"
    program.write_text(PROGRAM)

    code = replay_command(path, [sys.executable, str(program)], faults=["cut(after_bytes=4)"])

    assert code == 0
    assert capfd.readouterr().out.splitlines() == ["b'data'", "dropped: RemoteProtocolError"]


def test_faults_that_cannot_cross_processes_are_refused_before_the_run(tmp_path: Path) -> None:
    path = tmp_path / "c.msgpack"
    cassette_of(recorded()).save(path)
    where = faults.cut(after_events=1, where=lambda request: True)

    with pytest.raises(replay.ConfigurationError, match="where="):
        replay_command(path, ["true"], faults=[where])
    with pytest.raises(replay.ConfigurationError, match="bad fault 'cut"):
        replay_command(path, ["true"], faults=["cut"])


def test_the_child_refuses_a_garbled_fault_list(tmp_path: Path) -> None:
    environ = {ENV_CASSETTE: str(tmp_path / "c.msgpack"), ENV_FAULTS: "cut"}

    with pytest.raises(replay.ConfigurationError, match=ENV_FAULTS):
        start_from_environment(environ)


# --- the real SDKs --------------------------------------------------------------------------

KEY = "sk-test"
MESSAGES = [{"role": "user", "content": "hi"}]
QUICK_RETRY = {"retry-after-ms": "1", "retry-after": "0"}  # openai/anthropic wait 1 ms


@pytest.fixture(scope="module")
def sdk_cassettes(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path, Path]:
    """A Responses API and an Anthropic stream, each recorded through its SDK from the origin."""
    folder = tmp_path_factory.mktemp("sdk-faults")
    routes = {
        "/v1/responses": Script(chunks=responses_hello(scale=0.01)),
        "/v1/messages": Script(chunks=anthropic_hello(scale=0.01)),
    }
    with Origin(routes) as origin:
        url = origin.url
        with replay.use_cassette(folder / "openai.msgpack"):
            openai_run(url, "sync")
        with replay.use_cassette(folder / "anthropic.msgpack"):
            anthropic_run(url)
    return url, folder / "openai.msgpack", folder / "anthropic.msgpack"


def openai_run(url: str, runner: str, seen: list[Any] | None = None, **client: Any) -> list[Any]:
    """The events a Responses API stream gives the openai SDK (sync or asyncio), also
    appended to `seen` as they come."""
    options = {"api_key": KEY, "base_url": f"{url}/v1", "max_retries": 0, **client}
    events = [] if seen is None else seen
    if runner == "sync":
        with openai.OpenAI(**options) as sync_client:
            events.extend(sync_client.responses.create(model="m", input="hi", stream=True))
        return events

    async def run() -> list[Any]:
        async with openai.AsyncOpenAI(**options) as async_client:
            stream = await async_client.responses.create(model="m", input="hi", stream=True)
            async for event in stream:
                events.append(event)
        return events

    return anyio.run(run)


def anthropic_run(url: str, seen: list[Any] | None = None, **client: Any) -> tuple[str, Any]:
    """The final text and stop reason the anthropic SDK builds; events go to `seen`."""
    options = {"api_key": KEY, "base_url": url, "max_retries": 0, **client}
    with (
        anthropic.Anthropic(**options) as sdk,
        sdk.messages.stream(model="m", max_tokens=64, messages=MESSAGES) as stream,  # type: ignore[arg-type]
    ):
        for event in stream:
            if seen is not None:
                seen.append(event)
        final = stream.get_final_message()
    return final.content[0].text, final.stop_reason  # type: ignore[union-attr]


def replaying(path: Path, *fault_list: Any, **options: Any) -> replay.CassetteSession:
    return replay.use_cassette(path, record_mode="none", faults=list(fault_list), **options)


@pytest.mark.parametrize("runner", ["sync", "asyncio"])
def test_openai_retries_a_429_and_then_streams_the_recording(
    sdk_cassettes: tuple[str, Path, Path], runner: str
) -> None:
    url, path, _ = sdk_cassettes
    with replaying(path):
        expected = openai_run(url, runner)
    session = replaying(path, faults.status(429, headers=QUICK_RETRY, times=1))

    with session as cassette:
        events = openai_run(url, runner, max_retries=2)

    assert session.injector.attempts(0) == 2  # the 429, then the retry
    assert cassette.play_count == 1
    assert events == expected
    assert events[-1].type == "response.completed"


def test_anthropic_retries_an_overloaded_529(sdk_cassettes: tuple[str, Path, Path]) -> None:
    url, _, path = sdk_cassettes
    with replaying(path) as cassette:
        expected = anthropic_run(url)
    assert cassette.play_count == 1
    session = replaying(path, faults.status(529, headers=QUICK_RETRY, times=2))

    with session:
        answer = anthropic_run(url, max_retries=2)

    assert answer == expected
    assert session.injector.attempts(0) == 3


@pytest.mark.parametrize("runner", ["sync", "asyncio"])
def test_openai_raises_a_connection_error_on_a_cut_stream(
    sdk_cassettes: tuple[str, Path, Path], runner: str
) -> None:
    url, path, _ = sdk_cassettes
    seen: list[Any] = []
    with replaying(path, "cut(after_events=5)"), pytest.raises(openai.APIConnectionError):
        openai_run(url, runner, seen)

    assert [event.sequence_number for event in seen] == [0, 1, 2, 3, 4]


def test_anthropic_yields_the_events_before_a_cut_then_raises_the_transport_error(
    sdk_cassettes: tuple[str, Path, Path],
) -> None:
    url, _, path = sdk_cassettes
    seen: list[Any] = []
    with (
        replaying(path, faults.cut(after_events=5)),
        raises_through_anthropic(httpx2.RemoteProtocolError),
    ):
        anthropic_run(url, seen)

    # message_start, content_block_start, ping (which the SDK does not pass on), two deltas
    assert [event.type for event in seen if event.type != "text"] == [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_delta",
    ]


@pytest.mark.parametrize("runner", ["sync", "asyncio"])
def test_openai_times_out_on_a_stall_longer_than_its_read_timeout(
    sdk_cassettes: tuple[str, Path, Path], runner: str
) -> None:
    url, path, _ = sdk_cassettes
    third_event = replay.Cassette.load(path).interactions[0].response.events()[2].at
    session = replaying(path, faults.stall(after_events=3, seconds=60), speed="virtual")
    seen: list[Any] = []

    with session:
        started = time.monotonic()
        with pytest.raises(openai.APITimeoutError):
            openai_run(url, runner, seen, timeout=httpx2.Timeout(5.0))
        waited = time.monotonic() - started

    assert len(seen) == 3
    # On virtual time: the read gave up 5 s after the third event, in no time at all. Real
    # waits pass too, and a busy machine preempting a thread the asyncio client hops to
    # counts as waiting (a documented limit of `replay.clock.vtime`): 24 ms seen beside two hogs.
    assert waited == pytest.approx(third_event + 5.0, abs=0.1)


def test_anthropic_times_out_on_a_stall(sdk_cassettes: tuple[str, Path, Path]) -> None:
    url, _, path = sdk_cassettes
    with (
        replaying(path, "stall(after_events=4, seconds=60)"),
        raises_through_anthropic(httpx2.ReadTimeout),
    ):
        anthropic_run(url, timeout=5.0)


def test_both_sdks_survive_a_one_byte_rechunk(sdk_cassettes: tuple[str, Path, Path]) -> None:
    url, openai_path, anthropic_path = sdk_cassettes
    with replaying(openai_path):
        openai_events = openai_run(url, "sync")
    with replaying(anthropic_path):
        anthropic_answer = anthropic_run(url)

    with replaying(openai_path, faults.rechunk(1)):
        assert openai_run(url, "sync") == openai_events
    with replaying(anthropic_path, faults.rechunk(1)):
        assert anthropic_run(url) == anthropic_answer


def test_anthropic_cut_on_a_synthetic_stream_keeps_the_partial_text() -> None:
    interaction = anthropic_dialect.stream("Hello there, friend.")
    body = json.loads(interaction.request.body)
    transport = replay.ReplayTransport(
        replay.Cassette([interaction]), speed="instant", faults=["cut(after_events=6)"]
    )
    client = anthropic.Anthropic(
        api_key=KEY, http_client=httpx2.Client(transport=transport), max_retries=0
    )
    text: list[str] = []
    body.pop("stream")

    with (
        raises_through_anthropic(httpx2.RemoteProtocolError),
        client.messages.stream(**body) as stream,
    ):
        text.extend(stream.text_stream)

    # message_start, content_block_start, ping, then three deltas
    assert "".join(text) == "Hello there,"
    assert stream.current_message_snapshot.content[0].text == "Hello there,"  # type: ignore[union-attr]
