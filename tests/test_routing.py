"""Which session a request belongs to when sessions overlap, and how a session's exit ends
what is still streaming.

A request goes to the session of the context that makes it: the coroutine or thread that
entered the session, or a thread started inside it. A thread started outside every session
while several are active cannot be placed: its request fails before reaching the network.
On exit, a session waits (up to `finish_timeout`) for the bodies still streaming, so that
they are saved whole; what is still open after the wait is saved as the session ended it.

Everything runs against a real local origin, through the real openai SDK and httpx. Overlap
is forced with barriers and events, never with sleeps; the only delays are the origin's.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

import replay
from replay.adapters import patch
from replay.adapters import reader as _reader
from replay.testing import HELLO_TEXT, Origin, Script, responses_hello

KEY = "sk-test-key"
TIMEOUT = 5.0  # how long any wait on another thread or coroutine may take before the test fails

FIRST_CHUNK = b"data: 1\n\n"
FIVE_CHUNKS = [(0.02, b"data: %d\n\n" % n) for n in range(5)]  # 20 ms apart: ~100 ms in all


def routes() -> dict[str, Script]:
    return {
        # The Responses API stream at 1/10 of its delays: ~65 ms, the first event at ~30 ms.
        "/v1/responses": Script(chunks=responses_hello(scale=0.1)),
        "/echo": Script(echo=True),
        "/five": Script(chunks=FIVE_CHUNKS),
        "/endless": Script(chunks=[(0.0, FIRST_CHUNK)], end="hang"),
    }


@pytest.fixture
def origin() -> Iterator[Origin]:
    """An origin with a fast Responses API stream, an echo, a ~100 ms stream, an endless one."""
    with Origin(routes()) as server:
        yield server


def saved_inputs(path: Path) -> list[str]:
    """The `input` of each request saved in the cassette at `path` ([] without a file)."""
    if not path.exists():
        return []
    return [json.loads(i.request.body)["input"] for i in replay.Cassette.load(path).interactions]


def saved_bodies(path: Path) -> list[bytes]:
    """The request bodies saved in the cassette at `path` ([] without a file)."""
    if not path.exists():
        return []
    return [i.request.body for i in replay.Cassette.load(path).interactions]


def in_threads(barrier: threading.Barrier, *functions: Callable[[], Any]) -> list[Any]:
    """Run each function in its own thread; their results, or the first error raised.

    A failing function breaks `barrier`, so that the others do not wait for it forever.
    """
    results: dict[int, Any] = {}
    errors: list[BaseException] = []

    def run(index: int, function: Callable[[], Any]) -> None:
        try:
            results[index] = function()
        except BaseException as error:
            errors.append(error)
            barrier.abort()

    threads = [threading.Thread(target=run, args=item) for item in enumerate(functions)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(TIMEOUT)
    if errors:
        raise errors[0]
    assert not any(thread.is_alive() for thread in threads), "a thread is still running"
    return [results[index] for index in range(len(functions))]


@contextlib.contextmanager
def held_elsewhere(path: Path) -> Iterator[None]:
    """A second session, on the cassette at `path`, entered by another thread and held
    active until the block ends."""
    entered, release = threading.Event(), threading.Event()

    def hold() -> None:
        with replay.use_cassette(path):
            entered.set()
            release.wait(TIMEOUT)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert entered.wait(TIMEOUT)
        yield
    finally:
        release.set()
        holder.join(TIMEOUT)


class AsyncBarrier:
    """A one-shot barrier for coroutines (asyncio.Barrier is Python 3.11+)."""

    def __init__(self, parties: int) -> None:
        self._missing = parties
        self._open = asyncio.Event()

    async def wait(self) -> None:
        self._missing -= 1
        if self._missing == 0:
            self._open.set()
        await asyncio.wait_for(self._open.wait(), TIMEOUT)


# --- routing per context ----------------------------------------------------------------


async def two_async_sessions(url: str, paths: tuple[Path, Path], mode: str) -> list[Any]:
    """Through one shared client, each coroutine streams inside its own session; both sessions
    are active when both requests start, and both streams are open at once."""
    client = openai.AsyncOpenAI(api_key=KEY, base_url=f"{url}/v1", max_retries=0)
    entered, streaming = AsyncBarrier(2), AsyncBarrier(2)

    async def ask(path: Path, text: str) -> Any:
        async with replay.use_cassette(path, record_mode=mode):
            await entered.wait()
            stream = await client.responses.create(model="m", input=text, stream=True)
            async with stream:
                events = [await stream.__anext__()]
                await streaming.wait()
                events += [event async for event in stream]
        return [event.type for event in events], events[-1].response.output_text

    async with client:
        return list(await asyncio.gather(ask(paths[0], "first"), ask(paths[1], "second")))


def test_concurrent_asyncio_sessions_each_record_and_replay_their_own_requests(
    tmp_path: Path,
) -> None:
    paths = (tmp_path / "a.msgpack", tmp_path / "b.msgpack")
    with Origin(routes()) as origin:
        url = origin.url
        live = asyncio.run(two_async_sessions(url, paths, "once"))
        assert sorted(json.loads(r.body)["input"] for r in origin.requests) == ["first", "second"]

    assert (saved_inputs(paths[0]), saved_inputs(paths[1])) == (["first"], ["second"])
    # The origin is gone: anything not served from its own cassette would fail.
    replayed = asyncio.run(two_async_sessions(url, paths, "none"))
    assert [text for _, text in live] == [HELLO_TEXT, HELLO_TEXT]
    assert replayed == live


def two_thread_sessions(url: str, paths: tuple[Path, Path], mode: str) -> list[Any]:
    """The threaded twin of `two_async_sessions`: one shared sync client, a session per thread."""
    barrier = threading.Barrier(2, timeout=TIMEOUT)

    def ask(client: openai.OpenAI, path: Path, text: str) -> Any:
        with replay.use_cassette(path, record_mode=mode):
            barrier.wait()  # both sessions are active before either request starts
            with client.responses.create(model="m", input=text, stream=True) as stream:
                events = [next(stream)]
                barrier.wait()  # both streams are open
                events += list(stream)
        return [event.type for event in events], events[-1].response.output_text

    with openai.OpenAI(api_key=KEY, base_url=f"{url}/v1", max_retries=0) as client:
        return in_threads(
            barrier,
            lambda: ask(client, paths[0], "first"),
            lambda: ask(client, paths[1], "second"),
        )


def test_concurrent_thread_sessions_each_record_and_replay_their_own_requests(
    tmp_path: Path,
) -> None:
    paths = (tmp_path / "a.msgpack", tmp_path / "b.msgpack")
    with Origin(routes()) as origin:
        url = origin.url
        live = two_thread_sessions(url, paths, "once")
        assert sorted(json.loads(r.body)["input"] for r in origin.requests) == ["first", "second"]

    assert (saved_inputs(paths[0]), saved_inputs(paths[1])) == (["first"], ["second"])
    replayed = two_thread_sessions(url, paths, "none")
    assert [text for _, text in live] == [HELLO_TEXT, HELLO_TEXT]
    assert replayed == live


def from_executor(request: Callable[[], Any]) -> Any:
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(request).result(TIMEOUT)


def from_thread(request: Callable[[], Any]) -> Any:
    return in_threads(threading.Barrier(1), request)[0]


@pytest.mark.parametrize("start", [from_executor, from_thread], ids=["executor", "thread"])
@pytest.mark.parametrize("elsewhere", [False, True], ids=["alone", "other-session-elsewhere"])
def test_a_thread_started_inside_a_session_records_into_it(
    origin: Origin, tmp_path: Path, start: Callable[[Callable[[], Any]], Any], elsewhere: bool
) -> None:
    """With `elsewhere`, another thread enters a second session after this one, and keeps it
    active while the request is made: the request still belongs to the session it started in."""
    inside, other = tmp_path / "inside.msgpack", tmp_path / "other.msgpack"
    other_held = held_elsewhere(other) if elsewhere else contextlib.nullcontext()
    with httpx.Client() as client, replay.use_cassette(inside), other_held:
        answer = start(lambda: client.post(f"{origin.url}/echo", content=b"inside").content)

    assert answer == b"inside"
    assert saved_bodies(inside) == [b"inside"]
    assert saved_bodies(other) == []


def test_a_before_record_hook_sends_within_its_recordings_session(
    origin: Origin, tmp_path: Path
) -> None:
    """The hook runs in the thread that read the body, which belongs to the session that
    recorded it: a request the hook sends goes there too, though another session is active."""
    inside, other = tmp_path / "inside.msgpack", tmp_path / "other.msgpack"

    def hook(interaction: replay.Interaction) -> replay.Interaction:
        if interaction.request.body == b"inside":
            httpx.post(f"{origin.url}/echo", content=b"from the hook")
        return interaction

    with (
        held_elsewhere(other),
        httpx.Client() as client,
        replay.use_cassette(inside, before_record=hook),
    ):
        assert client.post(f"{origin.url}/echo", content=b"inside").content == b"inside"

    assert sorted(saved_bodies(inside)) == [b"from the hook", b"inside"]
    assert saved_bodies(other) == []


def test_a_reader_thread_lives_on_without_the_session_it_first_read_for(
    origin: Origin, tmp_path: Path
) -> None:
    """A recording's reader thread is reused for later bodies: started from a thread that
    belongs to a session, it must not belong to that session itself (it would keep it, and
    all it loaded, alive; and route a later hook's request there)."""
    _reader._WORKERS.end_idle()  # so that this recording starts a reader thread of its own

    def post() -> None:
        with httpx.Client() as client:
            assert client.post(f"{origin.url}/echo", content=b"x").content == b"x"

    with replay.use_cassette(tmp_path / "a.msgpack"):
        in_session = threading.Thread(target=post)  # it belongs to the session: so does `post`
        in_session.start()
        in_session.join(TIMEOUT)
    readers = [thread for thread in threading.enumerate() if thread.name.startswith("replay-")]
    assert readers, "the recording ran no reader thread"
    assert [reader for reader in readers if reader in patch._inherited] == []


def test_a_thread_started_outside_while_two_sessions_are_active_is_refused(
    origin: Origin, tmp_path: Path
) -> None:
    path_a, path_b = tmp_path / "a.msgpack", tmp_path / "b.msgpack"
    go, asked = threading.Event(), threading.Event()
    outcome: list[Any] = []

    def outsider() -> None:  # started before either session exists
        go.wait(TIMEOUT)
        try:
            outcome.append(httpx.post(f"{origin.url}/echo", content=b"outsider"))
        except Exception as error:
            outcome.append(error)
        finally:
            asked.set()

    def hold(path: Path, entered: threading.Event) -> None:
        with replay.use_cassette(path):
            entered.set()
            asked.wait(TIMEOUT)

    worker = threading.Thread(target=outsider)
    worker.start()
    a_entered, b_entered = threading.Event(), threading.Event()
    holders = [
        threading.Thread(target=hold, args=(path_a, a_entered)),
        threading.Thread(target=hold, args=(path_b, b_entered)),
    ]
    for holder in holders:
        holder.start()
    try:
        assert a_entered.wait(TIMEOUT)
        assert b_entered.wait(TIMEOUT)
    finally:
        go.set()
        for thread in [worker, *holders]:
            thread.join(TIMEOUT)

    (error,) = outcome
    assert isinstance(error, replay.AmbiguousSessionError), f"got {error!r}"
    assert issubclass(replay.AmbiguousSessionError, replay.ReplayError)
    assert str(path_a) in str(error)
    assert str(path_b) in str(error)
    assert origin.requests == []
    assert not path_a.exists()
    assert not path_b.exists()


# --- what a session's exit does to what is still streaming ------------------------------


@pytest.mark.parametrize("attempt", range(20))
def test_a_body_streaming_across_the_exit_is_saved_whole(
    origin: Origin, tmp_path: Path, attempt: int
) -> None:
    """The worker got its headers inside the block and reads to the end after the block left;
    a slow before_record hook widens the window between the body's end and its saving."""
    path = tmp_path / f"race-{attempt}.msgpack"
    headers, read = threading.Event(), []

    def slow_hook(interaction: replay.Interaction) -> replay.Interaction:
        time.sleep(0.05)
        return interaction

    def worker(client: httpx.Client) -> None:
        with client.stream("GET", f"{origin.url}/five") as response:
            headers.set()
            read.append(b"".join(response.iter_raw()))

    with httpx.Client() as client:
        with replay.use_cassette(path, record_mode="all", before_record=slow_hook):
            thread = threading.Thread(target=worker, args=(client,))
            thread.start()
            assert headers.wait(TIMEOUT)
        # Saved by the exit itself, not later: read before the worker is joined.
        interactions = replay.Cassette.load(path).interactions if path.exists() else []
        thread.join(TIMEOUT)

    full = b"".join(data for _, data in FIVE_CHUNKS)
    assert read == [full]
    assert len(interactions) == 1
    response = interactions[0].response
    assert response.body == full
    assert response.end.error is None
    assert not response.end.truncated


def test_a_body_still_open_after_the_bounded_wait_is_saved_as_ended_by_the_session(
    origin: Origin, cassette_path: Path
) -> None:
    with httpx.Client() as client:
        with replay.use_cassette(cassette_path, finish_timeout=0.3):
            response = client.send(
                client.build_request("GET", f"{origin.url}/endless"), stream=True
            )
            try:
                assert next(response.iter_raw()) == FIRST_CHUNK
            except BaseException:
                response.close()
                raise
            leaving = time.monotonic()
        waited = time.monotonic() - leaving
        response.close()

    assert 0.25 <= waited < 1.5  # the wait is bounded by finish_timeout (on a loaded machine)
    (interaction,) = replay.Cassette.load(cassette_path).interactions
    assert interaction.response.body == FIRST_CHUNK
    assert interaction.response.end.truncated
    assert interaction.response.end.stopped_by == "session"


def test_a_body_the_client_closed_early_is_saved_as_ended_by_the_client(
    origin: Origin, cassette_path: Path
) -> None:
    with (
        httpx.Client() as client,
        replay.use_cassette(cassette_path),
        client.stream("GET", f"{origin.url}/endless") as response,
    ):
        assert next(response.iter_raw()) == FIRST_CHUNK

    (interaction,) = replay.Cassette.load(cassette_path).interactions
    assert interaction.response.body == FIRST_CHUNK
    assert interaction.response.end.truncated
    assert interaction.response.end.stopped_by == "client"
