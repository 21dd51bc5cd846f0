"""The README's code blocks, run as written: a first run that records, and a second that replays.

Every fenced block of README.md is either run here or listed in `NOT_RUN` with the reason, and
a block that is neither fails `test_every_block_is_run_or_listed`. A block is named by the
heading it sits under (up to a colon) and its place there: "In pytest #1".

How they run, as a user would run them, against the local origin (`replay.testing.origin`) that the
SDKs reach through their documented variables (OPENAI_BASE_URL, ANTHROPIC_BASE_URL, with
dummy keys), so that the README's code stays exactly what a user copies:

- programs (`PROGRAMS`): `python block.py` in a fresh directory, twice;
- test modules (`PYTEST_MODULES`): written side by side into one project and run by the
  README's own two pytest commands (`PYTEST_COMMANDS`), through pytester;
- shell blocks (`SHELL`): one directory, in order, each after the setup it needs (`app.py`
  is the user's program the README's commands run).

The first run of each has the origin up and may reach 127.0.0.1 only; every later run has the
origin stopped and no host allowed at all, loopback included, so a request there fails: the
network is blocked by `replay.block_network`, handed on through the environment to the
programs and shell blocks, and by the plugin's options in the pytest runs. The programs and
the shell blocks run in threads while pytester runs the tests.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from collections.abc import Collection, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import attrs
import pytest

import replay
from replay.adapters.network import LOOPBACK
from replay.testing import Origin

pytest_plugins = ["pytester"]

README = Path(__file__).resolve().parent.parent / "README.md"
TIMEOUT = 120.0

#: Standalone programs, run with `python`; the blocks of one group share a directory and run
#: in this order (the later ones read the cassette the first one records).
PROGRAMS = (
    ("With the openai SDK #1", "Speed #1", "Timing helpers #1"),
    ("With the openai SDK #3",),
    ("Sessions side by side #1",),
)

#: Test modules, written into one project, and the block of commands that runs them twice.
PYTEST_MODULES = (
    "With the openai SDK #2",
    "In pytest #1",
    "Faults #1",
    "Streams that resume #2",
    "Virtual time #1",
)
PYTEST_COMMANDS = "In pytest #2"
#: The project's ini: empty, as a reader's project may be (the README's async tests carry
#: pytest-asyncio's mark, as printed).
PYTEST_INI = "[pytest]\n"

#: The shell block that records (`replay record`, then `replay run`), with the origin up;
#: then the others, in this order in the same directory, each after its setup, offline.
RECORDS = "Record and replay a whole program #1"
SHELL = (
    ("The `replay` command #1", ""),
    ("Faults #2", ""),
    ("Inspect #1", ""),
    ("Inspect #2", "git init --quiet"),
    ("Convert #1", "mkdir old && replay convert cassettes/app.msgpack old/vcr_cassette.yaml"),
    ("Streams as events #1", "cp cassettes/app.msgpack old.msgpack; cp old.msgpack new.msgpack"),
    ("See the timing #1", ""),  # old.msgpack and new.msgpack: made just above
    ("See the timing #2", ""),
)

#: The program the README's shell blocks run (`python app.py --prompt hi`).
APP = """\
import argparse

import openai

parser = argparse.ArgumentParser()
parser.add_argument("--prompt", default="hi")
prompt = parser.parse_args().prompt
for event in openai.OpenAI().responses.create(model="gpt-4o-mini", input=prompt, stream=True):
    if event.type == "response.output_text.delta":
        print(event.delta, end="")
print()
"""

#: The blocks not run, and why.
NOT_RUN = {
    "Quick start #1": "installs the project and runs the whole suite; `replay demo` is run "
    "by tests/test_cli.py",
    "In pytest #3": "output: the report of a failing test (tests/test_pytest_plugin.py)",
    "Record modes #1": "output: a mismatch message (tests/test_matching.py)",
    "WebSockets (OpenAI Realtime, the Responses WebSocket mode) #2": "output: `replay show "
    "--events` of a conversation (tests/test_websocket_inspect.py)",
    "Streams that resume #1": "output: a mismatch message (tests/test_resume.py)",
    "Serve a cassette to any client, or record any client through a proxy #1": "a server that "
    "runs until stopped, and a Node client (`replay serve`: tests/test_serve.py)",
    "Serve a cassette to any client, or record any client through a proxy #2": "a proxy to "
    "the real API that runs until stopped, and a Node client (tests/test_proxy.py)",
    "Development #1": "installs the project and runs the whole suite, this file included",
}

#: The WebSocket program: its `ask` run against a loopback `RealtimeOrigin` (its URL for
#: OpenAI's), then again with the origin stopped.
WEBSOCKET = "WebSockets (OpenAI Realtime, the Responses WebSocket mode) #1"
OPENAI_REALTIME = "wss://api.openai.com/v1/realtime?model=gpt-realtime"


@attrs.frozen
class Block:
    """A fenced code block of the README."""

    name: str
    language: str
    text: str
    line: int


def readme_blocks() -> dict[str, Block]:
    """The README's fenced blocks by name: "<heading up to a colon> #<n>"."""
    blocks: dict[str, Block] = {}
    heading, count, fence = "", 0, None
    lines: list[str] = []
    for number, line in enumerate(README.read_text(encoding="utf-8").splitlines(), 1):
        if fence is None and (match := re.match(r"#{1,6} (.+)", line)):
            heading, count = match[1].split(":")[0], 0
        elif fence is None and line.startswith("```"):
            fence, lines, count = (line[3:].strip(), number), [], count + 1
        elif fence is not None and line.startswith("```"):
            name = f"{heading} #{count}"
            blocks[name] = Block(name, fence[0], "\n".join(lines) + "\n", fence[1])
            fence = None
        elif fence is not None:
            lines.append(line)
    return blocks


