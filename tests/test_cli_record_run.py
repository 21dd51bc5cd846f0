"""`replay record` and `replay run` as a user runs them: subprocesses against a local origin.

Every program here is a small file written to tmp_path and run, unmodified, under the
`replay` command (itself a subprocess), so the start-up hook, the environment, signals and
exit statuses are all the real ones.
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import signal
import struct
import subprocess
import sys
import termios
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest
from commands import read_pty
from commands import replay_text as replay_cli

import replay
from replay.model.frames import Frame
from replay.run.child import summary_lines
from replay.run.progress import Progress
from replay.testing import HELLO_TEXT, Origin, Script, SeenRequest, chat_hello, responses_hello

SECRET = "sk-secret-123"

OPENAI_APP = f"""
import sys
import openai

client = openai.OpenAI(api_key={SECRET!r}, base_url=sys.argv[1] + "/v1", max_retries=0)
text = ""
for event in client.responses.create(model="gpt-4o-mini", input="hi", stream=True):
    print(event.type)
    if event.type == "response.output_text.delta":
        text += event.delta
print("text:", text)
"""

# Streams a chat completion with httpx, says so, then waits to be stopped.
STREAM_THEN_SLEEP = """
import os, sys, time
import httpx

with httpx.stream("POST", sys.argv[1] + "/v1/chat/completions", json={"stream": True}) as r:
    for _ in r.iter_bytes():
        pass
print(os.getpid(), flush=True)
time.sleep(30)
"""

STREAM = """
import sys
import httpx

with httpx.stream("POST", sys.argv[1] + "/v1/responses", json={"input": "hi"}) as response:
    print(response.status_code, sum(len(chunk) for chunk in response.iter_bytes()))
