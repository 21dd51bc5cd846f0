"""A session reaches every Python process it starts, and no child loses what it recorded.

Real `multiprocessing` workers of each start method, real subprocesses (given an env of
their own), a real loopback origin that counts its hits: in replay mode no child reaches
it; in record mode every child's interaction is in the cassette, also a child that ends
with `os._exit` or is SIGKILLed right after its request.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import multiprocessing
import multiprocessing.forkserver
import os
import signal
import socket
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import httpx
import pytest

import replay
from replay.adapters.network import block_network
from replay.model import Interaction
from replay.run.descendants import HOOK_DIRECTORY, active_settings
from replay.run.settings import ENV_CASSETTE, ENV_MATCH_ON
from replay.store.file import load_interactions
from replay.testing import Origin, Script

pytestmark = [
    pytest.mark.skipif(os.name != "posix", reason="fork, forkserver, flock"),
    # (Python 3.12+ warns of a fork beside threads: the origin's, here, which the child leaves)
    pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning"),
]

METHODS = ("fork", "forkserver", "spawn")
PATHS = [f"/{name}" for name in (*METHODS, "executor", "own-env", "minimal-env", "parent")]


@pytest.fixture(scope="module")
def echo() -> Iterator[Origin]:
    """An origin whose every route answers with its own path."""
    routes = [
        *PATHS,
        "/unrecorded",
        *(f"/{m}/{i}" for m in ("fork", "forkserver") for i in range(6)),
    ]
    with Origin({path: Script(chunks=[(0.0, path.encode())]) for path in routes}) as origin:
        yield origin


def fetch(url: str) -> str:
    """In a worker: the body, or the name of the error raised."""
    try:
        return httpx.get(url).text
    except Exception as error:
        return type(error).__name__


def fetch_then_die(url: str, how: str) -> None:
    """In a worker: fetch, then end without any clean-up."""
    httpx.get(url).read()
    if how == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    os._exit(0)


def tag(interaction: Interaction) -> Interaction:
    """A `before_record` hook that pickles: it marks what it stored."""
    request = interaction.request
    tagged = attrs.evolve(request, headers=(*request.headers, ("x-tagged", "yes")))
    return attrs.evolve(interaction, request=tagged)


def _subprocess(url: str, env: dict[str, str]) -> str:
    code = (
        f"import httpx\ntry:\n print(httpx.get({url!r}).text)\n"
        "except Exception as e:\n print(type(e).__name__)"
    )
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    return done.stdout.strip() or done.stderr.strip().splitlines()[-1]


def every_child(base: str) -> list[str]:
    """One request from a worker of each start method, a ProcessPoolExecutor's, a
    subprocess given an env of its own and one given a minimal env."""
    answers = []
    for method in METHODS:
        with multiprocessing.get_context(method).Pool(1) as pool:  # (its exit terminates)
            answers.append(pool.apply(fetch, (f"{base}/{method}",)))
    spawn = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=spawn) as executor:
        answers.append(executor.submit(fetch, f"{base}/executor").result())
    answers.append(_subprocess(f"{base}/own-env", {**os.environ, "PYTHONPATH": "src"}))
    answers.append(_subprocess(f"{base}/minimal-env", {"PATH": os.environ.get("PATH", "")}))
    return answers


def paths(cassette: Path) -> list[str]:
    return sorted(httpx.URL(i.request.url).path for i in load_interactions(cassette))


def test_every_child_records_then_replays_without_the_network(echo: Origin, tmp_path: Path) -> None:
    cassette = tmp_path / "c.msgpack"
    with replay.use_cassette(cassette, record_mode="all"):
        answers = [fetch(f"{echo.url}/parent"), *every_child(echo.url)]
    assert answers == [PATHS[-1], *PATHS[:-1]]
    assert paths(cassette) == sorted(PATHS)
    assert [p.name for p in tmp_path.iterdir()] == ["c.msgpack"]  # no parts left

    echo.requests.clear()
    with replay.use_cassette(cassette, record_mode="none"):
        answers = [fetch(f"{echo.url}/parent"), *every_child(echo.url)]
    assert answers == [PATHS[-1], *PATHS[:-1]]
    assert echo.requests == []


@pytest.mark.parametrize("method", ["forkserver", "spawn"])
def test_an_unrecorded_request_in_a_child_fails_loudly(
    echo: Origin, tmp_path: Path, method: str
) -> None:
    cassette = tmp_path / "c.msgpack"
    with replay.use_cassette(cassette, record_mode="all"):
        fetch(f"{echo.url}/parent")
    echo.requests.clear()
    multiprocessing.forkserver.ensure_running()  # (started before the session: reached too)
    with replay.use_cassette(cassette, record_mode="none"):
        with multiprocessing.get_context(method).Pool(1) as pool:
            answer = pool.apply(fetch, (f"{echo.url}/unrecorded",))
        minimal = _subprocess(f"{echo.url}/unrecorded", {"PATH": os.environ.get("PATH", "")})
    assert answer == minimal == "CassetteMismatchError"
    assert echo.requests == []


@pytest.mark.parametrize("how", ["exit", "kill"])
def test_what_a_child_finished_is_kept_though_it_never_exits_cleanly(
    echo: Origin, tmp_path: Path, how: str
) -> None:
    cassette = tmp_path / "c.msgpack"
    with replay.use_cassette(cassette, record_mode="all"):
        children = [
            multiprocessing.get_context(method).Process(
                target=fetch_then_die, args=(f"{echo.url}/{method}", how)
            )
            for method in ("fork", "spawn")
        ]
        for child in children:
            child.start()
        for child in children:
            child.join()
    assert [child.exitcode for child in children] == [-9, -9] if how == "kill" else [0, 0]
    assert paths(cassette) == ["/fork", "/spawn"]


def test_a_hook_that_pickles_reaches_a_worker_and_one_that_does_not_stops_it(
    echo: Origin, tmp_path: Path
) -> None:
    cassette = tmp_path / "c.msgpack"
    spawn = multiprocessing.get_context("spawn")
    with replay.use_cassette(cassette, record_mode="all", before_record=tag):
        with spawn.Pool(1) as pool:
            assert pool.apply(fetch, (f"{echo.url}/spawn",)) == "/spawn"
        own = _subprocess(f"{echo.url}/own-env", {"PATH": os.environ.get("PATH", "")})
    assert own == "CassetteMismatchError"  # an exec'd child cannot run the hook: refused
    (stored,) = load_interactions(cassette)
    assert stored.request.header("x-tagged") == "yes"

    echo.requests.clear()
    with (
        replay.use_cassette(cassette, record_mode="all", before_record=lambda i: i),
        spawn.Pool(1) as pool,
    ):
        assert pool.apply(fetch, (f"{echo.url}/fork",)) == "CassetteMismatchError"
    assert echo.requests == []


CONNECT = textwrap.dedent(
    """
    import socket
    try:
        socket.create_connection(("203.0.113.1", 80), timeout=5)
    except Exception as error:
        print(type(error).__name__)
    """
)


def connect() -> str:
    """In a worker: what connecting to TEST-NET-3 raises."""
    try:
        socket.create_connection(("203.0.113.1", 80), timeout=5)
    except Exception as error:
        return type(error).__name__
    return "connected"


async def _in_asyncio_subprocess(env: dict[str, str]) -> str:
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-c", CONNECT, env=env, stdout=asyncio.subprocess.PIPE
    )
    out, _ = await child.communicate()
    return out.decode().strip()


def test_a_block_reaches_children_with_an_env_of_their_own_and_a_forkserver_started_before(
    tmp_path: Path,
) -> None:
    minimal = {"PATH": os.environ.get("PATH", "")}
    multiprocessing.forkserver.ensure_running()
    with block_network():
        done = subprocess.run(
            [sys.executable, "-c", CONNECT], env=minimal, capture_output=True, text=True
        )
        in_asyncio = asyncio.run(_in_asyncio_subprocess(minimal))
        with multiprocessing.get_context("forkserver").Pool(1) as pool:
            in_worker = pool.apply(connect)
        out = tmp_path / "out"
        opened = (os.POSIX_SPAWN_OPEN, 1, str(out), os.O_WRONLY | os.O_CREAT, 0o600)
        pid = os.posix_spawn(
            sys.executable, [sys.executable, "-c", CONNECT], minimal, file_actions=[opened]
        )
        os.waitpid(pid, 0)
    answers = [done.stdout.strip(), in_asyncio, in_worker, out.read_text().strip()]
    assert answers == ["NetworkBlockedError"] * 4


APP = """
import multiprocessing, sys
import httpx