BLOCKS = readme_blocks()


def slug(name: str) -> str:
    """A block's name as a module name: "In pytest #1" -> "in_pytest_1"."""
    return re.sub(r"\W+", "_", name).strip("_").lower()


def run_listed() -> list[str]:
    return [
        *(name for group in PROGRAMS for name in group),
        *PYTEST_MODULES,
        PYTEST_COMMANDS,
        RECORDS,
        *(name for name, _ in SHELL),
        WEBSOCKET,
    ]


def test_every_block_is_run_or_listed() -> None:
    run = run_listed()
    assert len(run) == len(set(run)), "a block is run twice"
    assert not set(run) & set(NOT_RUN), "a block is both run and listed as not run"
    unknown = (set(run) | set(NOT_RUN)) - set(BLOCKS)
    assert not unknown, f"no such README block (renamed or removed?): {sorted(unknown)}"
    untested = [
        f"README.md:{block.line}: {name}: {block.text.splitlines()[0]!r}"
        for name, block in BLOCKS.items()
        if name not in run and name not in NOT_RUN
    ]
    assert not untested, "run these blocks here, or list them in NOT_RUN with the reason"


def test_the_readme_code_is_formatted() -> None:
    # ruff formats the Python blocks of Markdown files (0.17 on): `ruff format --check .`.
    result = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--check", str(README)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


# --- running blocks -----------------------------------------------------------------------


@attrs.frozen
class Ran:
    """One block run once: what ran, its exit status and its output."""

    name: str
    command: str
    returncode: int
    output: str

    def explain(self) -> str:
        return f"{self.name}: `{self.command}` exited {self.returncode}\n{self.output}"


@attrs.frozen
class Environments:
    """The environments of the first run (loopback only) and of the later ones (no host)."""

    live: dict[str, str]
    offline: dict[str, str]

    def first(self, origin_url: str) -> dict[str, str]:
        return {**self.live, **sdk_variables(origin_url)}

    def later(self, origin_url: str) -> dict[str, str]:
        return {**self.offline, **sdk_variables(origin_url)}


def sdk_variables(origin_url: str) -> dict[str, str]:
    return {
        "OPENAI_BASE_URL": f"{origin_url}/v1",
        "OPENAI_API_KEY": "sk-readme-test",
        "ANTHROPIC_BASE_URL": origin_url,
        "ANTHROPIC_API_KEY": "sk-ant-readme-test",
    }


def _blocked(allowed_hosts: Collection[str]) -> dict[str, str]:
    """The environment in which Python processes block their network but `allowed_hosts`:
    what `replay.block_network` hands on to the processes started under it."""
    with replay.block_network(allowed_hosts):
        environment = dict(os.environ)
    scripts = str(Path(sys.executable).parent)  # replay, python and pytest of this venv
    environment["PATH"] = os.pathsep.join((scripts, environment.get("PATH", "")))
    environment["GIT_CONFIG_GLOBAL"] = os.devnull  # git: none of this user's settings
    environment["GIT_CONFIG_NOSYSTEM"] = "1"
    return environment


def shell(name: str, command: str, directory: Path, environment: dict[str, str]) -> Ran:
    result = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", command],
        cwd=directory,
        env=environment,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    return Ran(name, command, result.returncode, result.stdout + result.stderr)


def commands(block: Block) -> str:
    """A shell script of the block: a console block's `$ ` lines, or a bash block whole."""
    if block.language != "console":
        return block.text
    return "".join(line[2:] + "\n" for line in block.text.splitlines() if line.startswith("$ "))


def run_programs(group: tuple[str, ...], directory: Path, environments: Environments) -> list[Ran]:
    """Each program of `group`, in order, with the origin up, then again with it stopped."""
    files = {}
    for name in group:
        path = directory / f"{slug(name)}.py"
        path.write_text(BLOCKS[name].text, encoding="utf-8")
        files[name] = path.name
    with Origin() as origin:
        url = origin.url
        ran = [
            shell(name, f"python {files[name]}", directory, environments.first(url))
            for name in group
        ]
        if not origin.requests:
            ran.append(Ran(group[0], "", 1, "the first run sent the origin no request"))
    ran += [
        shell(name, f"python {files[name]}", directory, environments.later(url)) for name in group
    ]
    return ran