"""


def _fast_routes() -> dict[str, Script]:
    return {
        "/v1/responses": Script(chunks=responses_hello(scale=0.2)),
        "/v1/chat/completions": Script(chunks=chat_hello(scale=0.1)),
    }


@pytest.fixture
def fast_origin() -> Iterator[Origin]:
    """The LLM routes at a fraction of their realistic delays."""
    with Origin(_fast_routes()) as server:
        yield server


def program(tmp_path: Path, source: str, name: str = "app.py") -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(source))
    return str(path)


def assert_one_error_line(result: subprocess.CompletedProcess[str], start: str) -> None:
    assert result.returncode == 1
    assert result.stderr.splitlines() == [result.stderr.strip()]
    assert result.stderr.startswith(f"replay: error: {start}")


# -- record, then run offline ----------------------------------------------------------------------


@attrs.frozen
class OpenAIRecording:
    """The openai program, recorded once for the module by `replay record`."""

    app: str
    cassette: Path
    origin_url: str
    seen: tuple[SeenRequest, ...]
    result: subprocess.CompletedProcess[str]


@pytest.fixture(scope="module")
def openai_recording(tmp_path_factory: pytest.TempPathFactory) -> OpenAIRecording:
    """The openai program recorded from a local origin, which is stopped afterwards."""
    directory = tmp_path_factory.mktemp("openai")
    cassette = directory / "cassettes" / "app.msgpack"
    app = program(directory, OPENAI_APP)
    with Origin(_fast_routes()) as origin:
        url = origin.url
        result = replay_cli("record", str(cassette), "--", sys.executable, app, url)
    return OpenAIRecording(app, cassette, url, tuple(origin.requests), result)


def test_openai_program_replays_offline_with_identical_output(
    openai_recording: OpenAIRecording,
) -> None:
    recorded = openai_recording.result
    assert recorded.returncode == 0, recorded.stderr
    assert recorded.stdout.splitlines()[-1] == f"text: {HELLO_TEXT}"
    assert "response.completed" in recorded.stdout.splitlines()

    replayed = replay_cli(
        "run", "--mode", "none", str(openai_recording.cassette), "--",
        sys.executable, openai_recording.app, openai_recording.origin_url,
    )  # fmt: skip

    assert replayed.returncode == 0, replayed.stderr
    assert replayed.stdout == recorded.stdout
    assert replayed.stderr == ""


def test_record_never_writes_the_api_key(openai_recording: OpenAIRecording) -> None:
    assert openai_recording.seen[0].header("authorization") == f"Bearer {SECRET}"
    assert SECRET.encode() not in openai_recording.cassette.read_bytes()
    assert SECRET not in openai_recording.result.stderr
    request = replay.Cassette.load(openai_recording.cassette).interactions[0].request
    assert request.header("authorization") == "REDACTED"


def test_record_prints_a_summary_row_per_interaction(openai_recording: OpenAIRecording) -> None:
    lines = openai_recording.result.stderr.splitlines()
    assert lines[0] == f"replay: recorded 1 interaction into {openai_recording.cassette}"
    assert lines[1].split() == ["method", "url", "status", "events", "ttft", "duration"]
    method, url, status, events, ttft, _, duration, _ = lines[2].split()
    responses_url = f"{openai_recording.origin_url}/v1/responses"
    assert (method, url, status, events) == ("POST", responses_url, "200", "18")
    # One definition of each figure: the summary's ttft is replay.inspect.timing.ttft's.
    (interaction,) = replay.Cassette.load(openai_recording.cassette).interactions
    assert ttft == f"{replay.inspect.timing.ttft(interaction.response):.3f}"
    assert replay.inspect.timing.ttft(interaction.response) != replay.inspect.timing.first_event(
        interaction.response
    )
    assert 0.03 < float(ttft) < float(duration)
    assert lines[3].startswith("  total: 1 interaction, 18 events, ")
    assert len(lines) == 4


def test_summary_shows_urls_with_their_secrets_redacted(
    tmp_path: Path, fast_origin: Origin
) -> None:
    cassette = tmp_path / "query.msgpack"
    get = f"import httpx, sys\nhttpx.get(sys.argv[1] + '/v1/responses?api_key={SECRET}&v=2')"
    result = replay_cli("record", str(cassette), "--", sys.executable, "-c", get, fast_origin.url)
    assert result.returncode == 0, result.stderr
    assert fast_origin.requests[0].query == f"api_key={SECRET}&v=2"
    assert f"{fast_origin.url}/v1/responses?api_key=REDACTED&v=2 " in result.stderr
    assert SECRET not in result.stderr
    assert SECRET.encode() not in cassette.read_bytes()


def test_record_says_so_when_nothing_was_recorded(tmp_path: Path) -> None:
    cassette = tmp_path / "empty.msgpack"
    result = replay_cli("record", str(cassette), "--", sys.executable, "-c", "pass")
    assert result.returncode == 0
    assert result.stderr.startswith(f"replay: nothing recorded into {cassette}")
    assert not cassette.exists()


def test_run_new_episodes_records_what_is_missing(tmp_path: Path, fast_origin: Origin) -> None:
    cassette = tmp_path / "app.msgpack"
    app = program(tmp_path, STREAM)
    replay_cli("record", str(cassette), "--", sys.executable, app, fast_origin.url)
    chat = program(tmp_path, STREAM.replace("/v1/responses", "/v1/chat/completions"), "chat.py")

    both = f"import runpy, sys\nrunpy.run_path({app!r})\nrunpy.run_path({chat!r})\n"
    result = replay_cli(
        "run", "--mode", "new_episodes", str(cassette), "--",
        sys.executable, "-c", both, fast_origin.url,
    )  # fmt: skip

    assert result.returncode == 0, result.stderr
    assert [r.path for r in fast_origin.requests] == ["/v1/responses", "/v1/chat/completions"]
    assert result.stderr.splitlines()[0] == f"replay: recorded 1 interaction into {cassette}"
    assert len(replay.Cassette.load(cassette).interactions) == 2


TIME_TO_FIRST_CHUNK = """
import sys, time
import httpx