def get(url):
    return httpx.get(url).text

if __name__ == "__main__":
    base = sys.argv[1]
    print(get(base + "/parent"))
    pool = multiprocessing.get_context("fork").Pool(2)
    print(pool.map(get, [f"{base}/fork/{i}" for i in range(6)]))
    pool.close()
    pool.join()
    with multiprocessing.get_context("forkserver").Pool(2) as pool:  # terminated at exit
        print(pool.map(get, [f"{base}/forkserver/{i}" for i in range(6)]))
"""


def test_replay_record_keeps_every_request_of_fork_and_forkserver_pools(
    echo: Origin, tmp_path: Path
) -> None:
    app = tmp_path / "app.py"
    app.write_text(APP)
    out = tmp_path / "out.msgpack"
    command = [sys.executable, "-m", "replay.cli", "record", str(out), "--"]
    done = subprocess.run(  # (a bound: a hung pool fails here, with its output, not at 120 s)
        [*command, sys.executable, str(app), echo.url], capture_output=True, text=True, timeout=55
    )
    assert done.returncode == 0, done.stderr
    assert len(load_interactions(out)) == 13
    assert "note" not in done.stderr
    assert "Traceback" not in done.stderr
    assert "SystemExit" not in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["app.py", "out.msgpack"]

    echo.requests.clear()
    command = [sys.executable, "-m", "replay.cli", "run", str(out), "--"]
    replayed = subprocess.run(
        [*command, sys.executable, str(app), echo.url], capture_output=True, text=True, timeout=55
    )
    assert replayed.returncode == 0, replayed.stderr
    assert replayed.stdout == done.stdout
    assert echo.requests == []


HOOKED = """
import multiprocessing, sys
import attrs, httpx, replay

