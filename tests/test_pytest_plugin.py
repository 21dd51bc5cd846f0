"""The pytest plugin, driven through pytester: markers, fixture, options, messages, xdist."""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

import replay
from replay.plugin.failure import selector
from replay.testing import Origin, Script, responses_hello

pytest_plugins = ["pytester"]

FAST = Script(chunks=responses_hello(scale=0.01))


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """Run pytest in a subprocess, as a user would. In-process runs are unsound here: the
    outer suite's warning filters would apply, and pytester's restoring of sys.modules
    leaves httpx mapping exceptions of an httpcore that is gone.

    pytest-recording (the `coexist` extra), where installed, is left out: its own
    `--block-network` blocks loopback too. The tests of the two together load it."""
    return pytester.runpytest_subprocess("-p", "no:recording", *args, timeout=120)


def make_ini(pytester: pytest.Pytester, lines: str = "") -> None:
    """The inner run's ini: the given lines, and pytest-asyncio's loop scope set (unset, it
    warns in every run)."""
    pytester.makeini(f"[pytest]\nasyncio_default_fixture_loop_scope = function\n{lines}")


@pytest.fixture(autouse=True)
def _quiet_ini(pytester: pytest.Pytester) -> None:
    make_ini(pytester)


@pytest.fixture
def fast_origin() -> Iterator[Origin]:
    with Origin({"/v1/responses": FAST, "/echo": Script(echo=True)}) as server:
        yield server


STREAM = """
def stream(text="hi"):
    with httpx.Client() as client:
        with client.stream("POST", ORIGIN + "/v1/responses", json={"input": text}) as r:
            return b"".join(r.iter_raw())
"""


def write_test(
    pytester: pytest.Pytester, origin_url: str, body: str, name: str = "test_llm"
) -> Path:
    """A test module that talks to `origin_url` through httpx (ORIGIN in the module)."""
    helpers = ""
    if body.startswith(STREAM):
        helpers, body = STREAM, body[len(STREAM) :]
    header = f"import httpx, pytest, replay\nORIGIN = {origin_url!r}\n"
    source = header + helpers + textwrap.dedent(body)
    return pytester.makepyfile(**{name: source})


def test_marker_records_then_replays_offline(pytester: pytest.Pytester) -> None:
    body = (
        STREAM
        + """
    @pytest.mark.use_cassette
    def test_hello():
        assert b"response.completed" in stream()
    """
    )
    with Origin({"/v1/responses": FAST}) as origin:
        write_test(pytester, origin.url, body)
        run(pytester).assert_outcomes(passed=1)
    cassette = pytester.path / "cassettes" / "test_llm" / "test_hello.msgpack"
    assert len(replay.Cassette.load(cassette).interactions) == 1
    # The origin is gone: the second run is served by the cassette alone.
    result = run(pytester, "--record-mode=none", "--block-network")
    result.assert_outcomes(passed=1)


def test_marker_takes_a_name_and_use_cassette_keywords(
    pytester: pytest.Pytester, fast_origin: Origin
) -> None:
    body = """
    import os

    @pytest.mark.use_cassette("shared", match_on=["method", "path"], speed="10x")
    def test_a():
        assert httpx.post(ORIGIN + "/echo", content=os.environ["BODY"]).content == b"one"
    """
    write_test(pytester, fast_origin.url, body)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("BODY", "one")
        run(pytester).assert_outcomes(passed=1)
        # Bodies are not matched on here: another body replays the recorded answer.
        mp.setenv("BODY", "two")
        run(pytester, "--record-mode=none").assert_outcomes(passed=1)
    cassette = replay.Cassette.load(pytester.path / "cassettes" / "test_llm" / "shared.msgpack")
    assert [i.request.body for i in cassette.interactions] == [b"one"]


def test_cassette_fixture_without_marker_activates_the_default(
    pytester: pytest.Pytester, fast_origin: Origin
) -> None:
    body = (
        STREAM
        + """
    def test_fixture(cassette):
        stream()
        assert len(cassette.interactions) == 1
        assert cassette.play_count + len(cassette.recorded) == 1  # replayed, or recorded
    """
    )
    write_test(pytester, fast_origin.url, body)
    run(pytester).assert_outcomes(passed=1)
    assert (pytester.path / "cassettes" / "test_llm" / "test_fixture.msgpack").exists()
    run(pytester, "--record-mode=none").assert_outcomes(passed=1)


