"""A recorded chunk's time is when the network delivered it, even while the client holds the GIL.

The origin runs in another process and writes its own `time.monotonic()` send time into each
SSE event (CLOCK_MONOTONIC is the machine's: the two processes' readings compare). The client
holds its GIL (a backtracking `re.match`, a C call that never lets go) for some 250 ms right
after the first chunk, while the rest of the stream arrives; the recorded gaps must still be
the origin's, within 5 ms: the stamper process read the connection meanwhile
(`replay.adapters.stamper`). httpx and httpx2, sync, asyncio and trio; requests; aiohttp;
plain HTTP and TLS (a self-signed certificate made here).
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import re
import signal
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import anyio
import httpx
import httpx2
import pytest
import requests
import urllib3
from certs import self_signed
from commands import replay_text

import replay
from replay import Cassette, Interaction, Request, Response
from replay.adapters import stamper
from replay.model import Chunk
from replay.store.file import dumps
from replay.store.load import LoadError, read_interactions

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="kernel receive timestamps: Linux"
)

EVENTS = 8
GAP = 0.03
TOLERANCE = 0.005

ORIGIN = r"""
import json, socket, ssl, sys, threading, time
chunks = [c.encode() for c in json.loads(open(sys.argv[1]).read())]
gap = float(sys.argv[2])
context = None
if len(sys.argv) > 3:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(sys.argv[3], sys.argv[4])
server = socket.create_server(("127.0.0.1", 0))
print(server.getsockname()[1], flush=True)

def serve(conn):
    with conn:
        if context is not None:
            conn = context.wrap_socket(conn, server_side=True)
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        got = b""
        while b"\r\n\r\n" not in got:
            piece = conn.recv(65536)
            if not piece:
                return
            got += piece
        if b"content-length:" in got.lower():  # a body: read it (short: one more read)
            conn.settimeout(0.2)
            try:
                conn.recv(65536)
            except OSError:
                pass
        conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                     b"transfer-encoding: chunked\r\nconnection: close\r\n\r\n")
        due = time.monotonic()
        for chunk in chunks:
            time.sleep(max(0.0, due - time.monotonic()))
            event = b": sent %.6f\n" % time.monotonic() + chunk
            conn.sendall(b"%x\r\n%s\r\n" % (len(event), event))
            due += gap
        conn.sendall(b"0\r\n\r\n")

while True:
    conn, _ = server.accept()
    threading.Thread(target=serve, args=(conn,), daemon=True).start()
"""


class Served:
    """The origin process: its URL, and the client's SSL context for it."""

    def __init__(self, url: str, context: ssl.SSLContext | None, cafile: str = "") -> None:
        self.url, self.context, self.cafile = url, context, cafile


def _origin(folder: Path, tls: bool, chunks: list[str] | None = None) -> Iterator[Served]:
    """The origin process sending `chunks` (default: `EVENTS` SSE events) `GAP` apart, each
    after an SSE comment line with its send time (`: sent <time.monotonic()>`)."""
    script, plan = folder / "origin.py", folder / "chunks.json"
    script.write_text(ORIGIN)
    plan.write_text(json.dumps(chunks or [f"data: {n}\n\n" for n in range(EVENTS)]))
    args = [sys.executable, str(script), str(plan), str(GAP)]
    context = None
    if tls:
        cert, key = self_signed(folder)
        args += [str(cert), str(key)]
        context = ssl.create_default_context(cafile=str(cert))
    process = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        port = int(process.stdout.readline())
        scheme = "https" if tls else "http"
        cafile = str(folder / "cert.pem") if tls else ""
        yield Served(f"{scheme}://127.0.0.1:{port}/stream", context, cafile)
    finally:
        process.kill()
        process.wait()
        if process.stdout is not None:
            process.stdout.close()