with httpx.Client() as client:  # its set-up (an SSL context: 0.1 s, more when busy) untimed
    started = time.monotonic()
    with client.stream("GET", sys.argv[1] + "/slow") as response:
        next(response.iter_raw())
        print(f"{time.monotonic() - started:.3f}")
"""


def test_run_replays_at_the_speed_asked(tmp_path: Path) -> None:
    cassette = tmp_path / "slow.msgpack"
    app = program(tmp_path, TIME_TO_FIRST_CHUNK)
    with Origin({"/slow": Script(chunks=[(0.4, b"data: late\n\n")])}) as origin:
        url = origin.url
        live = replay_cli("record", str(cassette), "--", sys.executable, app, url)

    as_recorded = replay_cli("run", "--speed", "1", str(cassette), "--", sys.executable, app, url)
    instant = replay_cli("run", str(cassette), "--", sys.executable, app, url)

    assert float(live.stdout) >= 0.4
    assert float(as_recorded.stdout) >= 0.38
    # The recorded 0.4 s if it waited; a busy machine adds a little to a request.
    assert float(instant.stdout) < 0.3, (instant.stdout, as_recorded.stdout)


# -- the program's environment ---------------------------------------------------------------------


def test_python_descendants_record_into_the_same_cassette(
    tmp_path: Path, fast_origin: Origin
) -> None:
    cassette = tmp_path / "family.msgpack"
    app = program(tmp_path, STREAM)
    parent = (
        f"import subprocess, sys\n"
        f"subprocess.run([sys.executable, {app!r}, sys.argv[1]], check=True)\n"
        f"subprocess.run([sys.executable, {app!r}, sys.argv[1]], check=True)\n"
    )
    result = replay_cli(
        "record", str(cassette), "--", sys.executable, "-c", parent, fast_origin.url
    )
    assert result.returncode == 0, result.stderr
    assert len(replay.Cassette.load(cassette).interactions) == 2
    assert "recorded 2 interactions" in result.stderr


def test_the_program_sees_its_own_sys_path_and_sitecustomize(tmp_path: Path) -> None:
    theirs = tmp_path / "site"
    theirs.mkdir()
    (theirs / "sitecustomize.py").write_text("import sys\nprint('their sitecustomize ran')\n")
    probe = "import sys, sitecustomize\nprint(sitecustomize.__file__)\nprint(sys.path[1])\n"
    env = {**os.environ, "PYTHONPATH": str(theirs)}

    result = replay_cli(
        "record", str(tmp_path / "c.msgpack"), "--", sys.executable, "-c", probe, env=env
    )

    assert result.returncode == 0, result.stderr
    # Printed twice: by replay's own interpreter (same PYTHONPATH), and by the program's.
    assert result.stdout.splitlines() == [
        "their sitecustomize ran",
        "their sitecustomize ran",
        str(theirs / "sitecustomize.py"),
        str(theirs),
    ]


# -- exit status, signals --------------------------------------------------------------------------


@pytest.mark.parametrize("verb", ["record", "run"])
def test_exit_status_is_passed_through(tmp_path: Path, verb: str) -> None:
    cassette = tmp_path / "c.msgpack"
    replay.Cassette([]).save(cassette)
    result = replay_cli(verb, str(cassette), "--", sys.executable, "-c", "raise SystemExit(3)")
    assert result.returncode == 3


@pytest.mark.parametrize(
    ("signum", "target"),
    [
        pytest.param(signal.SIGTERM, "replay", id="SIGTERM-to-replay"),
        pytest.param(signal.SIGTERM, "program", id="SIGTERM-to-program"),
        pytest.param(signal.SIGINT, "replay", id="SIGINT-to-replay"),
        pytest.param(signal.SIGHUP, "replay", id="SIGHUP-to-replay"),
    ],
)
def test_a_stopped_program_still_saves_its_cassette(
    tmp_path: Path, fast_origin: Origin, signum: int, target: str
) -> None:
    cassette = tmp_path / "stopped.msgpack"
    app = program(tmp_path, STREAM_THEN_SLEEP)
    process = subprocess.Popen(
        [sys.executable, "-m", "replay.cli", "record", str(cassette), "--", sys.executable, app,
         fast_origin.url],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # not in the foreground of the terminal pytest may run in
    )  # fmt: skip
    try:
        assert process.stdout is not None
        program_pid = int(process.stdout.readline())  # the request is done
        os.kill(process.pid if target == "replay" else program_pid, signum)
        _, stderr = process.communicate(timeout=15)
    finally:
        process.kill()
    assert process.returncode == 128 + signum
    assert len(replay.Cassette.load(cassette).interactions) == 1
    assert f"replay: recorded 1 interaction into {cassette}" in stderr


# Makes the pty named in argv[1] its controlling terminal (and its stdio), then runs replay:
# as in a shell, replay and the program share the terminal's foreground process group.
IN_A_TERMINAL = """
import os, sys
os.setsid()
terminal = os.open(sys.argv[1], os.O_RDWR)
for fd in (0, 1, 2):
    os.dup2(terminal, fd)