def test_decorator_on_sync_and_async_tests(pytester: pytest.Pytester, fast_origin: Origin) -> None:
    pytester.makeini(
        "[pytest]\nasyncio_mode = strict\nasyncio_default_fixture_loop_scope = function"
    )
    body = """
    import anyio

    async def astream():
        async with httpx.AsyncClient() as client:
            r = await client.post(ORIGIN + "/v1/responses", json={"input": "a"})
            return r.content

    @replay.use_cassette("cassettes/decorated-sync.msgpack")
    def test_sync():
        assert b"response.completed" in httpx.post(ORIGIN + "/v1/responses", json={}).content

    @pytest.mark.asyncio
    @replay.use_cassette("cassettes/decorated-asyncio.msgpack")
    async def test_asyncio():
        assert b"response.completed" in await astream()

    @pytest.fixture(params=["asyncio", "trio"])
    def anyio_backend(request):
        return request.param

    @pytest.mark.anyio
    @replay.use_cassette("cassettes/decorated-anyio.msgpack", record_mode="new_episodes")
    async def test_anyio():
        assert b"response.completed" in await astream()
    """
    write_test(pytester, fast_origin.url, body)
    run(pytester).assert_outcomes(passed=4)
    result = run(pytester, "--record-mode=none")
    result.assert_outcomes(passed=4)
    assert (
        len(replay.Cassette.load(pytester.path / "cassettes/decorated-anyio.msgpack").interactions)
        == 1
    )


def test_default_path_includes_class_and_parametrize_ids(
    pytester: pytest.Pytester, fast_origin: Origin
) -> None:
    body = (
        STREAM
        + """
    class TestGroup:
        @pytest.mark.use_cassette
        @pytest.mark.parametrize("text", ["plain", "with/slash", "x" * 300])
        def test_it(self, text):
            stream(text)
    """
    )
    write_test(pytester, fast_origin.url, body)
    run(pytester).assert_outcomes(passed=3)
    names = sorted(p.name for p in (pytester.path / "cassettes" / "test_llm").iterdir())
    assert "TestGroup.test_it[plain].msgpack" in names
    assert len(names) == 3
    assert all(len(name) <= 140 and "/" not in name for name in names)


#: A key as a parametrize id: every five characters of it hold a letter past `f`, so that no
#: part of it can be found by chance in a hex digest.
ID_KEY = "sk-proj-QwErTy7UiOpAsDfGhJkLzXcVbNm"


def test_a_key_in_a_parametrize_id_is_hashed_in_file_name_and_summary(
    pytester: pytest.Pytester, fast_origin: Origin
) -> None:
    body = f"""
    import os

    @pytest.mark.use_cassette
    @pytest.mark.parametrize("key", [{ID_KEY!r}, "plain"])
    def test_key(key):
        httpx.post(ORIGIN + "/echo", content=b"one")
        if not os.environ.get("ONLY_ONE"):
            httpx.post(ORIGIN + "/echo", content=b"two")
    """
    write_test(pytester, fast_origin.url, body)
    first = run(pytester)
    first.assert_outcomes(passed=2)
    names = sorted(p.name for p in (pytester.path / "cassettes" / "test_llm").iterdir())
    assert len(names) == 2
    assert "test_key[plain].msgpack" in names
    # The second run plays the first's files (one interaction of each left, to be listed
    # with the tests that used it).
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ONLY_ONE", "1")
        again = run(pytester, "--record-mode=none", "--strict-cassettes")
    again.assert_outcomes(passed=2)
    again.stdout.fnmatch_lines(
        [
            "cassettes used: 2; interactions replayed: 2, recorded: 0",
            "*test_key?REDACTED-*?.msgpack has 1 interaction(s) no test played*"
            "used by test_llm.py::test_key?REDACTED-*?",
        ]
    )
    shown = [*names, first.stdout.str(), again.stdout.str()]
    parts = {ID_KEY[i : i + 5] for i in range(len(ID_KEY) - 4)}
    assert [part for part in parts if any(part in text for text in shown)] == []
    assert sorted(p.name for p in (pytester.path / "cassettes" / "test_llm").iterdir()) == names


