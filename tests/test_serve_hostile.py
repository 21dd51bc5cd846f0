"""`replay serve` and `replay proxy` under hostile recordings and clients: each costs an error
answer or a closed connection and one log line, never a traceback, a dropped keep-alive
connection or a split response. The servers run as subprocesses on 127.0.0.1 (`running`);
raw sockets send what a client library would refuse to."""

from __future__ import annotations

import contextlib
import json
import re
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from test_serve import Running, run_replay, running

import replay

#: A value that would end its header and begin one of the recording's choosing.
SPLIT = "1\r\nSet-Cookie: evil=1"
#: The recorded answer every hostile interaction sits beside.
BODY = b"data: x\n\n"


def answer(
    path: str,
    *,
    status: int = 200,
    headers: list[tuple[str, str]] | None = None,
    method: str = "GET",
    body: bytes = BODY,
) -> replay.Interaction:
    request = replay.Request(method=method, url=f"https://api.example.com{path}")
    chunks = [replay.Chunk(0.0, body)] if body else []
    return replay.Interaction(
        request, replay.Response(status=status, headers=headers or [], chunks=chunks)
    )


#: Each recorded head HTTP/1.1 cannot carry: the path serving it, the words the error says.
UNSERVABLE = {
    "/crlf": ([("x-split", SPLIT)], "header 'x-split' has a value holding CR, LF"),
    "/lf": ([("x-split", SPLIT.replace("\r", ""))], "header 'x-split' has a value holding CR"),
    "/cr": ([("x-split", SPLIT.replace("\n", ""))], "header 'x-split' has a value holding CR"),
    "/nul": ([("x-nul", "a\x00b")], "header 'x-nul' has a value holding CR, LF or another"),
    "/space-in-name": ([("bad name", "1")], "header name 'bad name' is not a valid"),
    "/colon-in-name": ([("x:y", "1")], "header name 'x:y' is not a valid"),
    "/empty-name": ([("", "1")], "header name '' is not a valid"),
    "/crlf-in-name": ([("x\r\nSet-Cookie", "evil=1")], "header name 'x\\r\\nSet-Cookie' is"),
}


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    """A cassette of hostile recordings beside ordinary ones, served without waiting."""
    path = tmp_path_factory.mktemp("hostile") / "hostile.msgpack"
    interactions = [answer(route, headers=headers) for route, (headers, _) in UNSERVABLE.items()]
    interactions += [
        answer("/interim", status=101),
        answer("/304", status=304),
        answer("/204", status=204),
        answer("/head", method="HEAD"),
        answer("/ok", headers=[("content-type", "text/event-stream")]),
        # Two Content-Length headers that disagree: h11 refused to send them.
        answer("/lengths", headers=[("content-length", "9"), ("Content-Length", "10")]),
        # Spaces around a value are not part of it: trimmed, not refused.
        answer("/spaces", headers=[("x-spaced", "  kept \t")]),
        answer("/json", method="POST"),
    ]
    replay.Cassette(interactions).save(path)
    with running("serve", str(path), "--speed", "instant", "--repeat") as server:
        yield server


def port_of(server: Running) -> int:
    return int(server.url.rsplit(":", 1)[1])


def exchange(server: Running, raw: bytes, timeout: float = 10) -> bytes:
    """Send `raw` on a new connection and read until the server closes it."""
    with socket.create_connection(("127.0.0.1", port_of(server)), timeout=timeout) as sock:
        sock.sendall(raw)
        return b"".join(iter(lambda: sock.recv(65536), b""))


def get(path: str, method: str = "GET", close: bool = True) -> bytes:
    connection = b"Connection: close\r\n" if close else b""
    return b"%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\n%s\r\n" % (
        method.encode(),
        path.encode(),
        connection,
    )


def split_head(data: bytes) -> tuple[int, dict[str, str], bytes]:
    """The status, the headers (lower-cased names) and what follows the head."""
    assert data, "the connection closed without an answer"
    head, _, rest = data.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.lower().split(": ", 1) for line in lines)
    return int(status_line.split()[1]), headers, rest