os.execv(sys.executable, [sys.executable, "-m", "replay.cli", *sys.argv[2:]])
"""

INTERRUPTED_CLEAN_UP = """
import sys, time
import httpx

httpx.get(sys.argv[1] + "/v1/chat/completions")
try:
    print("ready", flush=True)  # inside the try: a Ctrl-C right after it still cleans up
    time.sleep(30)
finally:
    time.sleep(0.3)  # a second Ctrl-C, if replay passed the first one on, would land here
    print("clean-up done", flush=True)
"""


def test_ctrl_c_at_a_terminal_interrupts_the_program_once(
    tmp_path: Path, fast_origin: Origin
) -> None:
    cassette = tmp_path / "ctrl-c.msgpack"
    app = program(tmp_path, INTERRUPTED_CLEAN_UP)
    controller, terminal = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-c", IN_A_TERMINAL, os.ttyname(terminal),
         "record", str(cassette), "--", sys.executable, app, fast_origin.url],
    )  # fmt: skip
    try:
        shown = b""
        while b"ready" not in shown:
            shown += os.read(controller, 4096)
        os.close(terminal)  # only now: with no end open, reading the controller fails
        os.write(controller, b"\x03")  # Ctrl-C
        rest = read_pty(controller, deadline=time.monotonic() + 15)
        process.wait(timeout=10)
    finally:
        process.kill()
    assert process.returncode == 130
    assert "clean-up done" in rest
    assert rest.count("KeyboardInterrupt") == 1
    assert len(replay.Cassette.load(cassette).interactions) == 1


# -- errors ----------------------------------------------------------------------------------------


def test_run_without_a_cassette_is_one_error_line(tmp_path: Path) -> None:
    result = replay_cli("run", str(tmp_path / "missing.msgpack"), "--", sys.executable, "-V")
    assert_one_error_line(result, "no cassette at ")
    assert "Traceback" not in result.stderr


def test_run_with_a_corrupt_cassette_is_one_error_line(tmp_path: Path) -> None:
    broken = tmp_path / "broken.msgpack"
    broken.write_bytes(b"\x85garbage")
    result = replay_cli("run", str(broken), "--", sys.executable, "-V")
    assert_one_error_line(result, "cannot read cassette")


def test_run_with_a_bad_speed_is_one_error_line(tmp_path: Path) -> None:
    cassette = tmp_path / "c.msgpack"
    replay.Cassette([]).save(cassette)
    result = replay_cli("run", "--speed", "fast", str(cassette), "--", sys.executable, "-V")
    assert_one_error_line(result, "speed 'fast' is not a number")


def test_record_of_a_missing_command_is_one_error_line(tmp_path: Path) -> None:
    result = replay_cli("record", str(tmp_path / "c.msgpack"), "--", "no-such-command-xyz")
    assert_one_error_line(result, "command not found: no-such-command-xyz")


def test_run_mode_none_refuses_an_unmatched_request(tmp_path: Path, fast_origin: Origin) -> None:
    cassette = tmp_path / "other.msgpack"
    other = replay.Interaction(
        replay.Request(method="GET", url=f"{fast_origin.url}/elsewhere"),
        replay.Response(status=204),
    )
    replay.Cassette([other]).save(cassette)
    app = program(tmp_path, STREAM)

    result = replay_cli(
        "run", "--mode", "none", str(cassette), "--", sys.executable, app, fast_origin.url
    )

    assert result.returncode == 1
    assert "Traceback" in result.stderr  # the program's own
    assert "replay.errors.CassetteMismatchError: POST " in result.stderr
    assert fast_origin.requests == []


# -- the live status line --------------------------------------------------------------------------


TOKENS = """
import sys
import httpx