@pytest.mark.parametrize(
    ("nodeid", "expected"),
    [
        (f"t/test_x.py::TestA::test_b[{ID_KEY}-1]", "t/test_x.py::TestA::test_b"),
        ("t/test_x.py::test_b[plain-1]", "t/test_x.py::test_b[plain-1]"),
    ],
)
def test_the_record_command_of_a_keyed_test_selects_its_function(
    nodeid: str, expected: str
) -> None:
    assert selector(nodeid) == expected


@pytest.mark.parametrize("how", ["option", "ini"])
def test_cassette_dir_overrides_the_directory(
    pytester: pytest.Pytester, fast_origin: Origin, how: str
) -> None:
    body = (
        STREAM
        + """
    @pytest.mark.use_cassette
    def test_hello():
        stream()
    """
    )
    write_test(pytester, fast_origin.url, body)
    if how == "ini":
        make_ini(pytester, "replay_cassette_dir = recorded")
        run(pytester).assert_outcomes(passed=1)
    else:
        run(pytester, "--cassette-dir=recorded").assert_outcomes(passed=1)
    assert (pytester.path / "recorded" / "test_llm" / "test_hello.msgpack").exists()


def test_command_line_record_mode_wins_over_marker_and_ini(
    pytester: pytest.Pytester, fast_origin: Origin
) -> None:
    body = (
        STREAM
        + """
    @pytest.mark.use_cassette(record_mode="all")
    def test_hello():
        stream()
    """
    )
    write_test(pytester, fast_origin.url, body)
    make_ini(pytester, "replay_record_mode = all")
    result = run(pytester, "--record-mode=none")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*has no match in cassette*test_hello.msgpack*"])


def test_rewrite_deletes_and_records_again(pytester: pytest.Pytester, fast_origin: Origin) -> None:
    body = (
        STREAM
        + """
    @pytest.mark.use_cassette
    def test_hello():
        stream()
    """
    )
    write_test(pytester, fast_origin.url, body)
    run(pytester).assert_outcomes(passed=1)
    path = pytester.path / "cassettes" / "test_llm" / "test_hello.msgpack"
    fast_origin.route("/v1/responses", Script(chunks=[(0.0, b"data: new\n\n")]))
    run(pytester).assert_outcomes(passed=1)  # once: the old answer replays
    assert b"response.completed" in replay.Cassette.load(path).interactions[0].response.body
    run(pytester, "--record-mode=rewrite").assert_outcomes(passed=1)
    rewritten = replay.Cassette.load(path).interactions
    assert [i.response.body for i in rewritten] == [b"data: new\n\n"]


def test_mismatch_failure_names_request_cassette_nearest_and_command(
    pytester: pytest.Pytester, fast_origin: Origin
) -> None:
    body = (
        STREAM
        + """
    import os

    @pytest.mark.use_cassette
    def test_hello():
        stream(os.environ.get("PROMPT", "hi"))
    """
    )
    write_test(pytester, fast_origin.url, body)
    run(pytester).assert_outcomes(passed=1)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PROMPT", "a different prompt")
        result = run(pytester, "--record-mode=none")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            f"*POST {fast_origin.url}/v1/responses has no match in cassette*test_hello.msgpack*",
            "*Nearest recorded request: POST*/v1/responses*",
            "*body differs*",
            "*a different prompt*",
            "*pytest --record-mode=rewrite*test_llm.py::test_hello*",  # (a stale recording)
        ]
    )