def run_shell(directory: Path, environments: Environments) -> list[Ran]:
    """`RECORDS` with the origin up (it must reach it once), then the others in order."""
    (directory / "app.py").write_text(APP, encoding="utf-8")
    with Origin() as origin:
        url = origin.url
        ran = [shell(RECORDS, commands(BLOCKS[RECORDS]), directory, environments.first(url))]
        requests = len(origin.requests)
    if requests != 1:
        ran.append(Ran(RECORDS, "", 1, f"the origin got {requests} requests, not 1"))
    for name, setup in SHELL:
        if setup:
            ran.append(shell(f"{name} (setup)", setup, directory, environments.later(url)))
        ran.append(shell(name, commands(BLOCKS[name]), directory, environments.later(url)))
    return ran


@pytest.fixture(scope="module")
def environments() -> Environments:
    return Environments(live=_blocked(LOOPBACK), offline=_blocked(()))


@pytest.fixture(scope="module")
def background(
    tmp_path_factory: pytest.TempPathFactory, environments: Environments
) -> Iterator[dict[str, Future[list[Ran]]]]:
    """The programs and the shell blocks, started in threads (each runs its own processes)."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {
            group[0]: pool.submit(
                run_programs, group, tmp_path_factory.mktemp("program"), environments
            )
            for group in PROGRAMS
        }
        futures["shell"] = pool.submit(run_shell, tmp_path_factory.mktemp("shell"), environments)
        yield futures


def failures(ran: list[Ran]) -> str:
    return "\n\n".join(r.explain() for r in ran if r.returncode != 0)


def test_the_test_blocks_pass_when_recording_and_when_replaying(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    background: dict[str, Future[list[Ran]]],
) -> None:
    pytester.makeini(PYTEST_INI)
    sources = {f"test_{slug(name)}": BLOCKS[name].text for name in PYTEST_MODULES}
    pytester.makepyfile(**sources)
    tests = sum(len(re.findall(r"^(?:async )?def test_", text, re.M)) for text in sources.values())
    first, second = (
        shlex.split(line, comments=True) for line in BLOCKS[PYTEST_COMMANDS].text.splitlines()
    )
    assert first[0] == second[0] == "pytest"

    with Origin() as origin:
        for name, value in sdk_variables(origin.url).items():
            monkeypatch.setenv(name, value)
        # The first run may reach loopback only, every later one no host at all.
        run_pytest(pytester, *first[1:], "-o", "replay_block_network=true", passed=tests)
        assert origin.requests
    run_pytest(pytester, *second[1:], "-o", "replay_allowed_hosts=", passed=tests)


def run_pytest(pytester: pytest.Pytester, *args: str, passed: int) -> None:
    """Run pytest in a subprocess; every test must pass. pytest-recording (the `coexist`
    extra), which the README's reader may not have, is left out where installed (it shares
    replay's flags)."""
    result = pytester.runpytest_subprocess("-p", "no:recording", *args, timeout=TIMEOUT)
    result.assert_outcomes(passed=passed)


@pytest.mark.parametrize("group", PROGRAMS, ids=lambda group: " + ".join(group))
def test_the_programs_run_when_recording_and_when_replaying(
    group: tuple[str, ...], background: dict[str, Future[list[Ran]]]
) -> None:
    ran = background[group[0]].result(timeout=4 * TIMEOUT)

    assert not failures(ran), failures(ran)
    assert len(ran) == 2 * len(group)


def test_the_shell_blocks_run_offline_after_recording(
    background: dict[str, Future[list[Ran]]],
) -> None:
    ran = background["shell"].result(timeout=4 * TIMEOUT)

    assert not failures(ran), failures(ran)


def test_the_websocket_block_records_then_replays_offline(
    tmp_path: Path, environments: Environments
) -> None:
    from replay.testing.realtime import RealtimeOrigin

    with RealtimeOrigin() as origin:
        program = BLOCKS[WEBSOCKET].text.replace(OPENAI_REALTIME, origin.url)
        assert program != BLOCKS[WEBSOCKET].text
        runner = "\nimport asyncio\n\nasyncio.run(ask('sk-readme-test'))\n"
        (tmp_path / "ws.py").write_text(program + runner, encoding="utf-8")
        first = shell(WEBSOCKET, "python ws.py", tmp_path, environments.first(origin.url))
        assert origin.connections == 1
    again = shell(WEBSOCKET, "python ws.py", tmp_path, environments.later(origin.url))
    for ran in (first, again):
        assert ran.returncode == 0, ran.explain()
        assert ran.output.strip() == "{}", ran.explain()