with httpx.Client() as client:
    with client.stream("POST", sys.argv[1] + "/v1/responses", json={"input": "hi"}) as response:
        for line in response.iter_lines():
            if line.startswith("event: "):
                print(line[len("event: ") :], end=" ", flush=True)  # a token, no line break
print("END")
"""

# What replay writes to the terminal around the program's output: keeping the last row
# (a line break, the scrolling region), each redraw there, and giving the row back.
_KEEP = re.compile(r"\n\x1b\[1A\x1b7\x1b\[1;23r\x1b8")
_DRAW = re.compile(r"\x1b7\x1b\[24;1H(replay: recording: [^\x1b]*)\x1b\[K\x1b8")
_GIVE_BACK = "\x1b7\x1b[24;1H\x1b[K\x1b[r\x1b8"


def test_status_line_keeps_to_the_last_row_and_leaves_the_programs_output_whole(
    tmp_path: Path, origin: Origin
) -> None:
    # The program streams tokens with no line break to the same terminal as the status line:
    # the status must not erase them.
    cassette = tmp_path / "c.msgpack"
    app = program(tmp_path, TOKENS)
    controller, terminal = pty.openpty()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    process = subprocess.Popen(
        [sys.executable, "-m", "replay.cli", "record", str(cassette), "--", sys.executable, app,
         origin.url],
        stdout=terminal,
        stderr=terminal,
        start_new_session=True,
    )  # fmt: skip
    os.close(terminal)
    shown = read_pty(controller, deadline=time.monotonic() + 30)
    process.wait(timeout=10)
    assert process.returncode == 0
    assert len(_KEEP.findall(shown)) == 1
    draws = _DRAW.findall(shown)
    assert draws
    assert all(draw.startswith("replay: recording: 1 request, ") for draw in draws)
    assert shown.count(_GIVE_BACK) == 1
    assert "\r\x1b[K" not in shown  # the program's line is never erased
    # Without replay's own writes, the program's output is whole: every token, in order.
    program_output = _DRAW.sub("", _KEEP.sub("", shown)).replace(_GIVE_BACK, "")
    expected = " ".join(event for event, _ in _hello_events()) + " END"
    assert expected in program_output
    assert "replay: recorded 1 interaction" in shown


def _hello_events() -> list[tuple[str, bytes]]:
    return [
        (chunk.split(b"\n", 1)[0].removeprefix(b"event: ").decode(), chunk)
        for _, chunk in responses_hello()
    ]


def test_no_status_line_when_stderr_is_not_a_terminal(tmp_path: Path, fast_origin: Origin) -> None:
    app = program(tmp_path, STREAM)
    result = replay_cli("record", str(tmp_path / "c.msgpack"), "--", sys.executable, app,
                        fast_origin.url)  # fmt: skip
    assert result.returncode == 0
    assert "\r" not in result.stderr
    assert "recording:" not in result.stderr


# -- the pieces the verbs print from ---------------------------------------------------------------


def test_progress_lines_round_trip_and_reject_garbage() -> None:
    progress = Progress(requests=2, events=18, body_bytes=5800)
    assert Progress.decode(progress.encode()) == progress
    assert Progress.decode(b"2 lots 5800\n") is None
    assert Progress.decode(b"") is None


def test_summary_shows_no_events_for_a_body_that_is_not_an_event_stream() -> None:
    json_body = replay.Interaction(
        replay.Request(method="GET", url="https://api.example.com/v1/models"),
        replay.Response(
            status=200,
            headers=[("content-type", "application/json")],
            chunks=[replay.Chunk(0.25, b"{}")],
        ),
    )
    lines = summary_lines(Path("c.msgpack"), [json_body])
    # No stream, no token: no time to first token (the duration is still there).
    assert lines[2].split() == ["GET", "https://api.example.com/v1/models", "200", "-", "-",
                                "0.250", "s"]  # fmt: skip
    assert lines[3] == "  total: 1 interaction, 0 events, 2 B"


def test_summary_counts_a_websocket_conversations_frames() -> None:
    frames = [
        Frame(0.01, "server", "text", b'{"type": "session.created"}'),
        Frame(0.02, "client", "text", b'{"type": "response.create"}'),
        Frame(0.25, "server", "text", b'{"type": "response.done"}'),
    ]
    conversation = replay.Interaction(
        replay.Request(method="GET", url="ws://127.0.0.1:1/v1/realtime"),
        replay.Response(status=101, chunks=[], end=replay.StreamEnd(at=0.25)),
        frames=frames,
    )
    lines = summary_lines(Path("c.msgpack"), [conversation])
    assert lines[2].split()[:5] == ["GET", "ws://127.0.0.1:1/v1/realtime", "101", "3", "-"]
    assert lines[3] == f"  total: 1 interaction, 3 events, {sum(len(f.data) for f in frames)} B"


# -- recordings whose stamps a blocked event loop could delay ----------------------------------

ASYNC_APPS = {
    "own-transport": "transport=Own()",
    "httpx-transport": "",
}
ASYNC_APP = """
import sys
import anyio
import httpx