def tag(interaction):
    request = interaction.request
    tagged = attrs.evolve(request, headers=(*request.headers, ("x-tagged", "main")))
    return attrs.evolve(interaction, request=tagged)

def get(url):
    return httpx.get(url).text

if __name__ == "__main__":
    with replay.use_cassette(sys.argv[2], record_mode="all", before_record=tag):
        with multiprocessing.get_context("forkserver").Pool(1) as pool:
            print(pool.apply(get, (sys.argv[1] + "/forkserver",)))
"""


def test_a_hook_in_the_main_script_reaches_a_forkserver_worker(
    echo: Origin, tmp_path: Path
) -> None:
    script = tmp_path / "hooked.py"
    script.write_text(HOOKED)
    cassette = tmp_path / "c.msgpack"
    done = subprocess.run(
        [sys.executable, str(script), echo.url, str(cassette)], capture_output=True, text=True
    )
    assert done.stdout.strip() == "/forkserver", done.stderr
    (stored,) = load_interactions(cassette)
    assert stored.request.header("x-tagged") == "main"


def test_an_inner_session_replaces_the_outer_ones_settings_and_all_are_put_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONPATH", "/somewhere")
    before = dict(os.environ)
    outer, inner = tmp_path / "outer.msgpack", tmp_path / "inner.msgpack"
    with replay.use_cassette(outer, record_mode="all", match_on=["method", "path"]):
        assert os.environ[ENV_CASSETTE] == str(outer)
        assert json.loads(os.environ[ENV_MATCH_ON]) == ["method", "path"]
        assert os.environ["PYTHONPATH"] == os.pathsep.join([HOOK_DIRECTORY, "/somewhere"])
        with replay.use_cassette(inner, record_mode="all"):
            assert active_settings()[ENV_CASSETTE] == os.environ[ENV_CASSETTE] == str(inner)
            assert ENV_MATCH_ON not in os.environ  # the outer session's, not the inner's
        assert os.environ[ENV_CASSETTE] == str(outer)
        assert ENV_MATCH_ON in os.environ
    assert dict(os.environ) == before
    assert active_settings() == {}


POOL_ONLY = """
import multiprocessing, sys
import httpx

def get(url):
    return httpx.get(url).text

if __name__ == "__main__":
    with multiprocessing.get_context(sys.argv[2]).Pool(1) as pool:  # terminated at exit
        print(pool.apply(get, (sys.argv[1] + "/forkserver",)))
"""


def test_replay_run_counts_what_went_through_workers_that_were_terminated(
    echo: Origin, tmp_path: Path
) -> None:
    cassette = tmp_path / "c.msgpack"
    with replay.use_cassette(cassette, record_mode="all"):
        fetch(f"{echo.url}/forkserver")
    app = tmp_path / "app.py"
    app.write_text(POOL_ONLY)
    echo.requests.clear()
    command = [sys.executable, "-m", "replay.cli", "run", str(cassette), "--"]
    done = subprocess.run(
        [*command, sys.executable, str(app), echo.url, "forkserver"],
        capture_output=True,
        text=True,
    )
    assert (done.returncode, done.stdout.strip(), done.stderr) == (0, "/forkserver", "")
    assert echo.requests == []


def fetch_then_wait(url: str, done: Any) -> None:
    """In a worker: fetch, say so, then live on until told to end."""
    httpx.get(url).read()
    done.send("fetched")
    done.recv()


def test_what_a_child_still_running_recorded_is_merged_by_the_next_session(
    echo: Origin, tmp_path: Path
) -> None:
    cassette = tmp_path / "c.msgpack"
    fork = multiprocessing.get_context("fork")
    ours, theirs = fork.Pipe()
    with replay.use_cassette(cassette, record_mode="all"):
        child = fork.Process(target=fetch_then_wait, args=(f"{echo.url}/fork", theirs))
        child.start()
        assert ours.recv() == "fetched"
    assert not cassette.exists()  # the child holds its parts: the parent leaves them
    ours.send("end")
    child.join()
    with replay.use_cassette(cassette, record_mode="all"):
        pass
    assert paths(cassette) == ["/fork"]
