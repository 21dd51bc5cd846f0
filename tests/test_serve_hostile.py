"""`replay serve` and `replay proxy` under hostile recordings and clients: each costs an error
answer or a closed connection and one log line, never a traceback, a dropped keep-alive
connection or a split response. The servers run as subprocesses on 127.0.0.1 (`running`);
raw sockets send what a client library would refuse to."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

import httpx
import pytest
from test_serve import Running, running

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
    interactions = [answer(path, headers=headers) for path, (headers, _) in UNSERVABLE.items()]
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
    ("path", "method", "why"),
    [
        ("/304", "GET", "a 304 response has none"),
        ("/204", "GET", "a 204 response has none"),
        ("/head", "HEAD", "a response to HEAD has none"),
    ],
)
def test_a_recorded_body_http_frames_none_is_left_out_and_the_connection_kept(
    hostile: Running, path: str, method: str, why: str
) -> None:
    # Both requests on one connection: a body byte sent after the head would be read as
    # the beginning of the next answer (or the connection dropped, as it was).
    data = exchange(hostile, get(path, method, close=False) + get("/ok"))
    status, _, rest = split_head(data)
    assert status == int(path[1:]) if path[1:].isdigit() else status == 200
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