class Own(httpx.AsyncHTTPTransport):
    '''An application's own transport: replay reads its bodies on the event loop.'''

async def main() -> None:
    async with httpx.AsyncClient({transport}) as client:
        response = await client.post(sys.argv[1] + "/v1/responses", json={{"input": "hi"}})
        print(response.status_code)

anyio.run(main)
"""


@pytest.mark.parametrize("app", list(ASYNC_APPS))
def test_record_warns_about_recordings_read_on_the_programs_event_loop(
    fast_origin: Origin, tmp_path: Path, app: str
) -> None:
    source = ASYNC_APP.format(transport=ASYNC_APPS[app])
    out = tmp_path / "async.msgpack"
    result = replay_cli(
        "record", str(out), "--", sys.executable, program(tmp_path, source), fast_origin.url
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "200\n"
    warned = "read on the program's event loop" in result.stderr
    assert warned == (app == "own-transport")
    if warned:
        assert f"POST {fast_origin.url}/v1/responses" in result.stderr


def test_run_lets_an_ignored_host_go_live_unrecorded(fast_origin: Origin, tmp_path: Path) -> None:
    cassette = tmp_path / "empty.msgpack"
    replay.Cassette().save(cassette)
    app = program(tmp_path, STREAM)
    refused = replay_cli("run", str(cassette), "--", sys.executable, app, fast_origin.url)
    assert refused.returncode != 0
    assert "CassetteMismatchError" in refused.stderr
    assert "let it go live with --ignore-host 127.0.0.1." in refused.stderr  # run's own flag
    assert fast_origin.requests == []
    let_through = ("--ignore-host", "127.0.0.1")
    result = replay_cli(
        "run", str(cassette), *let_through, "--", sys.executable, app, fast_origin.url
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("200 ")
    assert len(fast_origin.requests) == 1
    assert replay.Cassette.load(cassette).interactions == []


# -- runs that never used the cassette say so --------------------------------------------------

NOT_REACHED = "replay: no request went through the cassette: "


@pytest.mark.parametrize(
    ("command", "why"),
    [
        pytest.param(["sh", "-c", "echo hi"], "no process of CMD loaded replay", id="not-python"),
        pytest.param(
            [sys.executable, "-I", "-c", "print('isolated')"],
            "no process of CMD loaded replay",
            id="isolated-python",
        ),
        pytest.param(
            [sys.executable, "-c", "import urllib.request"],
            "CMD sent none through httpx, httpx2, httpcore, aiohttp, requests, urllib3 or "
            "http.client",
            id="no-request",
        ),
    ],
)
@pytest.mark.parametrize("verb", ["run", "record"])
def test_a_program_whose_requests_never_reach_the_cassette_is_told(
    tmp_path: Path, verb: str, command: list[str], why: str
) -> None:
    cassette = tmp_path / "c.msgpack"
    replay.Cassette().save(cassette)
    result = replay_cli(verb, str(cassette), "--", *command)
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines()[-1] == NOT_REACHED + why + (
        " (CMD is not a Python program, or runs Python with -I, -S or -E, or a Python without "
        "replay installed)"
        if why.startswith("no process")
        else " (the clients replay serves)"
    )


def test_a_run_whose_requests_went_through_says_nothing_more(
    tmp_path: Path, fast_origin: Origin
) -> None:
    cassette = tmp_path / "c.msgpack"
    app = program(tmp_path, STREAM)
    recorded = replay_cli("record", str(cassette), "--", sys.executable, app, fast_origin.url)
    assert recorded.returncode == 0, recorded.stderr
    ran = replay_cli("run", str(cassette), "--", sys.executable, app, fast_origin.url)
    assert ran.returncode == 0, ran.stderr
    assert NOT_REACHED not in recorded.stderr + ran.stderr


def test_run_in_mode_once_records_a_cassette_that_does_not_exist_yet(
    tmp_path: Path, fast_origin: Origin
) -> None:
    cassette = tmp_path / "new.msgpack"
    app = program(tmp_path, STREAM)
    result = replay_cli(
        "run", str(cassette), "--mode", "once", "--", sys.executable, app, fast_origin.url
    )
    assert result.returncode == 0, result.stderr
    assert len(replay.Cassette.load(cassette).interactions) == 1
    offline = replay_cli("run", str(cassette), "--", sys.executable, app, fast_origin.url)
    assert offline.returncode == 0, offline.stderr
    assert len(fast_origin.requests) == 1  # the second run was served by the cassette


def test_a_mismatch_inside_replay_run_advises_its_flags(
    tmp_path: Path, fast_origin: Origin
) -> None:
    cassette = tmp_path / "c.msgpack"
    replay.Cassette().save(cassette)
    app = program(tmp_path, STREAM)
    result = replay_cli("run", str(cassette), "--", sys.executable, app, fast_origin.url)
    assert result.returncode == 1
    assert "CassetteMismatchError" in result.stderr
    assert "To record it, run again with --mode new_episodes" in result.stderr
    assert "record_mode=" not in result.stderr
    assert fast_origin.requests == []


def test_record_keeps_a_stream_long_enough_to_be_spooled(tmp_path: Path) -> None:
    # Its payloads wait in the session's spool until the session ends, at the program's exit:
    # the spool's descriptor must outlive the exit hooks that would close it first.
    block = bytes(range(256)) * 256
    routes = {"/v1/responses": Script(chunks=[(0.0, block)] * 48)}  # 3 MiB: past SPOOL_PIECE
    out = tmp_path / "long.msgpack"
    with Origin(routes) as origin:
        result = replay_cli("record", str(out), "--", sys.executable, program(tmp_path, STREAM),
                            origin.url)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [f"200 {48 * len(block)}"]
    [interaction] = replay.Cassette.load(out).interactions
    assert b"".join(interaction.response.chunks.payloads) == block * 48
