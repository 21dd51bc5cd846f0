"""`replay serve` and `replay proxy` as a user runs them: subprocesses on 127.0.0.1, with
httpx, a raw socket, curl and the openai SDK as their clients, and a local origin behind."""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from pacing import assert_paced

import replay
import replay.server.proxy
from replay.framing.sse import parse
from replay.testing import HELLO_TEXT, Origin, Script, responses_hello

KEY = "sk-serve-test-secret"
DROP = Script(chunks=[(0.0, b"data: one\n\n")], end="drop")
SLOW = Script(chunks=[(0.0, b"data: one\n\n"), (2.0, b"data: two\n\n")])
HANG = Script(chunks=[(0.0, b"data: one\n\n")], end="hang")


class Running:
    """A `replay serve` or `replay proxy` subprocess: its URL, its stderr lines, its exit."""

    def __init__(self, *args: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "replay.cli", *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: list[str] = []
        self._ended = False
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.url = ""

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            with self._changed:
                self.lines.append(line.rstrip("\n"))
                self._changed.notify_all()
        with self._changed:
            self._ended = True
            self._changed.notify_all()

    def wait_for(self, text: str, timeout: float = 10.0) -> str:
        """The first stderr line containing `text`, waiting for it to be written."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                found = next((line for line in self.lines if text in line), None)
                if found is not None:
                    return found
                left = deadline - time.monotonic()
                if self._ended or left <= 0:
                    raise AssertionError(f"no {text!r} on stderr:\n{self.stderr}")
                self._changed.wait(left)

    def stop(self, how: signal.Signals = signal.SIGTERM) -> int:
        """Send `how` (if still running), wait for the exit, and return its status."""
        if self.process.poll() is None:
            self.process.send_signal(how)
        try:
            status = self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            status = self.process.wait()
        self._reader.join(5)
        assert self.process.stderr is not None
        self.process.stderr.close()
        return status

    @property
    def stderr(self) -> str:
        return "\n".join(self.lines)


@contextlib.contextmanager
def running(*args: str) -> Iterator[Running]:
    """Start `replay ARGS --port 0`, wait for its start line, and always stop it."""
    server = Running(*args, "--port", "0")
    try:
        match = re.search(r"http://127\.0\.0\.1:\d+", server.wait_for("http://127.0.0.1:"))
        server.url = match[0] if match else ""
        yield server
    finally:
        server.stop()


def run_replay(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "replay.cli", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=30, check=False)


def timed_chunks(client: httpx.Client, request: httpx.Request) -> list[tuple[float, bytes]]:
    """Each raw piece of the response body with the seconds since sending."""
    start = time.monotonic()
    response = client.send(request, stream=True)
    try:
        return [(time.monotonic() - start, data) for data in response.iter_raw()]
    finally:
        response.close()


# -- serve -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cassette recorded from a local origin: a Responses stream as the openai SDK asked
    for it (~0.65 s, first event at ~0.3 s), then a stream the origin dropped."""
    path = tmp_path_factory.mktemp("serve") / "llm.msgpack"
    with Origin({"/v1/responses": Script(chunks=responses_hello()), "/drop": DROP}) as origin:
        client = openai.OpenAI(api_key=KEY, base_url=f"{origin.url}/v1", max_retries=0)
        with client, replay.use_cassette(path, record_mode="all"), httpx.Client() as http:
            list(client.responses.create(model="m", input="hi", stream=True))
            with pytest.raises(httpx.RemoteProtocolError):
                http.get(f"{origin.url}/drop?page=1")
    return path


@pytest.fixture(scope="module")
def paced(recorded: Path) -> Iterator[Running]:
    """The recording served at its recorded pace."""
    with running("serve", str(recorded), "--speed", "1", "--repeat") as server:
        yield server


@pytest.fixture(scope="module")
def instant(recorded: Path) -> Iterator[Running]:
    """The recording served without waiting."""
    with running("serve", str(recorded), "--speed", "instant", "--repeat") as server:
        yield server


def replayed_request(recorded: Path, server: Running, index: int = 0) -> httpx.Request:
    """Recorded request `index` again, now aimed at `server`."""
    request = replay.Cassette.load(recorded).interactions[index].request
    path = httpx.URL(request.url).raw_path.decode()
    headers = {"content-type": request.header("content-type") or "application/json"}
    return httpx.Request(request.method, server.url + path, headers=headers, content=request.body)


def test_serve_streams_a_recorded_responses_call_to_the_openai_sdk(
    paced: Running, recorded: Path
) -> None:
    live = replay.Cassette.load(recorded).interactions[0].response.events()
    client = openai.OpenAI(api_key="sk-other", base_url=f"{paced.url}/v1", max_retries=0)
    with client:
        events = list(client.responses.create(model="m", input="hi", stream=True))
    assert [event.type for event in events] == [event.event for event in live]
    assert events[-1].response.output_text == HELLO_TEXT


def test_serve_keeps_the_recorded_timing_at_speed_1(paced: Running, recorded: Path) -> None:
    response = replay.Cassette.load(recorded).interactions[0].response
    assert response.ttfb is not None
    with httpx.Client() as client:
        chunks = timed_chunks(client, replayed_request(recorded, paced))
    assert b"".join(data for _, data in chunks) == response.body
    assert len(response.chunks) > 5  # the recorded pace has gaps to keep
    # Every piece: never before the recorded time, late only by what a busy machine adds.
    assert_paced(chunks, [(chunk.at, chunk.data) for chunk in response.chunks])


def test_serve_at_instant_speed_does_not_wait(
    instant: Running, recorded: Path, tmp_path: Path
) -> None:
    response = replay.Cassette.load(recorded).interactions[0].response
    with httpx.Client() as client:
        chunks = timed_chunks(client, replayed_request(recorded, instant))
    assert b"".join(data for _, data in chunks) == response.body
    # Timed on a stream long enough that no busy machine hides a wait: 4 s as recorded,
    # 2 s even at 2x; a loaded 2-core machine served it in 0.3 s.
    slow = replay.Response(
        status=200,
        chunks=[replay.Chunk(at, b"data: %d\n\n" % at) for at in (1, 2, 4)],
    )
    path = tmp_path / "slow.msgpack"
    request = replay.Request(method="GET", url="https://api.example.com/v1/slow")
    replay.Cassette([replay.Interaction(request, slow)]).save(path)
    with running("serve", str(path), "--speed", "instant") as server, httpx.Client() as client:
        arrived = timed_chunks(client, httpx.Request("GET", f"{server.url}/v1/slow"))
    assert b"".join(data for _, data in arrived) == slow.body
    assert arrived[-1][0] < 1.0


def test_a_recorded_dropped_connection_drops_the_client(instant: Running) -> None:
    received = []
    with (
        httpx.Client() as client,
        pytest.raises(httpx.RemoteProtocolError, match="incomplete"),
        client.stream("GET", f"{instant.url}/drop?page=1") as response,
    ):
        received.extend(response.iter_raw())
    assert received == [b"data: one\n\n"]
    assert "Traceback" not in instant.stderr
    assert "ERROR" not in instant.stderr  # a deliberate drop is not reported as a failure


def test_a_recorded_timeout_stalls_until_the_client_gives_up(tmp_path: Path) -> None:
    path = tmp_path / "timeout.msgpack"
    stalled = replay.Response(
        status=200,
        chunks=[replay.Chunk(0.0, b"data: one\n\n")],
        end=replay.StreamEnd(at=0.01, error="ReadTimeout", message="timed out"),
    )
    request = replay.Request(method="GET", url="https://api.example.com/v1/stalls")
    replay.Cassette([replay.Interaction(request, stalled)]).save(path)
    timeout = httpx.Timeout(5, read=1.5)  # the stall is endless; the first piece is not
    with (
        running("serve", str(path), "--speed", "instant") as server,
        httpx.Client(timeout=timeout) as client,
        client.stream("GET", f"{server.url}/v1/stalls") as response,
    ):
        pieces = response.iter_raw()
        assert next(pieces) == b"data: one\n\n"
        with pytest.raises(httpx.ReadTimeout):
            next(pieces)


def as_kwargs(request: httpx.Request) -> dict[str, Any]:
    """`request`'s URL, headers and body, as keywords of `client.stream(method, ...)`."""
    return {"url": request.url, "headers": request.headers, "content": request.content}


def test_a_cut_fault_serves_exactly_its_events_then_drops_the_connection(
    recorded: Path,
) -> None:
    received: list[bytes] = []
    with (
        running(
            "serve", str(recorded), "--speed", "instant", "--fault", "cut(after_events=3)"
        ) as server,
        httpx.Client() as client,
        client.stream("POST", **as_kwargs(replayed_request(recorded, server))) as response,
        pytest.raises(httpx.RemoteProtocolError),
    ):
        received.extend(response.iter_raw())
    assert len(list(parse(b"".join(received)))) == 3


def test_a_stall_fault_trips_the_clients_read_timeout(recorded: Path) -> None:
    fault = "stall(after_events=2, seconds=30)"
    received: list[bytes] = []
    with (
        running("serve", str(recorded), "--speed", "1", "--fault", fault) as server,
        httpx.Client(timeout=httpx.Timeout(5, read=2.0)) as client,  # stall 30 s, gaps 0.3 s
        client.stream("POST", **as_kwargs(replayed_request(recorded, server))) as response,
        pytest.raises(httpx.ReadTimeout),
    ):
        received.extend(response.iter_raw())
    assert len(list(parse(b"".join(received)))) == 2


def test_a_fault_that_moves_a_time_past_a_week_is_a_500_saying_so(recorded: Path) -> None:
    # slow(1e300) makes every time 1e300 times later: no wait may be that long.
    with (
        running("serve", str(recorded), "--speed", "1", "--fault", "slow(1e300)") as server,
        httpx.Client(timeout=10) as client,
    ):
        response = client.send(replayed_request(recorded, server))
        line = server.wait_for("500: ")
    assert response.status_code == 500
    error = response.json()["error"]
    assert error["type"] == "replay_internal"
    assert "ConfigurationError: fault slow(1e+300) on interaction 0: " in error["message"]
    assert "must be at most 604800 s (one week" in error["message"]
    assert line == f"500: {error['message']}"
    assert "Traceback" not in server.stderr


def test_serve_reports_a_bad_fault_in_one_line(recorded: Path) -> None:
    result = run_replay("serve", str(recorded), "--port", "0", "--fault", "cut(after=3)")
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "bad fault 'cut(after=3)'" in lines[0]


def test_an_unmatched_request_gets_a_404_saying_why(instant: Running) -> None:
    with httpx.Client() as client:
        response = client.get(f"{instant.url}/drop?page=2")
    assert response.status_code == 404
    error = response.json()["error"]
    assert error["type"] == "replay_mismatch"
    assert error["message"].startswith(f"GET {instant.url}/drop?page=2 has no match")
    assert "query differs" in error["message"]
    instant.wait_for(f"404: GET {instant.url}/drop?page=2 has no match")


def test_a_plain_http_client_gets_the_recorded_answer(instant: Running, recorded: Path) -> None:
    interaction = replay.Cassette.load(recorded).interactions[0]
    body = interaction.request.body
    port = int(instant.url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(
            b"POST /v1/responses HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
            b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
        )
        answer = b"".join(iter(lambda: sock.recv(65536), b""))
    head, _, chunked = answer.partition(b"\r\n\r\n")
    status, *headers = head.decode("latin-1").lower().splitlines()
    assert status == "http/1.1 200 ok"
    recorded_headers = {f"{name}: {value}".lower() for name, value in interaction.response.headers}
    # The recorded headers, but the connection's own: framing and closing are this server's.
    assert set(headers) == recorded_headers - {"transfer-encoding: chunked"} | {
        "transfer-encoding: chunked",
        "connection: close",
    }
    assert b"event: response.completed" in chunked
    assert chunked.endswith(b"\r\n0\r\n\r\n")  # the last chunk: a clean end


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_curl_gets_the_recorded_body(instant: Running, recorded: Path) -> None:
    interaction = replay.Cassette.load(recorded).interactions[0]
    url = f"{instant.url}/v1/responses"
    result = subprocess.run(
        ["curl", "-sSN", "-H", "content-type: application/json", "--data-binary", "@-", url],
        input=interaction.request.body,
        capture_output=True,
        timeout=10,
        check=True,
    )
    assert result.stdout == interaction.response.body


def test_a_json_body_sent_as_a_form_is_still_json(instant: Running, recorded: Path) -> None:
    # `curl -d '{...}'` sends the recorded JSON with a form content-type (and maybe other
    # spacing): JSON bodies are compared as JSON whatever the content-type says.
    body = json.dumps(json.loads(replay.Cassette.load(recorded).interactions[0].request.body))
    form = {"content-type": "application/x-www-form-urlencoded"}
    with httpx.Client() as client:
        answered = client.post(f"{instant.url}/v1/responses", content=body, headers=form)
        refused = client.post(f"{instant.url}/v1/responses", content=b"input=hi", headers=form)
    assert answered.status_code == 200
    assert b"event: response.completed" in answered.content
    assert refused.status_code == 404
    message = refused.json()["error"]["message"]
    assert "body differs" in message
    assert "('raw'" not in message
    assert "('json'" not in message


def test_without_repeat_each_interaction_answers_once(recorded: Path) -> None:
    with running("serve", str(recorded), "--speed", "instant") as server, httpx.Client() as client:
        request = replayed_request(recorded, server)
        assert client.send(request).status_code == 200
        again = client.send(request)
    assert again.status_code == 404
    # The advice is serve's own option, not a keyword of the library.
    message = again.json()["error"]["message"]
    assert "it matches, but already played: --repeat lets it answer again" in message
    assert "allow_playback_repeats" not in message


@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_serve_stops_at_once_on_a_signal_even_mid_stream(
    recorded: Path, how: signal.Signals
) -> None:
    # At 0.1x the recorded stream lasts over 6 s; its headers come at once.
    with running("serve", str(recorded), "--speed", "0.1") as server, httpx.Client() as client:
        response = client.send(replayed_request(recorded, server), stream=True)
        started = time.monotonic()
        assert server.stop(how) == 0
        assert time.monotonic() - started < 3  # (the stream had 6 s to go; busy: ~1 s)
        with pytest.raises(httpx.RemoteProtocolError):
            response.read()
        response.close()
    assert "Traceback" not in server.stderr
    assert "ERROR" not in server.stderr


def test_serve_reports_a_missing_cassette_in_one_line(tmp_path: Path) -> None:
    result = run_replay("serve", str(tmp_path / "missing.msgpack"), "--port", "0")
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith("replay: error: ")
    assert "missing.msgpack" in result.stderr


def test_serve_without_uvicorn_says_what_to_install(recorded: Path) -> None:
    hide = "import sys; sys.modules['uvicorn'] = None; from replay.cli import main; "
    run = f"sys.exit(main(['serve', {str(recorded)!r}, '--port', '0']))"
    result = subprocess.run(
        [sys.executable, "-c", hide + run], capture_output=True, text=True, timeout=30, check=False
    )
    assert result.returncode == 1
    assert "pip install 'replay-http[serve]'" in result.stderr
    assert "Traceback" not in result.stderr


# -- proxy -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def upstream() -> Iterator[Origin]:
    """The service behind the proxy."""
    routes = {
        "/v1/responses": Script(chunks=responses_hello(scale=0.1)),
        "/slow": SLOW,
        "/drop": DROP,
        "/hang": HANG,
    }
    with Origin(routes) as server:
        yield server


@pytest.fixture
def out(tmp_path: Path) -> Path:
    return tmp_path / "proxied.msgpack"


@pytest.fixture
def proxied(upstream: Origin, out: Path) -> Iterator[Running]:
    with running("proxy", "--target", upstream.url, "-o", str(out)) as server:
        yield server


def test_proxy_streams_each_event_as_it_arrives(proxied: Running, out: Path) -> None:
    with httpx.Client() as client:
        chunks = timed_chunks(client, client.build_request("POST", f"{proxied.url}/slow"))
    assert [data for _, data in chunks] == [b"data: one\n\n", b"data: two\n\n"]
    # Before the origin sent the second event, at 2 s (a first request through a proxy
    # just started took over 0.9 s on a busy machine).
    assert chunks[0][0] < 1.5
    assert chunks[1][0] > 1.9
    assert proxied.stop() == 0
    [interaction] = replay.Cassette.load(out).interactions
    assert [round(chunk.at) for chunk in interaction.response.chunks] == [0, 2]


def test_proxy_recording_replays_offline_for_clients_of_the_origin(
    proxied: Running, upstream: Origin, out: Path
) -> None:
    def ask(base_url: str) -> tuple[list[str], str]:
        with openai.OpenAI(api_key=KEY, base_url=f"{base_url}/v1", max_retries=0) as client:
            events = list(client.responses.create(model="m", input="hi", stream=True))
        return [e.type for e in events], events[-1].response.output_text

    live = ask(proxied.url)
    assert live[1] == HELLO_TEXT
    assert proxied.stop() == 0
    [interaction] = replay.Cassette.load(out).interactions
    assert interaction.request.url == f"{upstream.url}/v1/responses"
    seen = len(upstream.requests)
    with replay.use_cassette(out, record_mode="none"):
        assert ask(upstream.url) == live
    assert len(upstream.requests) == seen  # answered from the cassette


def test_proxy_redacts_secrets_in_the_cassette(
    proxied: Running, upstream: Origin, out: Path
) -> None:
    with httpx.Client() as client:
        response = client.get(
            f"{proxied.url}/v1/responses?api_key={KEY}", headers={"Authorization": f"Bearer {KEY}"}
        )
    assert response.status_code == 200
    assert upstream.requests[-1].header("authorization") == f"Bearer {KEY}"  # forwarded intact
    assert proxied.stop() == 0
    assert KEY.encode() not in out.read_bytes()
    [interaction] = replay.Cassette.load(out).interactions
    assert interaction.request.header("authorization") == "REDACTED"
    assert interaction.request.url == f"{upstream.url}/v1/responses?api_key=REDACTED"


def test_proxy_passes_a_dropped_stream_through_and_records_it(proxied: Running, out: Path) -> None:
    received = []
    with (
        httpx.Client() as client,
        pytest.raises(httpx.RemoteProtocolError),
        client.stream("GET", f"{proxied.url}/drop") as response,
    ):
        received.extend(response.iter_raw())
    assert received == [b"data: one\n\n"]
    assert proxied.stop() == 0
    [interaction] = replay.Cassette.load(out).interactions
    assert interaction.response.end.error == "RemoteProtocolError"


def test_proxy_saves_while_it_runs(proxied: Running, out: Path) -> None:
    with httpx.Client() as client:
        assert client.get(f"{proxied.url}/nowhere?page=1").status_code == 404
        assert client.get(f"{proxied.url}/nowhere?page=2").status_code == 404
    proxied.wait_for("/nowhere?page=2")
    deadline = time.monotonic() + 5
    while not (out.exists() and len(replay.Cassette.load(out).interactions) == 2):
        assert time.monotonic() < deadline, "the cassette was not saved while running"
        time.sleep(0.02)
    assert proxied.process.poll() is None


def test_proxy_stopped_mid_stream_saves_what_arrived(proxied: Running, out: Path) -> None:
    with httpx.Client() as client, client.stream("GET", f"{proxied.url}/hang") as response:
        pieces = response.iter_raw()  # kept: dropping the iterator would close the connection
        assert next(pieces) == b"data: one\n\n"
        assert proxied.stop(signal.SIGINT) == 0
        with pytest.raises(httpx.RemoteProtocolError):
            list(pieces)
    assert "ERROR" not in proxied.stderr
    [interaction] = replay.Cassette.load(out).interactions
    assert interaction.response.body == b"data: one\n\n"
    assert interaction.response.end.truncated


def test_proxy_answers_502_when_the_target_is_down(out: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed_port = sock.getsockname()[1]
    with running("proxy", "--target", f"http://127.0.0.1:{closed_port}", "-o", str(out)) as server:
        with httpx.Client() as client:
            response = client.get(f"{server.url}/v1/models")
        assert response.status_code == 502
        assert response.json()["error"]["type"] == "replay_proxy"
        server.wait_for("not forwarded: GET")


def test_proxy_rejects_a_target_that_is_not_a_url(out: Path) -> None:
    result = run_replay("proxy", "--target", "api.openai.com", "-o", str(out), "--port", "0")
    assert result.returncode == 1
    assert result.stderr.startswith("replay: error: the proxy target must be an http(s) base URL")
    assert not out.exists()


def test_proxy_never_overwrites_a_file_that_is_not_a_cassette(tmp_path: Path) -> None:
    precious = tmp_path / "notes.txt"
    precious.write_text("not a cassette")
    result = run_replay("proxy", "--target", "http://127.0.0.1:9", "-o", str(precious))
    assert result.returncode == 1
    assert "cannot read cassette" in result.stderr
    assert precious.read_text() == "not a cassette"


# -- what a server answers to, and what it tells --------------------------------------------------


def test_serve_refuses_a_host_header_naming_another_server(recorded: Path) -> None:
    with (
        running("serve", str(recorded), "--speed", "instant", "--repeat") as server,
        httpx.Client() as client,
    ):
        request = replayed_request(recorded, server)
        local = client.send(request)
        request.headers["host"] = "evil.example:80"  # a page reaching 127.0.0.1 by rebinding
        rebound = client.send(request)
    assert rebound.status_code == 421
    assert rebound.json()["error"]["type"] == "replay_host"
    assert local.status_code == 200


def test_serve_answers_a_host_given_with_allow_host(recorded: Path) -> None:
    args = ("serve", str(recorded), "--speed", "instant", "--allow-host", "replay.test")
    with running(*args) as server, httpx.Client() as client:
        request = replayed_request(recorded, server)
        request.headers["host"] = "replay.test"
        response = client.send(request)
    assert response.status_code == 200


def test_a_404_names_neither_the_cassettes_place_nor_a_recorded_body(tmp_path: Path) -> None:
    path = tmp_path / "private" / "llm.msgpack"
    secret = b'{"input": "a recorded body that only the cassette may hold"}'
    recorded_request = replay.Request(
        method="POST",
        url="https://api.example.com/v1/responses",
        body=secret,
        headers=[("content-type", "application/json")],
    )
    replay.Cassette([replay.Interaction(recorded_request, replay.Response(status=200))]).save(path)
    with running("serve", str(path), "--speed", "instant") as server:
        response = httpx.post(server.url + "/v1/responses", json={"input": "other"})
        log = server.stderr
    assert response.status_code == 404
    message = response.json()["error"]["message"]
    assert "body differs" in message
    for shown in (message, log.partition("404:")[2]):
        assert str(tmp_path) not in shown
        assert "only the cassette may hold" not in shown


@pytest.mark.parametrize(
    ("request_target", "path"),
    [("0:8080/echo", "/0:8080/echo"), ("//other.test/x?q=1", "//other.test/x"), ("/v1/a", "/v1/a")],
    ids=["host-port-lookalike", "network-path", "path"],
)
def test_the_proxy_keeps_its_targets_host_whatever_the_request_target(
    request_target: str, path: str
) -> None:
    assert replay.server.proxy.upstream_url("http://127.0.0.1:5000/base", request_target).host == (
        "127.0.0.1"
    )
    assert (
        replay.server.proxy.upstream_url("http://127.0.0.1:5000/base", request_target).port == 5000
    )
    assert replay.server.proxy.upstream_url("http://127.0.0.1:5000", request_target).path == path


def test_the_proxy_sends_a_lookalike_request_target_to_its_target_as_a_path(
    proxied: Running, upstream: Origin
) -> None:
    port = int(proxied.url.rsplit(":", 1)[1])
    seen_before = len(upstream.requests)  # (the origin serves the whole module)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"GET 0:8080/echo HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        while sock.recv(65536):
            pass
    assert [seen.path for seen in upstream.requests[seen_before:]] == ["/0:8080/echo"]
