"""`use_cassette`: record modes, the load/save lifecycle, patching on enter and exit.

Requests go through real httpx clients to a real local origin; `origin.requests` shows what
reached the network, the cassette file what was saved.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest

import replay
from replay.store.file import dumps
from replay.testing import Origin, Script

TRANSPORT_METHODS = [
    (module, cls, method)
    for module in ("httpx", "httpx2")
    for cls, method in [
        ("HTTPTransport", "handle_request"),
        ("AsyncHTTPTransport", "handle_async_request"),
        ("MockTransport", "handle_request"),
        ("MockTransport", "handle_async_request"),
        ("WSGITransport", "handle_request"),
        ("ASGITransport", "handle_async_request"),
    ]
]


def originals() -> dict[tuple[str, str, str], Any]:
    """Each patchable transport method as its class holds it now."""
    return {
        (m, c, f): vars(getattr(importlib.import_module(m), c))[f] for m, c, f in TRANSPORT_METHODS
    }


@pytest.fixture
def origin() -> Iterator[Origin]:
    """An origin answering /echo with the request body, and /fixed with one SSE event."""
    routes = {
        "/echo": Script(echo=True),
        "/fixed": Script(chunks=[(0.0, b"data: first\n\n")]),
    }
    with Origin(routes) as server:
        yield server


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """Async sessions run on asyncio and on trio (replay waits with anyio)."""
    return str(request.param)


def ask(origin_url: str, question: str) -> bytes:
    """POST `question` to the echo route; the answer is the question (live or replayed)."""
    return httpx.post(f"{origin_url}/echo", content=question.encode()).content


def saved_bodies(path: Path) -> list[bytes]:
    """The response bodies in the cassette file, in order."""
    return [i.response.body for i in replay.Cassette.load(path).interactions]


def record(path: Path, origin: Origin, *questions: str) -> None:
    with replay.use_cassette(path, record_mode="all"):
        for question in questions:
            ask(origin.url, question)
    origin.requests.clear()


# --- record modes -----------------------------------------------------------------------


@pytest.mark.parametrize("file_exists", [False, True], ids=["no-file", "file"])
def test_mode_none_refuses_unmatched_requests_before_connecting(
    origin: Origin, cassette_path: Path, file_exists: bool
) -> None:
    if file_exists:
        record(cassette_path, origin, "known")

    with (
        replay.use_cassette(cassette_path, record_mode="none"),
        pytest.raises(replay.CassetteMismatchError) as caught,
    ):
        ask(origin.url, "unknown")

    assert origin.requests == []
    assert cassette_path.exists() == file_exists
    # A missing file is most likely a typo in its path: the error says so, naming it.
    missing = f"The cassette file {str(cassette_path)!r} does not exist."
    assert (missing in str(caught.value)) != file_exists


def test_mode_none_replays_what_matches(origin: Origin, cassette_path: Path) -> None:
    record(cassette_path, origin, "known")

    with replay.use_cassette(cassette_path, record_mode="none") as cassette:
        assert ask(origin.url, "known") == b"known"

    assert origin.requests == []
    assert cassette.all_played


def test_mode_once_records_when_the_file_is_missing(origin: Origin, cassette_path: Path) -> None:
    with replay.use_cassette(cassette_path, record_mode="once") as cassette:
        assert ask(origin.url, "a") == b"a"
        assert ask(origin.url, "a") == b"a"  # recorded twice, not replayed from memory

    assert len(origin.requests) == 2
    assert len(cassette.recorded) == 2
    assert saved_bodies(cassette_path) == [b"a", b"a"]


def test_mode_once_replays_only_when_the_file_exists(origin: Origin, cassette_path: Path) -> None:
    record(cassette_path, origin, "a")

    with replay.use_cassette(cassette_path, record_mode="once"):
        assert ask(origin.url, "a") == b"a"
        with pytest.raises(replay.CassetteMismatchError, match="'once'"):
            ask(origin.url, "new")

    assert origin.requests == []
    assert saved_bodies(cassette_path) == [b"a"]


def test_mode_new_episodes_replays_known_and_records_new(
    origin: Origin, cassette_path: Path
) -> None:
    record(cassette_path, origin, "known")

    with replay.use_cassette(cassette_path, record_mode="new_episodes") as cassette:
        assert ask(origin.url, "known") == b"known"
        assert ask(origin.url, "new") == b"new"

    assert [r.body for r in origin.requests] == [b"new"]
    assert cassette.play_count == 1
    assert saved_bodies(cassette_path) == [b"known", b"new"]


def test_mode_new_episodes_does_not_replay_what_it_recorded_itself(
    origin: Origin, cassette_path: Path
) -> None:
    record(cassette_path, origin, "known")

    with replay.use_cassette(cassette_path, record_mode="new_episodes") as cassette:
        ask(origin.url, "new")
        ask(origin.url, "new")  # asked again: live again, as in a run without a cassette

    assert [r.body for r in origin.requests] == [b"new", b"new"]
    assert cassette.play_count == 0
    assert saved_bodies(cassette_path) == [b"known", b"new", b"new"]


def test_mode_all_records_everything_and_never_replays(origin: Origin, cassette_path: Path) -> None:
    record(cassette_path, origin, "a", "b")

    with replay.use_cassette(cassette_path, record_mode="all") as cassette:
        ask(origin.url, "a")
        ask(origin.url, "b")

    assert [r.body for r in origin.requests] == [b"a", b"b"]
    assert cassette.play_count == 0


def test_mode_all_replaces_re_recorded_requests_in_the_file(
    origin: Origin, cassette_path: Path
) -> None:
    with replay.use_cassette(cassette_path, record_mode="all"):
        httpx.get(f"{origin.url}/fixed")
        ask(origin.url, "kept")
    origin.route("/fixed", Script(chunks=[(0.0, b"data: second\n\n")]))

    with replay.use_cassette(cassette_path, record_mode="all"):
        assert httpx.get(f"{origin.url}/fixed").content == b"data: second\n\n"

    assert saved_bodies(cassette_path) == [b"kept", b"data: second\n\n"]


@pytest.mark.parametrize(
    ("mode", "reaches_origin"),
    [("none", False), ("once", False), ("new_episodes", False), ("all", True)],
)
def test_which_modes_replay_a_recorded_request(
    origin: Origin, cassette_path: Path, mode: str, reaches_origin: bool
) -> None:
    record(cassette_path, origin, "a")

    with replay.use_cassette(cassette_path, record_mode=mode):
        assert ask(origin.url, "a") == b"a"

    assert bool(origin.requests) == reaches_origin


# --- saving -----------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["none", "once", "new_episodes"])
def test_file_is_untouched_when_nothing_was_recorded(
    origin: Origin, cassette_path: Path, mode: str
) -> None:
    record(cassette_path, origin, "a")
    before = cassette_path.stat()

    with replay.use_cassette(cassette_path, record_mode=mode):
        ask(origin.url, "a")

    after = cassette_path.stat()
    assert (after.st_mtime_ns, after.st_ino) == (before.st_mtime_ns, before.st_ino)


def test_no_file_is_created_when_nothing_was_recorded(cassette_path: Path) -> None:
    with replay.use_cassette(cassette_path):
        pass

    assert not cassette_path.exists()


def test_file_is_saved_on_exit_after_an_exception(origin: Origin, cassette_path: Path) -> None:
    def record_then_fail() -> None:
        with replay.use_cassette(cassette_path):
            ask(origin.url, "a")
            raise KeyError("boom")

    with pytest.raises(KeyError):
        record_then_fail()

    assert saved_bodies(cassette_path) == [b"a"]


@pytest.mark.parametrize(("mode", "saved"), [("none", False), ("new_episodes", True)])
def test_session_tells_whether_it_saved(
    origin: Origin, cassette_path: Path, mode: str, saved: bool
) -> None:
    record(cassette_path, origin, "known")
    session = replay.use_cassette(cassette_path, record_mode=mode)

    with session, contextlib.suppress(replay.CassetteMismatchError):
        ask(origin.url, "known")
        ask(origin.url, "new")

    assert session.saved == saved


def test_session_keeps_the_mismatches_a_client_swallowed(
    origin: Origin, cassette_path: Path
) -> None:
    session = replay.use_cassette(cassette_path, record_mode="none")

    with session, contextlib.suppress(replay.CassetteMismatchError):
        ask(origin.url, "unknown")

    assert [(e.method, e.url) for e in session.mismatches] == [("POST", f"{origin.url}/echo")]


def test_a_request_that_fails_to_connect_records_nothing(cassette_path: Path) -> None:
    with replay.use_cassette(cassette_path) as cassette, pytest.raises(httpx.ConnectError):
        httpx.get("http://127.0.0.1:9/nothing-listens-here")

    assert cassette.recorded == []
    assert not cassette_path.exists()


def test_a_body_still_streaming_at_exit_is_saved_truncated(
    origin: Origin, cassette_path: Path
) -> None:
    origin.route("/endless", Script(chunks=[(0.0, b"data: 1\n\n")], end="hang"))
    with httpx.Client() as client:
        # The session stops waiting long before httpx's own 5 s read timeout could end it.
        with replay.use_cassette(cassette_path, finish_timeout=0.5):
            response = client.send(
                client.build_request("GET", f"{origin.url}/endless"), stream=True
            )
            assert next(response.iter_raw()) == b"data: 1\n\n"
        response.close()

    (interaction,) = replay.Cassette.load(cassette_path).interactions
    assert interaction.response.body == b"data: 1\n\n"
    assert interaction.response.end.truncated


# --- patching and restoring -------------------------------------------------------------


@pytest.mark.parametrize("raises", [False, True], ids=["clean-exit", "exception"])
def test_transports_are_restored_on_exit(cassette_path: Path, raises: bool) -> None:
    before = originals()

    with (
        pytest.raises(RuntimeError) if raises else contextlib.nullcontext(),
        replay.use_cassette(cassette_path),
    ):
        assert originals() != before
        if raises:
            raise RuntimeError("inside the session")

    after = originals()
    assert all(after[key] is before[key] for key in before)


@pytest.mark.anyio
async def test_transports_are_restored_on_async_exit_after_an_exception(
    cassette_path: Path,
) -> None:
    before = originals()

    with pytest.raises(RuntimeError):
        async with replay.use_cassette(cassette_path):
            raise RuntimeError("inside the session")

    after = originals()
    assert all(after[key] is before[key] for key in before)


def test_transports_are_restored_when_the_file_is_corrupt(cassette_path: Path) -> None:
    cassette_path.parent.mkdir(parents=True)
    cassette_path.write_bytes(b"garbage")
    before = originals()

    with pytest.raises(replay.CassetteFormatError), replay.use_cassette(cassette_path):
        pass

    after = originals()
    assert all(after[key] is before[key] for key in before)


@pytest.mark.anyio
async def test_async_context_manager_records_then_replays(
    origin: Origin, cassette_path: Path
) -> None:
    async with httpx2.AsyncClient() as client:
        async with replay.use_cassette(cassette_path):
            live = (await client.post(f"{origin.url}/echo", content=b"async")).content
        async with replay.use_cassette(cassette_path, record_mode="none") as cassette:
            replayed = (await client.post(f"{origin.url}/echo", content=b"async")).content

    assert live == replayed == b"async"
    assert len(origin.requests) == 1
    assert cassette.all_played


# --- decorator --------------------------------------------------------------------------


def test_decorated_function_runs_each_call_in_a_fresh_session(
    origin: Origin, cassette_path: Path
) -> None:
    @replay.use_cassette(cassette_path)
    def ask_twice() -> tuple[bytes, bytes]:
        return ask(origin.url, "q"), ask(origin.url, "q")

    first = ask_twice()  # no file yet: records both
    second = ask_twice()  # the file exists now: replays both

    assert first == second == (b"q", b"q")
    assert len(origin.requests) == 2
    assert len(replay.Cassette.load(cassette_path).interactions) == 2


def test_decorated_async_function_runs_each_call_in_a_fresh_session(
    origin: Origin, cassette_path: Path
) -> None:
    @replay.use_cassette(cassette_path)
    async def ask_async(question: str) -> bytes:
        async with httpx.AsyncClient() as client:
            response = await client.post(f"{origin.url}/echo", content=question.encode())
            return response.content

    first = anyio.run(ask_async, "q")
    second = anyio.run(ask_async, "q")

    assert first == second == b"q"
    assert len(origin.requests) == 1


def test_decorated_function_keeps_its_name_and_result(cassette_path: Path) -> None:
    @replay.use_cassette(cassette_path)
    def answer(x: int) -> int:
        """Doubles."""
        return 2 * x

    assert (answer(21), answer.__name__, answer.__doc__) == (42, "answer", "Doubles.")


# --- nesting ----------------------------------------------------------------------------


def test_the_innermost_session_answers_then_the_outer_one_again(
    origin: Origin, tmp_path: Path
) -> None:
    outer_path, inner_path = tmp_path / "outer.msgpack", tmp_path / "inner.msgpack"
    before = originals()

    with replay.use_cassette(outer_path) as outer:
        ask(origin.url, "outer-1")
        with replay.use_cassette(inner_path) as inner:
            ask(origin.url, "inner")
        ask(origin.url, "outer-2")
        assert originals() != before  # the outer session still routes

    assert [i.response.body for i in inner.interactions] == [b"inner"]
    assert [i.response.body for i in outer.interactions] == [b"outer-1", b"outer-2"]
    assert saved_bodies(outer_path) == [b"outer-1", b"outer-2"]
    assert originals() == before


def test_a_session_cannot_be_entered_twice_at_once(cassette_path: Path) -> None:
    session = replay.use_cassette(cassette_path)
    with session, pytest.raises(replay.ConfigurationError, match="already in use"):
        session.__enter__()


def test_a_session_can_be_used_again_after_exit(origin: Origin, cassette_path: Path) -> None:
    session = replay.use_cassette(cassette_path)
    with session:
        ask(origin.url, "a")
    with session:
        assert ask(origin.url, "a") == b"a"

    assert len(origin.requests) == 1


# --- configuration and corrupt files ----------------------------------------------------


@pytest.mark.parametrize(
    "options",
    [
        pytest.param({"record_mode": "sometimes"}, id="unknown-record-mode"),
        pytest.param({"record_mode": "NONE"}, id="record-mode-case"),
        pytest.param({"speed": 0}, id="speed-zero"),
        pytest.param({"speed": -1}, id="speed-negative"),
        pytest.param({"speed": "fast"}, id="speed-word"),
        pytest.param({"speed": float("nan")}, id="speed-nan"),
        pytest.param({"match_on": ("method", "bogus")}, id="unknown-matcher"),
        pytest.param({"match_on": "body"}, id="matcher-string-not-sequence"),
    ],
)
def test_bad_arguments_raise_configuration_error_at_construction(
    cassette_path: Path, options: dict[str, Any]
) -> None:
    with pytest.raises(replay.ConfigurationError):
        replay.use_cassette(cassette_path, **options)


def test_a_sessions_options_are_one_checked_frozen_value(cassette_path: Path) -> None:
    session = replay.use_cassette(
        cassette_path,
        record_mode="none",
        speed="10x",
        match_on=["method", "path"],
        faults=["cut(after_events=5)"],
        finish_timeout=2,
        ignore_localhost=1,  # type: ignore[arg-type]
    )
    options = session.options
    assert (options.record_mode, options.speed, options.match_on) == (
        "none",
        "10x",
        ("method", "path"),
    )
    assert options.faults == (replay.faults.cut(after_events=5),)
    assert (options.finish_timeout, options.ignore_localhost) == (2.0, True)
    with pytest.raises(AttributeError):
        options.speed = 1  # type: ignore[misc]


def _valid_cassette() -> bytes:
    interaction = replay.Interaction(
        replay.Request(method="GET", url="http://api.test/"),
        replay.Response(status=200, chunks=[replay.Chunk(0.1, b"data: x\n\n")]),
    )
    return dumps([interaction])


@pytest.mark.parametrize(
    "content",
    [
        pytest.param(b"", id="empty"),
        pytest.param(b"\xc1 not msgpack", id="garbage"),
        pytest.param(_valid_cassette()[:-7], id="truncated"),
        pytest.param(b"\x93\x01\x02\x03", id="wrong-shape"),
    ],
)
def test_corrupt_file_raises_cassette_format_error_on_enter(
    cassette_path: Path, content: bytes
) -> None:
    cassette_path.parent.mkdir(parents=True)
    cassette_path.write_bytes(content)
    session = replay.use_cassette(cassette_path)  # constructing does not read the file

    with pytest.raises(replay.CassetteFormatError) as raised, session:
        pass

    assert str(cassette_path) in str(raised.value)