@pytest.mark.parametrize("path", UNSERVABLE)
def test_a_recorded_head_http_cannot_carry_gets_a_502_saying_why(
    hostile: Running, path: str
) -> None:
    data = exchange(hostile, get(path))
    status, headers, body = split_head(data)
    assert status == 502
    assert b"evil" not in data.partition(b"\r\n\r\n")[0]  # no header of the recording's making
    assert set(headers) == {"content-type", "content-length", "connection"}
    error = json.loads(body)["error"]
    assert error["type"] == "replay_cassette"
    assert error["message"].startswith("interaction ")
    assert UNSERVABLE[path][1] in error["message"]
    line = hostile.wait_for(f"502: GET {path}: interaction ")
    assert UNSERVABLE[path][1] in line
    assert "evil=1" not in line  # values are never quoted
    assert "a\\x00b" not in line
    assert "Traceback" not in hostile.stderr


def test_a_recorded_interim_status_gets_a_502(hostile: Running) -> None:
    status, _, body = split_head(exchange(hostile, get("/interim")))
    assert status == 502
    assert "recorded status 101 is interim (1xx)" in json.loads(body)["error"]["message"]
    assert "Traceback" not in hostile.stderr


@pytest.mark.parametrize(
    ("path", "method", "status", "why"),
    [
        ("/304", "GET", 304, "a 304 response has none"),
        ("/204", "GET", 204, "a 204 response has none"),
        ("/head", "HEAD", 200, "a response to HEAD has none"),
    ],
)
def test_a_recorded_body_http_frames_none_is_left_out_and_the_connection_kept(
    hostile: Running, path: str, method: str, status: int, why: str
) -> None:
    # Both requests on one connection: a body byte sent after the head would be read as
    # the beginning of the next answer (or the connection dropped, as it was).
    data = exchange(hostile, get(path, method, close=False) + get("/ok"))
    first, _, rest = split_head(data)
    assert first == status
    assert rest.startswith(b"HTTP/1.1 200 OK\r\n")  # nothing between the two answers
    assert split_head(rest)[2] == b"%x\r\n%s\r\n0\r\n\r\n" % (len(BODY), BODY)
    line = hostile.wait_for(f"{method} {path}: interaction ")
    assert line.endswith(f"its recorded body (9 bytes) is not sent: {why}")
    assert "Traceback" not in hostile.stderr


def test_content_lengths_that_disagree_are_left_out(hostile: Running) -> None:
    status, headers, body = split_head(exchange(hostile, get("/lengths")))
    assert status == 200
    assert "content-length" not in headers
    assert body == b"%x\r\n%s\r\n0\r\n\r\n" % (len(BODY), BODY)


def test_spaces_around_a_recorded_value_are_trimmed(hostile: Running) -> None:
    status, headers, _ = split_head(exchange(hostile, get("/spaces")))
    assert status == 200
    assert headers["x-spaced"] == "kept"


def test_a_body_nested_100000_deep_gets_a_404_not_a_traceback(hostile: Running) -> None:
    deep = b"[" * 100_000 + b"]" * 100_000
    response = httpx.post(f"{hostile.url}/json", content=deep, timeout=30)
    assert response.status_code == 404
    assert response.json()["error"]["message"].endswith("body differs")
    hostile.wait_for("404: POST")
    assert "Traceback" not in hostile.stderr
    assert "RecursionError" not in hostile.stderr


# -- half-sent requests ---------------------------------------------------------------------

#: The request timeout the tests run with, and the most a closing may take past it (generous:
#: CI is a loaded 2-core machine).
TIMEOUT = 0.5
SLACK = 4.0


