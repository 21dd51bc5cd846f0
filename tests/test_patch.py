"""Routing every httpx and httpx2 client in the process through the active session.

The transports' request methods are patched while a session (or any router) is installed,
and the library's own functions are back in place when the last one leaves. Clients built
before a session, and transports of every kind (HTTP, Mock, WSGI, ASGI), are covered.
"""

from __future__ import annotations

import importlib
import inspect
import subprocess
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio
import pytest

import replay
from replay.adapters import patch
from replay.testing import Origin, Script

TARGETS = [
    pytest.param(module, cls, method, id=f"{module}.{cls}.{method}")
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

RECORDED = b"data: recorded\n\n"
LIVE = b"data: live\n\n"


def method_of(module: str, cls: str, method: str) -> Any:
    return vars(getattr(importlib.import_module(module), cls))[method]


def is_the_librarys_own(function: Any, module: str) -> bool:
    return str(function.__module__).partition(".")[0] == module


@pytest.fixture(params=["httpx", "httpx2"])
def http(request: pytest.FixtureRequest) -> ModuleType:
    """The client library: both are patched the same way."""
    return importlib.import_module(request.param)


@pytest.fixture
def recorded(tmp_path: Path) -> Path:
    """A cassette file answering GET http://127.0.0.1:9/ (where nothing listens) with RECORDED."""
    path = tmp_path / "recorded.msgpack"
    interaction = replay.Interaction(
        replay.Request(method="GET", url="http://127.0.0.1:9/"),
        replay.Response(status=200, chunks=[replay.Chunk(0.0, RECORDED)]),
    )
    replay.Cassette([interaction]).save(path)
    return path


# --- on and off -------------------------------------------------------------------------


@pytest.mark.parametrize(("module", "cls", "method"), TARGETS)
def test_transport_method_is_patched_only_while_a_session_is_active(
    module: str, cls: str, method: str, tmp_path: Path
) -> None:
    original = method_of(module, cls, method)
    assert is_the_librarys_own(original, module)

    with replay.use_cassette(tmp_path / "c.msgpack"):
        assert method_of(module, cls, method) is not original
        assert inspect.iscoroutinefunction(method_of(module, cls, method)) == (
            method == "handle_async_request"
        )

    assert method_of(module, cls, method) is original


class AnswerWith:
    """A router that answers every request itself, with a fixed body."""

    def __init__(self, body: bytes) -> None:
        self.body = body

    def handle(self, request: Any, send: patch.Send) -> Any:
        return self._response(request)

    async def ahandle(self, request: Any, send: patch.AsyncSend) -> Any:
        return self._response(request)

    def _response(self, request: Any) -> Any:
        module = importlib.import_module(type(request).__module__.partition(".")[0])
        return module.Response(200, content=self.body)


def mock_client(http: ModuleType) -> Any:
    return http.Client(
        transport=http.MockTransport(lambda request: http.Response(200, content=LIVE))
    )


def test_the_innermost_router_answers_and_the_last_out_restores(http: ModuleType) -> None:
    original = method_of(http.__name__, "MockTransport", "handle_request")
    outer, inner = AnswerWith(b"outer"), AnswerWith(b"inner")

    with mock_client(http) as client:
        patch.install(outer)
        patch.install(inner)
        try:
            assert client.get("http://a.test/").content == b"inner"
            patch.uninstall(inner)
            assert client.get("http://a.test/").content == b"outer"
        finally:
            patch.uninstall(inner)  # harmless when already out
            patch.uninstall(outer)
        assert client.get("http://a.test/").content == LIVE

    assert method_of(http.__name__, "MockTransport", "handle_request") is original


def test_a_hold_keeps_the_patches_on_with_no_router_and_they_send_as_if_unpatched(
    http: ModuleType,
) -> None:
    original = method_of(http.__name__, "MockTransport", "handle_request")
    router = AnswerWith(b"routed")

    with mock_client(http) as client:
        patch.install(router)
        patched = method_of(http.__name__, "MockTransport", "handle_request")
        patch.hold()
        patch.uninstall(router)
        try:
            assert method_of(http.__name__, "MockTransport", "handle_request") is patched
            assert client.get("http://a.test/").content == LIVE  # no router: live
            patch.install(router)  # not patched again: the same patch serves it
            assert method_of(http.__name__, "MockTransport", "handle_request") is patched
            assert client.get("http://a.test/").content == b"routed"
        finally:
            patch.release()
        assert method_of(http.__name__, "MockTransport", "handle_request") is patched
        patch.uninstall(router)

    assert method_of(http.__name__, "MockTransport", "handle_request") is original


def test_a_hold_alone_patches_and_its_release_restores(http: ModuleType) -> None:
    original = method_of(http.__name__, "MockTransport", "handle_request")
    patch.hold()
    try:
        assert method_of(http.__name__, "MockTransport", "handle_request") is not original
    finally:
        patch.release()
    assert method_of(http.__name__, "MockTransport", "handle_request") is original
    with pytest.raises(RuntimeError, match="without a hold"):
        patch.release()


def test_routers_may_leave_in_any_order(http: ModuleType) -> None:
    original = method_of(http.__name__, "MockTransport", "handle_request")
    outer, inner = AnswerWith(b"outer"), AnswerWith(b"inner")

    with mock_client(http) as client:
        patch.install(outer)
        patch.install(inner)
        patch.uninstall(outer)
        try:
            assert client.get("http://a.test/").content == b"inner"
        finally:
            patch.uninstall(inner)
        assert client.get("http://a.test/").content == LIVE

    assert method_of(http.__name__, "MockTransport", "handle_request") is original


def test_a_bottom_router_answers_only_when_no_other_router_is_installed(
    http: ModuleType,
) -> None:
    bottom, session = AnswerWith(b"bottom"), AnswerWith(b"session")

    with mock_client(http) as client:
        patch.install_bottom(bottom)
        try:
            assert client.get("http://a.test/").content == b"bottom"
            patch.install(session)
            try:
                assert client.get("http://a.test/").content == b"session"
            finally:
                patch.uninstall(session)
            assert client.get("http://a.test/").content == b"bottom"
        finally:
            patch.uninstall(bottom)
        assert client.get("http://a.test/").content == LIVE


def test_router_can_send_to_the_real_transport(http: ModuleType) -> None:
    class PassThrough(AnswerWith):
        def handle(self, request: Any, send: patch.Send) -> Any:
            return send(request)

    router = PassThrough(b"unused")
    patch.install(router)
    try:
        with mock_client(http) as client:
            assert client.get("http://a.test/").content == LIVE
    finally:
        patch.uninstall(router)


# --- clients made before the session ----------------------------------------------------


def test_sync_client_made_before_the_session_is_routed(http: ModuleType, recorded: Path) -> None:
    with http.Client() as client:  # would fail to connect: nothing listens on port 9
        with replay.use_cassette(recorded, record_mode="none") as cassette:
            assert client.get("http://127.0.0.1:9/").content == RECORDED
        with pytest.raises(http.ConnectError):
            client.get("http://127.0.0.1:9/")

    assert cassette.all_played


def test_async_client_made_before_the_session_is_routed(http: ModuleType, recorded: Path) -> None:
    async def main() -> bytes:
        async with http.AsyncClient() as client:
            async with replay.use_cassette(recorded, record_mode="none"):
                response = await client.get("http://127.0.0.1:9/")
            return bytes(response.content)

    assert anyio.run(main) == RECORDED


def test_client_made_before_the_session_records_through_it(
    http: ModuleType, cassette_path: Path
) -> None:
    with (
        Origin({"/live": Script(chunks=[(0.0, LIVE)])}) as origin,
        http.Client() as client,
        replay.use_cassette(cassette_path) as cassette,  # entered after the client was made
    ):
        client.get(f"{origin.url}/live")

    assert [i.response.body for i in cassette.interactions] == [LIVE]


# --- Mock, WSGI and ASGI transports -----------------------------------------------------


def wsgi_app(body: bytes) -> Callable[..., Iterable[bytes]]:
    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        start_response("200 OK", [("content-type", "text/event-stream")])
        return [body]

    return app


def asgi_app(body: bytes) -> Callable[..., Any]:
    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        headers = [(b"content-type", b"text/event-stream")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    return app


def handler(http: ModuleType, body: bytes) -> Callable[[Any], Any]:
    return lambda request: http.Response(200, content=body)


SYNC_KINDS = {
    "mock": lambda http, body: http.MockTransport(handler(http, body)),
    "wsgi": lambda http, body: http.WSGITransport(app=wsgi_app(body)),
}
ASYNC_KINDS = {
    "mock": lambda http, body: http.MockTransport(handler(http, body)),
    "asgi": lambda http, body: http.ASGITransport(app=asgi_app(body)),
}


@pytest.mark.parametrize("kind", sorted(SYNC_KINDS))
def test_sync_in_process_transports_record_and_replay(
    http: ModuleType, kind: str, cassette_path: Path
) -> None:
    def get(body: bytes) -> bytes:
        with http.Client(transport=SYNC_KINDS[kind](http, body)) as client:
            return bytes(client.get("http://app.test/stream").content)

    with replay.use_cassette(cassette_path):
        assert get(RECORDED) == RECORDED
    with replay.use_cassette(cassette_path, record_mode="none"):
        replayed = get(LIVE)  # the app now answers differently; the cassette answers first

    assert replayed == RECORDED


@pytest.mark.parametrize("kind", sorted(ASYNC_KINDS))
def test_async_in_process_transports_record_and_replay(
    http: ModuleType, kind: str, cassette_path: Path
) -> None:
    async def get(body: bytes) -> bytes:
        async with http.AsyncClient(transport=ASYNC_KINDS[kind](http, body)) as client:
            return bytes((await client.get("http://app.test/stream")).content)

    async def main() -> bytes:
        async with replay.use_cassette(cassette_path):
            assert await get(RECORDED) == RECORDED
        async with replay.use_cassette(cassette_path, record_mode="none"):
            return await get(LIVE)

    assert anyio.run(main) == RECORDED


LATE_IMPORT = """
import sys
import replay

with replay.use_cassette(sys.argv[1], record_mode="none"):
    assert "concurrent.futures.thread" not in sys.modules, "the executor imported eagerly"
    from concurrent.futures import ThreadPoolExecutor

    patched = ThreadPoolExecutor.submit.__module__ == "replay.adapters.patch"
    assert patched, "the executor not patched"
    assert "aiohttp" not in sys.modules and "requests" not in sys.modules, "imported eagerly"
    assert "httpx2" not in sys.modules, "httpx2 imported eagerly"
    import aiohttp
    import httpx2
    from requests.adapters import HTTPAdapter

    assert getattr(httpx2.HTTPTransport.handle_request, "_replay_patch", False), "httpx2"

    assert hasattr(aiohttp.ClientSession._request, "__wrapped__"), "aiohttp not patched"
    assert HTTPAdapter.send.__module__ == "replay.adapters.requests", "requests not patched"
    assert type(aiohttp.__loader__).__name__ == "SourceFileLoader", aiohttp.__loader__
assert not hasattr(aiohttp.ClientSession._request, "__wrapped__"), "aiohttp left patched"
assert not hasattr(httpx2.HTTPTransport.handle_request, "_replay_patch"), "httpx2 left patched"
assert HTTPAdapter.send.__module__ == "requests.adapters", "requests left patched"
assert ThreadPoolExecutor.submit.__module__ == "concurrent.futures.thread", "left patched"
assert not any("PatchOnImport" in type(f).__name__ for f in sys.meta_path), sys.meta_path
print("ok")
"""


def test_a_library_imported_inside_a_session_is_patched_and_restored(tmp_path: Path) -> None:
    """httpx2, aiohttp and requests are not imported by a session (some 120 ms), nor is the
    thread pool executor, yet one first imported while a session is active is patched (the
    executor's `submit` carries the sessions over), and restored after it."""
    result = subprocess.run(
        [sys.executable, "-c", LATE_IMPORT, str(tmp_path / "none.msgpack")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.stdout.strip() == "ok", result.stderr