@pytest.fixture(scope="module", params=["plain", "tls"])
def served(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    yield from _origin(tmp_path_factory.mktemp(request.param), request.param == "tls")


@pytest.fixture(scope="module")
def hold() -> Any:
    """A call that holds the GIL for some 250 ms of CPU time (calibrated here: more wall
    time beside CPU hogs)."""
    size, took = 16, 0.0
    while took < 0.25:
        size += 1
        start = time.thread_time()
        re.match(r"(a+)+$", "a" * size + "b")
        took = time.thread_time() - start
        if took < 0.06:  # each "a" doubles it: skip ahead
            size += max(0, int(math.log2(0.06 / max(took, 1e-6))) - 1)
    text = "a" * size + "b"
    return lambda: re.match(r"(a+)+$", text)


def _sent(response: Any) -> list[float]:
    """The origin's send time of each chunk (from its comment line)."""
    return [float(c.data.split(b"\n", 1)[0].removeprefix(b": sent ")) for c in response.chunks]


def _gap_errors(response: Any) -> list[float]:
    """recorded gap - sent gap, for each chunk after the first."""
    sent, recorded = _sent(response), [c.at for c in response.chunks]
    return [(r - recorded[0]) - (t - sent[0]) for r, t in zip(recorded, sent, strict=True)]


def _check(cassette: Cassette, read_at: list[float]) -> None:
    """The recorded gaps are the origin's send gaps (within `TOLERANCE`), and the client
    really was held up between its first and second chunk."""
    [interaction] = read_interactions(dumps(cassette.interactions))
    _check_response(interaction.response, read_at)


def _check_response(response: Response, read_at: list[float]) -> None:
    assert response.times == "network"
    sent = _sent(response)
    assert len(sent) == EVENTS
    errors = _gap_errors(response)
    assert max(map(abs, errors)) < TOLERANCE, errors
    assert read_at[1] > sent[-1]  # the rest all arrived while the client held the GIL


@pytest.mark.parametrize("module", [httpx, httpx2], ids=["httpx", "httpx2"])
def test_sync_recording_keeps_the_network_gaps_while_the_client_holds_the_gil(
    served: Served, hold: Any, module: Any
) -> None:
    cassette = Cassette()
    inner = module.HTTPTransport(verify=served.context or True)
    read_at: list[float] = []
    client = module.Client(transport=replay.RecordingTransport(cassette, inner))
    with client, client.stream("GET", served.url) as response:
        for _ in response.iter_raw():
            read_at.append(time.monotonic())
            if len(read_at) == 1:
                hold()
    _check(cassette, read_at)


@pytest.mark.parametrize("runner", ["asyncio", "trio"])
@pytest.mark.parametrize("module", [httpx, httpx2], ids=["httpx", "httpx2"])
def test_async_recording_keeps_the_network_gaps_while_the_client_holds_the_gil(
    served: Served, hold: Any, module: Any, runner: str
) -> None:
    cassette = Cassette()
    read_at: list[float] = []

    async def main() -> None:
        inner = module.AsyncHTTPTransport(verify=served.context or True)
        transport = replay.AsyncRecordingTransport(cassette, inner)
        client = module.AsyncClient(transport=transport)
        async with client, client.stream("GET", served.url) as response:
            async for _ in response.aiter_raw():
                read_at.append(time.monotonic())
                if len(read_at) == 1:
                    hold()

    anyio.run(main, backend=runner)
    _check(cassette, read_at)


def _requests_get(
    session: requests.Session, served: Served, hold: Any, read_at: list[float]
) -> None:
    verify: Any = True
    if served.context is not None:
        verify = served.cafile
    with session.get(served.url, stream=True, verify=verify) as response:
        for _ in response.raw.stream(None):
            read_at.append(time.monotonic())
            if len(read_at) == 1:
                hold()


def test_requests_recording_keeps_the_network_gaps_while_the_client_holds_the_gil(
    served: Served, hold: Any, tmp_path: Path
) -> None:
    read_at: list[float] = []
    path = tmp_path / "c.msgpack"
    with replay.use_cassette(path, record_mode="all") as cassette, requests.Session() as session:
        _requests_get(session, served, hold, read_at)
        _requests_get(session, served, lambda: None, [])  # (a second one: stamped too)
    first, second = read_interactions(dumps(cassette.interactions))
    assert second.response.times == "network"
    _check_response(first.response, read_at)


async def _aiohttp_get(
    session: aiohttp.ClientSession, served: Served, hold: Any, read_at: list[float]
) -> None:
    async with session.get(served.url, ssl=served.context or True) as response:
        async for _ in response.content.iter_any():
            read_at.append(time.monotonic())
            if len(read_at) == 1:
                hold()


def test_aiohttp_recording_keeps_the_network_gaps_while_the_client_holds_the_gil(
    served: Served, hold: Any, tmp_path: Path
) -> None:
    read_at: list[float] = []

    async def main() -> None:
        async with aiohttp.ClientSession() as session:
            await _aiohttp_get(session, served, hold, read_at)
            await _aiohttp_get(session, served, lambda: None, [])  # (stamped too)

    with replay.use_cassette(tmp_path / "c.msgpack", record_mode="all") as cassette:
        asyncio.run(main())
    first, second = read_interactions(dumps(cassette.interactions))
    assert second.response.times == "network"
    _check_response(first.response, read_at)


# aiohttp read as before is aiohttp's own, unchanged: its fallbacks are tried over plain HTTP
# only (over TLS, a connection aiohttp closes waits for the origin's end, which a loaded
# machine may deliver after the event loop closed: a ResourceWarning).


class _OwnPoolManager(urllib3.PoolManager):
    """A pool manager of the user's own kind: its connections are read as before."""


class _OwnConnector(aiohttp.TCPConnector):
    """A connector of the user's own kind: its connections are read as before."""


def test_requests_and_aiohttp_connections_replay_cannot_copy_say_the_reader_took_the_times(
    served: Served, tmp_path: Path
) -> None:
    async def main() -> None:
        async with aiohttp.ClientSession(connector=_OwnConnector()) as session:
            await _aiohttp_get(session, served, lambda: None, [])

    with replay.use_cassette(tmp_path / "c.msgpack", record_mode="all") as cassette:
        with requests.Session() as session:
            adapter = requests.adapters.HTTPAdapter()
            adapter.poolmanager = _OwnPoolManager()
            session.mount("http://", adapter)
            session.mount("https://", adapter)
            _requests_get(session, served, lambda: None, [])
        if served.context is None:  # (aiohttp's own TLS: see above `_OwnPoolManager`)
            asyncio.run(main())
    kept = read_interactions(dumps(cassette.interactions))
    assert {i.response.times for i in kept} == {"reader"}
    assert all(i.response.body.count(b": sent ") == EVENTS for i in kept)


def test_a_patched_client_in_a_session_records_the_network_times(
    served: Served, hold: Any, tmp_path: Path
) -> None:
    read_at: list[float] = []
    path = tmp_path / "c.msgpack"
    with replay.use_cassette(path, record_mode="all") as cassette:
        client = httpx.Client(verify=served.context or True)
        with client, client.stream("GET", served.url) as response:
            for _ in response.iter_raw():
                read_at.append(time.monotonic())
                if len(read_at) == 1:
                    hold()
    _check(cassette, read_at)
    shown = replay_text("show", str(path)).stdout
    assert "times: network arrivals (read by the stamper process)" in shown
    assert "times: network)" in replay_text("show", "--raw", str(path)).stdout


def test_without_a_stamper_the_cassette_says_the_reader_took_the_times(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REPLAY_STAMPER", "off")
    cassette = Cassette()
    inner = httpx.HTTPTransport(verify=served.context or True)
    with httpx.Client(transport=replay.RecordingTransport(cassette, inner)) as client:
        assert client.get(served.url).content.count(b": sent ") == EVENTS
    [interaction] = read_interactions(dumps(cassette.interactions))
    assert interaction.response.times == "reader"


def test_without_a_stamper_requests_and_aiohttp_recordings_say_the_reader_took_the_times(
    served: Served, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("REPLAY_STAMPER", "off")

    async def main() -> None:
        async with aiohttp.ClientSession() as session:
            await _aiohttp_get(session, served, lambda: None, [])

    with replay.use_cassette(tmp_path / "c.msgpack", record_mode="all") as cassette:
        with requests.Session() as session:
            _requests_get(session, served, lambda: None, [])
        if served.context is None:  # (aiohttp's own TLS: see above `_OwnPoolManager`)
            asyncio.run(main())
    kept = read_interactions(dumps(cassette.interactions))
    assert {i.response.times for i in kept} == {"reader"}
    assert all(i.response.body.count(b": sent ") == EVENTS for i in kept)


def _record_one(url: str, context: ssl.SSLContext | None) -> str | None:
    cassette = Cassette()
    inner = httpx.HTTPTransport(verify=context or True)
    with httpx.Client(transport=replay.RecordingTransport(cassette, inner)) as client:
        client.get(url).read()
    [interaction] = cassette.interactions
    return interaction.response.times


@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_a_forked_child_starts_a_stamper_of_its_own(served: Served) -> None:
    assert _record_one(served.url, served.context) == "network"
    parent_stamper = stamper.pid()
    assert parent_stamper is not None
    pid = os.fork()
    if pid == 0:  # the child: the parent's stamper is not its own
        code = 1
        try:
            signal.alarm(10)
            times = _record_one(served.url, served.context)
            code = 0 if times == "network" and stamper.pid() not in (None, parent_stamper) else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert stamper.pid() == parent_stamper
    assert _record_one(served.url, served.context) == "network"  # still the parent's


def test_the_stamper_ends_with_its_process(served: Served) -> None:
    program = (
        "import httpx, replay\n"
        "from replay.adapters import stamper\n"
        "cassette = replay.Cassette()\n"
        "inner = httpx.HTTPTransport(verify=False)\n"
        "with httpx.Client(transport=replay.RecordingTransport(cassette, inner)) as client:\n"
        f"    client.get({served.url!r}).read()\n"
        "assert cassette.interactions[0].response.times == 'network'\n"
        "print(stamper.pid())\n"
        "import os; os._exit(0)\n"  # no clean-up at exit: the end of file alone ends it
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=60, check=True
    )
    child = int(done.stdout)
    deadline = time.monotonic() + 10
    while Path(f"/proc/{child}").exists() and time.monotonic() < deadline:
        status = Path(f"/proc/{child}/stat").read_text().split()[2]
        if status == "Z":  # ended (a zombie until its new parent reaps it)
            break
        time.sleep(0.02)
    assert not Path(f"/proc/{child}").exists() or status == "Z"


COLD_SDK = """
import sys, openai, replay
with replay.use_cassette(sys.argv[1], record_mode="all"):
    client = openai.OpenAI(base_url=sys.argv[2], api_key="sk-test", max_retries=0)
    for event in client.responses.create(model="gpt-4o", input="hi", stream=True):
        pass
"""


def test_the_first_openai_stream_of_a_fresh_process_keeps_the_network_gaps(
    tmp_path: Path,
) -> None:
    from replay.testing.streams import responses_hello

    chunks = [data.decode() for _delay, data in responses_hello(scale=0)]
    for served in _origin(tmp_path, tls=False, chunks=chunks):
        path = tmp_path / "cold.msgpack"
        program = [sys.executable, "-c", COLD_SDK, str(path), served.url.replace("/stream", "/v1")]
        subprocess.run(program, check=True, timeout=60, capture_output=True)
    [interaction] = Cassette.load(path).interactions
    assert interaction.response.times == "network"
    assert len(interaction.response.chunks) == len(chunks)
    errors = _gap_errors(interaction.response)
    assert max(map(abs, errors)) < TOLERANCE, errors


def test_where_the_times_came_from_is_kept_and_checked_by_the_file() -> None:
    def one(times: str | None) -> bytes:
        response = Response(status=200, chunks=[Chunk(0.1, b"data: 1\n\n")], times=times)
        return dumps([Interaction(Request(method="GET", url="http://h/"), response)])

    for times in ("network", "reader", None):
        [interaction] = read_interactions(one(times))
        assert interaction.response.times == times
    assert b"times" not in one(None)  # as files before it: nothing said
    with pytest.raises(LoadError, match=r"times: 'bogus!!' is not one of 'network', 'reader'"):
        read_interactions(one("network").replace(b"\xa7network", b"\xa7bogus!!"))


def test_connections_kept_alive_stay_stamped_and_clients_go_on_using_them(tmp_path: Path) -> None:
    """aiohttp: a pooled connection a recorded request takes is read by the stamper from
    then on, and serves the requests after the session. requests: recordings go through the
    adapter's twin (its own connections, reused from one recording to the next), and the
    adapter's pool serves the requests before and after."""
    from replay.testing import Origin
    from replay.testing.origin import Script

    chunks = [(0.005, b"data: %d\n\n" % n) for n in range(3)]
    body = b"".join(data for _delay, data in chunks)
    with Origin({"/s": Script(chunks=chunks), "/g": Script(chunks=chunks, gzip=True)}) as origin:

        async def three(session: aiohttp.ClientSession) -> None:
            for path in ("/s", "/g", "/s"):
                async with session.get(origin.url + path) as response:
                    assert await response.read() == body

        async def main() -> list[Interaction]:
            async with aiohttp.ClientSession() as session:
                await three(session)  # live: the connection in the pool is asyncio's own
                with replay.use_cassette(tmp_path / "a.msgpack", record_mode="all") as cassette:
                    await three(session)
                await three(session)  # live again, over the stamped connection
            return list(cassette.interactions)

        recorded = asyncio.run(main())
        assert len({seen.client_port for seen in origin.requests}) == 1  # one connection
        with requests.Session() as session:
            assert session.get(origin.url + "/s").content == body
            with replay.use_cassette(tmp_path / "r.msgpack", record_mode="all") as cassette:
                for path in ("/s", "/g", "/s"):
                    assert session.get(origin.url + path).content == body
            assert session.get(origin.url + "/s").content == body
        recorded += cassette.interactions
        ports = [seen.client_port for seen in origin.requests[9:]]
        assert ports[0] == ports[-1] != ports[1] == ports[2] == ports[3]  # the twin's: its own
    assert [i.response.times for i in recorded] == ["network"] * 6


def test_a_stamper_whose_parent_is_gone_ends_quietly() -> None:
    """A program may exit while its stamper still starts: the stamper then ends, and says
    nothing on the program's stderr."""
    child = Path(stamper.__file__).with_name("stamper_child.py")
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    ours.close()  # the parent, gone before it heard "+"
    with theirs:
        done = subprocess.run(
            [sys.executable, "-I", "-S", str(child), str(theirs.fileno())],
            pass_fds=[theirs.fileno()],
            capture_output=True,
            text=True,
            timeout=30,
        )
    assert (done.returncode, done.stderr) == (0, "")