def test_unplayed_interactions_are_listed_and_strict_fails_the_run(
    pytester: pytest.Pytester, fast_origin: Origin
) -> None:
    body = (
        STREAM
        + """
    import os

    @pytest.mark.use_cassette(record_mode="new_episodes")
    def test_hello():
        stream("one")
        if not os.environ.get("ONLY_ONE"):
            stream("two")
    """
    )
    write_test(pytester, fast_origin.url, body)
    run(pytester).assert_outcomes(passed=1)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ONLY_ONE", "1")
        result = run(pytester, "--record-mode=none")
        strict = run(pytester, "--record-mode=none", "--strict-cassettes")
    result.assert_outcomes(passed=1)
    assert result.ret == 0
    result.stdout.fnmatch_lines(
        [
            "unplayed interactions: 1",
            '  cassettes/test_llm/test_hello.msgpack #1 POST */v1/responses {"input":"two"}',
        ]
    )
    strict.assert_outcomes(passed=1)
    assert strict.ret == pytest.ExitCode.TESTS_FAILED
    strict.stdout.fnmatch_lines(
        [
            "replay: error: cassettes/test_llm/test_hello.msgpack has 1 interaction(s) no test "
            "played (--strict-cassettes); used by test_llm.py::test_hello"
        ]
    )


SHARED = (
    STREAM
    + """
    @pytest.mark.use_cassette("shared", record_mode="new_episodes")
    def test_one():
        stream("one")

    @pytest.mark.use_cassette("shared", record_mode="new_episodes")
    def test_two():
        stream("two")

    @replay.use_cassette("cassettes/test_llm/shared.msgpack")  # the run's directory
    def test_library_form_too():
        stream("one")
    """
)


@pytest.mark.parametrize("workers", [(), ("-n", "2")], ids=["one-process", "xdist"])
def test_a_shared_cassette_is_judged_once_per_file(
    pytester: pytest.Pytester, fast_origin: Origin, workers: tuple[str, ...]
) -> None:
    # Each test plays its own interaction of the shared file: none is unplayed by the run,
    # though each test alone leaves the other's.
    write_test(pytester, fast_origin.url, SHARED)
    run(pytester).assert_outcomes(passed=3)
    strict = run(pytester, *workers, "--record-mode=none", "--strict-cassettes")
    strict.assert_outcomes(passed=3)
    assert strict.ret == 0
    strict.stdout.fnmatch_lines(
        ["cassettes used: 1; interactions replayed: 3, recorded: 0", "unplayed interactions: 0"]
    )


def test_terminal_summary_counts_cassettes_and_files(
    pytester: pytest.Pytester, fast_origin: Origin
) -> None:
    body = (
        STREAM
        + """
    @pytest.mark.use_cassette
    def test_one():
        stream()

    @pytest.mark.use_cassette
    def test_two():
        stream()
    """
    )
    write_test(pytester, fast_origin.url, body)
    result = run(pytester)
    result.stdout.fnmatch_lines(
        [
            "*- replay -*",
            "cassettes used: 2; interactions replayed: 0, recorded: 2",
            "files written: 2",
            "unplayed interactions: 0",
        ]
    )
    again = run(pytester, "--record-mode=none")
    again.stdout.fnmatch_lines(
        ["cassettes used: 2; interactions replayed: 2, recorded: 0", "files written: 0"]
    )


def test_block_network_fails_requests_no_cassette_handles(
    pytester: pytest.Pytester, fast_origin: Origin
) -> None:
    body = """
    def test_unrecorded():
        httpx.get(ORIGIN + "/v1/responses")

    def test_socket():
        import socket
        host, port = ORIGIN.rsplit("/", 1)[1].split(":")
        socket.create_connection((host, int(port)), timeout=1)
    """
    write_test(pytester, fast_origin.url, body)
    # Loopback is allowed unless asked otherwise: blocking it too proves the block without
    # sending a single packet off this machine.
    make_ini(pytester, "replay_allowed_hosts =")
    result = run(pytester, "--block-network")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*NetworkBlockedError*GET*/v1/responses*"])
    assert fast_origin.requests == []
    make_ini(pytester)
    run(pytester, "--block-network", "-k", "unrecorded").assert_outcomes(passed=1)


def test_xdist_workers_merge_new_episodes_into_one_cassette(
    pytester: pytest.Pytester, fast_origin: Origin
) -> None:
    body = """
    @pytest.mark.use_cassette("shared", record_mode="new_episodes")
    @pytest.mark.parametrize("n", range(6))
    def test_add(n):
        httpx.post(ORIGIN + "/echo", json={"n": n})
    """
    write_test(pytester, fast_origin.url, body)
    result = run(pytester, "-n", "2", "-p", "xdist")
    result.assert_outcomes(passed=6)
    cassette = replay.Cassette.load(pytester.path / "cassettes" / "test_llm" / "shared.msgpack")
    assert sorted(i.request.body for i in cassette.interactions) == sorted(
        f'{{"n":{n}}}'.encode() for n in range(6)
    )
    run(pytester, "-n", "2", "--record-mode=none").assert_outcomes(passed=6)