@pytest.fixture(scope="module")
def strict(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    """A server giving each request `TIMEOUT` seconds to arrive; its stream lasts longer."""
    path = tmp_path_factory.mktemp("strict") / "slow.msgpack"
    last = TIMEOUT * 1.5
    chunks = [replay.Chunk(0.0, b"data: one\n\n"), replay.Chunk(last, b"data: two\n\n")]
    request = replay.Request(method="POST", url="https://api.example.com/slow")
    response = replay.Response(status=200, chunks=chunks)
    replay.Cassette([replay.Interaction(request, response)]).save(path)
    args = ("serve", str(path), "--speed", "1", "--repeat", "--request-timeout", str(TIMEOUT))
    with running(*args) as server:
        yield server


def trickle(server: Running, start: bytes, byte: bytes, every: float = 0.1) -> tuple[float, bytes]:
    """Send `start`, then `byte` every `every` seconds until the server closes the
    connection: the seconds that took, and what the server sent."""
    with socket.create_connection(("127.0.0.1", port_of(server)), timeout=SLACK) as sock:
        began = time.monotonic()
        sock.sendall(start)
        sock.settimeout(every)
        received = b""
        while time.monotonic() - began < TIMEOUT + SLACK:
            try:
                sock.sendall(byte)
                data = sock.recv(65536)
            except TimeoutError:
                continue
            except OSError:  # reset: the server closed while bytes were still coming
                break
            if not data:
                break
            received += data
        return time.monotonic() - began, received


@pytest.mark.parametrize(
    ("start", "byte"),
    [
        (b"POST /slow HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ", b"a"),
        (b"POST /slow HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000\r\n\r\n", b"{"),
    ],
    ids=["headers", "body"],
)
def test_a_request_sent_a_byte_at_a_time_is_cut_off_with_a_408(
    strict: Running, start: bytes, byte: bytes
) -> None:
    took, received = trickle(strict, start, byte)
    assert TIMEOUT * 0.9 < took < TIMEOUT + SLACK
    status, headers, body = split_head(received)
    assert status == 408
    assert headers["connection"] == "close"
    assert json.loads(body)["error"]["type"] == "replay_timeout"
    strict.wait_for("408: a request was not sent whole within 0.5 s: connection closed")
    assert "Traceback" not in strict.stderr


def test_a_connection_that_sends_nothing_is_closed_quietly(strict: Running) -> None:
    with socket.create_connection(("127.0.0.1", port_of(strict)), timeout=SLACK) as sock:
        began = time.monotonic()
        assert sock.recv(65536) == b""
        assert TIMEOUT * 0.9 < time.monotonic() - began < TIMEOUT + SLACK


def test_the_request_timeout_bounds_arriving_not_answering(strict: Running) -> None:
    # The answer streams for longer than the timeout; a second request on the same
    # connection, after a pause longer than the timeout too, has its own time to arrive.
    request = b"POST /slow HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n"
    with socket.create_connection(("127.0.0.1", port_of(strict)), timeout=SLACK) as sock:
        sock.sendall(request)
        assert b"data: two" in read_chunked(sock)
        time.sleep(TIMEOUT * 1.5)
        sock.sendall(request)
        assert b"data: two" in read_chunked(sock)


def read_chunked(sock: socket.socket) -> bytes:
    """One chunked answer from `sock`, whole."""
    received = b""
    while not received.endswith(b"\r\n0\r\n\r\n"):
        data = sock.recv(65536)
        assert data, f"closed mid-answer: {received!r}"
        received += data
    return received


def test_a_request_timeout_that_is_not_a_time_is_one_line(tmp_path: Path) -> None:
    result = run_replay("serve", str(tmp_path / "x.msgpack"), "--request-timeout", "0")
    assert result.returncode == 1
    assert (
        result.stderr == "replay: error: the request timeout must be more than 0 seconds, not 0.0\n"
    )


# -- an error nothing expected ----------------------------------------------------------------

#: An app that fails before answering (`/before`) or once its answer has begun (`/after`),
#: served by the runner `serve` and `proxy` share, in a process of its own.
FAILING = textwrap.dedent(
    """
    from replay.server.asgi import InFlight, listen, run, stderr

    class Failing:
        in_flight = InFlight()

        async def __call__(self, scope, receive, send):
            if scope["type"] == "lifespan":
                while (await receive())["type"] != "lifespan.shutdown":
                    await send({"type": "lifespan.startup.complete"})
                await send({"type": "lifespan.shutdown.complete"})
                return
            if scope["path"] == "/after":
                await send({"type": "http.response.start", "status": 200, "headers": []})
                await send({"type": "http.response.body", "body": b"a", "more_body": True})
            raise ValueError("Bearer sk-never-logged")

    with listen(0) as sock:
        run(Failing(), sock, stderr, f"on http://127.0.0.1:{sock.getsockname()[1]}", 5.0)
    """
)


def test_an_error_nothing_expected_is_a_500_and_one_line(tmp_path: Path) -> None:
    script = tmp_path / "failing.py"
    script.write_text(FAILING)
    process = subprocess.Popen(
        [sys.executable, str(script)], stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True
    )
    try:
        assert process.stderr is not None
        start = process.stderr.readline()
        url = re.search(r"http://127\.0\.0\.1:\d+", start)
        assert url, start
        before = httpx.get(f"{url[0]}/before")
        with pytest.raises(httpx.RemoteProtocolError):
            httpx.get(f"{url[0]}/after")
    finally:
        process.terminate()
        _, rest = process.communicate(timeout=10)
    raised = next(n for n, line in enumerate(FAILING.splitlines(), 1) if "raise" in line)
    where = f"internal error: ValueError at failing.py:{raised}"  # not its message
    assert before.status_code == 500
    assert before.json()["error"] == {"type": "replay_internal", "message": f"GET /before: {where}"}
    assert rest.splitlines() == [f"500: GET /before: {where}", f"500: GET /after: {where}"]


# -- replay proxy -----------------------------------------------------------------------------

#: What a hostile target answers: a header line h11 refuses, holding a credential.
REFUSED_LINE = b"Set-Cookie: session=sk-upstream-secret\rX-Injected: 1"


@pytest.fixture
def target() -> Iterator[str]:
    """A target on 127.0.0.1 answering every request with `REFUSED_LINE` among its headers."""
    done = threading.Event()
    with socket.create_server(("127.0.0.1", 0)) as listener:
        listener.settimeout(0.1)

        def answer_all() -> None:
            while not done.is_set():
                try:
                    connection, _ = listener.accept()
                except TimeoutError:
                    continue
                with connection, contextlib.suppress(OSError):  # a client gone: the next
                    connection.settimeout(5)
                    received = b""
                    while b"\r\n\r\n" not in received:
                        data = connection.recv(65536)
                        if not data:
                            break
                        received += data
                    connection.sendall(
                        b"HTTP/1.1 200 OK\r\n%s\r\nContent-Length: 2\r\n\r\nok" % REFUSED_LINE
                    )

        thread = threading.Thread(target=answer_all, daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{listener.getsockname()[1]}"
        finally:
            done.set()
            thread.join(5)


def test_the_proxy_answers_a_header_it_cannot_pass_on_with_a_502_that_quotes_none(
    target: str, tmp_path: Path
) -> None:
    out = tmp_path / "out.msgpack"
    args = ("proxy", "--target", target, "-o", str(out), "--request-timeout", str(TIMEOUT))
    with running(*args) as proxy:
        data = exchange(proxy, get("/v1/models"))
        proxy.wait_for("not forwarded: GET")
        took, received = trickle(proxy, b"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nX-", b"a")
    status, headers, body = split_head(data)
    assert status == 502
    assert "set-cookie" not in headers
    assert "x-injected" not in headers
    message = json.loads(body)["error"]["message"]
    assert message.endswith("RemoteProtocolError: illegal header line (the line is not shown)")
    assert b"sk-upstream-secret" not in data
    assert "sk-upstream-secret" not in proxy.stderr
    assert split_head(received)[0] == 408  # the proxy bounds a request's arrival too
    assert took < TIMEOUT + SLACK
    assert "Traceback" not in proxy.stderr