def test_openai_suite_goes_offline_with_one_flag(pytester: pytest.Pytester) -> None:
    body = """
    import openai

    @pytest.mark.use_cassette
    def test_responses():
        client = openai.OpenAI(api_key="sk-live-secret", base_url=ORIGIN + "/v1", max_retries=0)
        events = list(client.responses.create(model="m", input="hi", stream=True))
        assert events[-1].type == "response.completed"
        assert events[-1].response.output_text == "Hello there, how may I assist you today?"
    """
    with Origin({"/v1/responses": FAST}) as origin:
        write_test(pytester, origin.url, body)
        run(pytester).assert_outcomes(passed=1)
    path = pytester.path / "cassettes" / "test_llm" / "test_responses.msgpack"
    assert b"sk-live-secret" not in path.read_bytes()
    run(pytester, "--record-mode=none", "--block-network").assert_outcomes(passed=1)


def test_command_line_record_mode_binds_the_decorator_form_too(
    pytester: pytest.Pytester, fast_origin: Origin
) -> None:
    body = """
    @replay.use_cassette("cassettes/decorated.msgpack")
    def test_decorated():
        httpx.get(ORIGIN + "/v1/responses")
    """
    write_test(pytester, fast_origin.url, body)
    result = run(pytester, "--record-mode=none")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*has no match in cassette*decorated.msgpack*record mode 'none'*"])
    assert not (pytester.path / "cassettes" / "decorated.msgpack").exists()
    assert fast_origin.requests == []


def test_rewrite_keeps_what_this_run_recorded_into_a_shared_cassette(
    pytester: pytest.Pytester, fast_origin: Origin
) -> None:
    body = """
    @pytest.mark.use_cassette("shared")
    def test_one():
        httpx.post(ORIGIN + "/echo", content=b"one")

    @pytest.mark.use_cassette("shared")
    def test_two():
        httpx.post(ORIGIN + "/echo", content=b"two")
    """
    write_test(pytester, fast_origin.url, body)
    path = pytester.path / "cassettes" / "test_llm" / "shared.msgpack"
    replay.Cassette(
        [
            replay.Interaction(
                replay.Request(method="GET", url="http://old/"), replay.Response(status=200)
            )
        ]
    ).save(path)
    run(pytester, "--record-mode=rewrite").assert_outcomes(passed=2)
    bodies = sorted(i.request.body for i in replay.Cassette.load(path).interactions)
    assert bodies == [b"one", b"two"]


def test_ini_ignore_hosts_lets_a_host_go_live_unrecorded(
    pytester: pytest.Pytester, fast_origin: Origin
) -> None:
    make_ini(pytester, "replay_ignore_hosts = 127.0.0.1")
    body = (
        STREAM
        + """
    @pytest.mark.use_cassette
    def test_live():
        assert stream()
    """
    )
    write_test(pytester, fast_origin.url, body)
    result = run(pytester, "--record-mode=none")
    result.assert_outcomes(passed=1)
    assert len(fast_origin.requests) == 1
    assert not list(pytester.path.rglob("*.msgpack"))


def test_a_markers_ignore_hosts_overrides_the_ini(
    pytester: pytest.Pytester, fast_origin: Origin
) -> None:
    make_ini(pytester, "replay_ignore_hosts = 127.0.0.1")
    body = (
        STREAM
        + """
    @pytest.mark.use_cassette(ignore_hosts=[])
    def test_refused():
        with pytest.raises(replay.CassetteMismatchError):
            stream()
    """
    )
    write_test(pytester, fast_origin.url, body)
    run(pytester, "--record-mode=none").assert_outcomes(passed=1)
    assert fast_origin.requests == []


BOTH = (
    STREAM
    + """
    def test_pytest_recording_sees_the_mode(record_mode):
        assert record_mode == "none"

    @pytest.mark.use_cassette
    def test_replay_sees_the_mode():
        stream()
    """
)


#: The tests of pytest-recording and replay side by side: pytest-recording comes with the
#: `coexist` extra (CI installs it), not with `test`.
NEEDS_PYTEST_RECORDING = pytest.mark.skipif(
    importlib.util.find_spec("pytest_recording") is None,
    reason="pytest-recording is not installed: pip install -e '.[test,coexist]'",
)


@NEEDS_PYTEST_RECORDING
@pytest.mark.parametrize(
    ("environment", "plugins"),
    [
        pytest.param({}, (), id="both-autoloaded"),
        pytest.param(
            {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},
            ("-p", "pytest_recording.plugin", "-p", "replay.plugin.hooks"),
            id="pytest-recording-first",
        ),
    ],
)
def test_pytest_recording_and_replay_share_record_mode(
    pytester: pytest.Pytester,
    fast_origin: Origin,
    monkeypatch: pytest.MonkeyPatch,
    environment: dict[str, str],
    plugins: tuple[str, ...],
) -> None:
    # A suite moving over from pytest-recording has both installed for a while: pytest must
    # start, and the one --record-mode drives both plugins.
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    write_test(pytester, fast_origin.url, BOTH)
    result = pytester.runpytest_subprocess(
        *plugins, "-p", "no:cacheprovider", "--record-mode=none", timeout=120
    )
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*CassetteMismatchError: POST*has no match*(record mode 'none')"])
    assert fast_origin.requests == []
    assert "already used" not in result.stderr.str()


GAPPED = Script(chunks=[(0.0, b"data: a\n\n"), (0.6, b"data: b\n\n")])

SPEEDS = """
import os, time

def timed_stream():
    real, seen = os.times().elapsed, time.monotonic()  # os.times: never virtual
    with httpx.Client() as client:
        with client.stream("GET", ORIGIN + "/gapped") as response:
            b"".join(response.iter_raw())
    return os.times().elapsed - real, time.monotonic() - seen

@pytest.mark.use_cassette(speed="virtual")
def test_marker_keeps_its_virtual_time():
    real, seen = timed_stream()
    assert (seen >= 0.55 and real < 0.45) or os.environ.get("RECORDING"), (real, seen)

@replay.use_cassette("cassettes/library.msgpack")
def test_library_form_takes_the_runs_speed():
    real, seen = timed_stream()
    assert real >= 0.5 or os.environ.get("RECORDING"), (real, seen)
"""


def test_a_chosen_speed_wins_and_the_runs_speed_reaches_the_library_form(
    pytester: pytest.Pytester,
) -> None:
    with Origin({"/gapped": GAPPED}) as origin:
        write_test(pytester, origin.url, SPEEDS)
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("RECORDING", "1")
            run(pytester).assert_outcomes(passed=2)
    result = run(pytester, "--record-mode=none", "--replay-speed=1")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["cassettes used: 2; interactions replayed: 2, recorded: 0"])


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        pytest.param(
            ("--replay-speed=fast",), "*--replay-speed: *'fast'*", id="command-line-speed"
        ),
        pytest.param(
            ("-o", "replay_record_mode=onse"),
            "*replay_record_mode: unknown record mode 'onse': use one of none, once, "
            "new_episodes, all, rewrite*",
            id="ini-record-mode",
        ),
        pytest.param(("-o", "replay_speed=slow"), "*replay_speed: *'slow'*", id="ini-speed"),
        pytest.param(
            ("--replay-speed=1e-300",),
            "*--replay-speed: speed '1e-300' is too slow: a speed is from 0.001 *",
            id="command-line-speed-too-slow",
        ),
    ],
)
def test_bad_settings_are_a_usage_error_at_start_up(
    pytester: pytest.Pytester, arguments: tuple[str, ...], message: str
) -> None:
    write_test(pytester, "http://127.0.0.1:9", "def test_never_runs():\n    pass\n")
    result = run(pytester, *arguments)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])
    assert "test_never_runs" not in result.stdout.str()


def test_the_plugin_loads_none_of_the_library_in_a_run_that_uses_no_cassette(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every pytest run of a project that installs replay loads the plugin: it must cost next
    # to nothing there. Only replay's plugin is loaded, so what is imported is its doing.
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    pytester.makeconftest(
        """
        import sys, time
        def pytest_collection_finish(session):
            heavy = ("httpx", "httpx2", "asyncio", "anyio", "attrs", "msgpack")
            heavy += ("replay.session.lifecycle",)
            print("loaded:", sorted(name for name in heavy if name in sys.modules))
        """
    )
    pytester.makepyfile(test_plain="def test_plain():\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "replay.plugin.hooks", "--co", timeout=120)
    result.stdout.fnmatch_lines(["loaded: []"])
    # The import itself, timed in a fresh interpreter with pytest already loaded: ~3 ms on
    # a quiet machine. CPU time, which a busy machine does not stretch as it does the wall
    # clock; the bound is generous.
    timing = "import pytest, time; t = time.process_time(); import replay.plugin.hooks; "
    timing += "print(time.process_time() - t)"
    seconds = float(pytester.run(sys.executable, "-c", timing).outlines[-1])
    assert seconds < 0.1


def test_the_library_is_imported_as_any_module_not_rewritten_by_pytest(
    pytester: pytest.Pytester,
) -> None:
    # pytest marks every package of a plugin's distribution for assertion rewriting, and then
    # compiles each module itself, ignoring its bytecode: the first cassette of every run
    # paid for it. The plugin takes the library out of that; the tests' own asserts stay
    # rewritten.
    make_ini(pytester)
    pytester.makepyfile(
        test_loader="""
        def test_loader():
            import replay.session.lifecycle
            print("loader:", type(replay.session.lifecycle.__spec__.loader).__name__)
            assert 1 == 2, "rewritten"
        """
    )
    result = run(pytester, "-s")
    result.stdout.fnmatch_lines(
        ["*loader: SourceFileLoader*", "*AssertionError: rewritten*", "*assert 1 == 2*"]
    )


def test_the_patches_stay_on_between_two_tests_with_cassettes_and_only_then(
    pytester: pytest.Pytester,
) -> None:
    # Taking the transport patches off after each test and back on for the next cost some
    # 35 µs a test: between two tests that each use a cassette they stay on (sending as if
    # unpatched meanwhile); a test without one runs unpatched.
    make_ini(pytester)
    pytester.makepyfile(
        test_held="""
        import httpx
        import pytest

        patches = []

        def patched():
            method = httpx.HTTPTransport.__dict__["handle_request"]
            return method if getattr(method, "_replay_patch", False) else None

        @pytest.fixture(scope="module")  # set up before test_b's session: between the two
        def between():
            patches.append(("between", patched()))

        @pytest.mark.use_cassette
        def test_a():
            patches.append(("a", patched()))

        @pytest.mark.use_cassette
        def test_b(between):
            patches.append(("b", patched()))

        def test_c():
            assert patched() is None

        def test_d(cassette):
            assert patched() is not None

        def test_e():
            assert patched() is None
            (_, a), (_, between), (_, b) = patches
            assert a is not None and a is between is b  # never off, never patched anew
        """
    )
    run(pytester, "--record-mode=none", "-p", "no:randomly").assert_outcomes(passed=5)


def test_cassette_files_are_not_offered_to_the_collectors(pytester: pytest.Pytester) -> None:
    # One cassette per test, beside the tests: pytest offered each to every collector.
    make_ini(pytester)
    pytester.makeconftest(
        """
        def pytest_collect_file(file_path, parent):
            print("offered:", file_path.name)
        """
    )
    pytester.makepyfile(test_one="def test_one():\n    pass\n")
    cassettes = pytester.path / "cassettes" / "test_one"
    cassettes.mkdir(parents=True)
    (cassettes / "test_one.msgpack").write_bytes(b"")
    (cassettes / "notes.txt").write_text("kept")
    result = run(pytester, "--co", "-s")
    assert result.ret == pytest.ExitCode.OK
    for offered in ("notes.txt", "test_one.py"):
        result.stdout.fnmatch_lines([f"offered: {offered}"])
    result.stdout.no_fnmatch_line("*offered: test_one.msgpack*")
