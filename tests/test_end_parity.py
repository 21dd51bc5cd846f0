"""One end vocabulary: every recorded end name, through every shell, means the same.

A cassette's `end.error` names the error that ended a body: httpx's names (what replay
stores), or the names older recordings hold (aiohttp's, urllib3's, requests'). Whatever the
name, a timeout must reach each client as its own library's read timeout, a cut as its own
broken-connection error, and a clean end (or a recording stopped by the client or the
session) as a clean end of the body, after the same bytes:

    shell      timeout                                     cut
    httpx      httpx.ReadTimeout (a name of httpx's own:   httpx.RemoteProtocolError (a name of
               that class)                                 httpx's own: that class)
    aiohttp    aiohttp.SocketTimeoutError                  aiohttp.ClientPayloadError
    requests   requests ConnectionError(ReadTimeoutError)  ChunkedEncodingError(ProtocolError)
    serve      a stall: httpx's ReadTimeout                a dropped connection: httpx's
                                                           RemoteProtocolError

The expected meanings are written here, not taken from replay's table. Recording through each
shell stores the canonical name, and what the client saw live is what it sees replayed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Literal

import aiohttp
import httpx
import httpx2
import pytest
import requests
import urllib3.exceptions
from test_serve import Running, running

import replay
from replay import engine
from replay.testing import Origin, Script

Kind = Literal["clean", "timeout", "cut"]
Outcome = tuple[list[bytes], BaseException | None]

CHUNKS = (b"data: one\n\n", b"data: two\n\n")
URL = "https://api.example.com/v1/stream"

#: httpx's request errors, each replayed by httpx as itself ("ProtocolError" is urllib3's too:
#: it replays as RemoteProtocolError, the error httpx raises for a broken body).
HTTPX_TIMEOUTS = (
    "ReadTimeout",
    "ConnectTimeout",
    "WriteTimeout",
    "PoolTimeout",
    "TimeoutException",
)
HTTPX_CUTS = (
    "RemoteProtocolError",
    "LocalProtocolError",
    "ReadError",
    "WriteError",
    "ConnectError",
    "CloseError",
    "NetworkError",
    "TransportError",
    "ProxyError",
    "UnsupportedProtocol",
    "DecodingError",
    "TooManyRedirects",
    "RequestError",
)
#: What the other libraries raise (and replay stored before it stored httpx's names).
OTHER_TIMEOUTS = (
    "SocketTimeoutError",  # aiohttp: no data within sock_read
    "ServerTimeoutError",  # aiohttp before 3.10
    "ConnectionTimeoutError",  # aiohttp
    "TimeoutError",  # asyncio, the builtin, urllib3's base class
    "ReadTimeoutError",  # urllib3
    "ConnectTimeoutError",  # urllib3
    "Timeout",  # requests' base class
)
OTHER_CUTS = (
    "ClientPayloadError",  # aiohttp: the body was cut
    "ServerDisconnectedError",  # aiohttp
    "ClientConnectionResetError",  # aiohttp
    "ClientOSError",  # aiohttp
    "ClientConnectionError",  # aiohttp
    "ProtocolError",  # urllib3
    "IncompleteRead",  # http.client, urllib3
    "ChunkedEncodingError",  # requests
    "ConnectionError",  # requests, the builtin
    "ConnectionResetError",  # the builtin
    "BrokenPipeError",  # the builtin
    "SomeTransportsOwnError",  # a name nobody knows: the connection failed
)
#: Each end of the parity table: (id, error name, truncated by whom, what it means).
ENDS: list[tuple[str, str | None, str | None, Kind]] = [
    ("eof", None, None, "clean"),
    ("stopped-by-client", None, "client", "clean"),
    ("stopped-by-session", None, "session", "clean"),
    *((name, name, None, "timeout") for name in HTTPX_TIMEOUTS + OTHER_TIMEOUTS),
    *((name, name, None, "cut") for name in HTTPX_CUTS + OTHER_CUTS),
]


def end_of(name: str | None, stopped_by: str | None) -> replay.StreamEnd:
    message = "" if name is None else f"recorded {name}"
    truncated = stopped_by is not None
    return replay.StreamEnd(
        0.02, error=name, message=message, truncated=truncated, stopped_by=stopped_by
    )


def interaction(url: str, end: replay.StreamEnd) -> replay.Interaction:
    chunks = [replay.Chunk(0.0, CHUNKS[0]), replay.Chunk(0.01, CHUNKS[1])]
    response = replay.Response(
        status=200, headers=[("content-type", "text/event-stream")], chunks=chunks, end=end
    )
    return replay.Interaction(replay.Request(method="GET", url=url), response)


# -- each shell: the body's pieces, and the error that ended it -------------------------------


def httpx_sync(module: ModuleType, url: str, read: float = 5.0) -> Outcome:
    got: list[bytes] = []
    timeout = module.Timeout(5.0, read=read)
    with module.Client(timeout=timeout) as client, client.stream("GET", url) as response:
        try:
            for data in response.iter_raw():
                got.append(data)
        except Exception as error:
            return got, error
    return got, None


def httpx_async(url: str) -> Outcome:
    async def read() -> Outcome:
        got: list[bytes] = []
        async with httpx.AsyncClient() as client, client.stream("GET", url) as response:
            try:
                async for data in response.aiter_raw():
                    got.append(data)
            except Exception as error:
                return got, error
        return got, None

    return asyncio.run(read())


def aiohttp_read(url: str, timeout: float = 5.0) -> Outcome:
    async def read() -> Outcome:
        got: list[bytes] = []
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(sock_read=timeout)) as client,
            client.get(url) as response,
        ):
            try:
                async for data in response.content.iter_any():
                    got.append(data)
            except Exception as error:
                return got, error
        return got, None

    return asyncio.run(read())


def requests_read(url: str, timeout: float = 5.0) -> Outcome:
    got: list[bytes] = []
    with requests.Session() as session:
        response = session.get(url, stream=True, timeout=(5.0, timeout))
        try:
            for data in response.iter_content(None):
                got.append(data)
        except Exception as error:
            return got, error
        finally:
            response.close()
    return got, None


SHELLS: dict[str, Callable[[str], Outcome]] = {
    "httpx": lambda url: httpx_sync(httpx, url),
    "httpx-async": httpx_async,
    "httpx2": lambda url: httpx_sync(httpx2, url),
    "aiohttp": aiohttp_read,
    "requests": requests_read,
}


# -- what each library raises for each meaning -----------------------------------------------


def httpx_error(module: ModuleType, name: str, kind: Kind) -> type[BaseException]:
    """httpx's class for a recorded `name`: its own when httpx has one, else the meaning's."""
    own = name in HTTPX_TIMEOUTS + HTTPX_CUTS
    found: type[BaseException] = getattr(
        module, name if own else {"timeout": "ReadTimeout", "cut": "RemoteProtocolError"}[kind]
    )
    return found


def check_httpx(
    module: ModuleType, name: str | None, kind: Kind, error: BaseException | None
) -> None:
    if kind == "clean":
        assert error is None
        return
    assert name is not None
    assert type(error) is httpx_error(module, name, kind)
    assert isinstance(error, module.TimeoutException) == (kind == "timeout")


def check_aiohttp(kind: Kind, error: BaseException | None) -> None:
    expected = {
        "clean": type(None),
        "timeout": aiohttp.SocketTimeoutError,
        "cut": aiohttp.ClientPayloadError,
    }
    assert type(error) is expected[kind]


def check_requests(kind: Kind, error: BaseException | None) -> None:
    """requests wraps urllib3's errors while iterating a body: a read timeout is its
    ConnectionError (not its ReadTimeout: that one is raised before the headers)."""
    if kind == "clean":
        assert error is None
        return
    wrapper, inner = {
        "timeout": (requests.exceptions.ConnectionError, urllib3.exceptions.ReadTimeoutError),
        "cut": (requests.exceptions.ChunkedEncodingError, urllib3.exceptions.ProtocolError),
    }[kind]
    assert type(error) is wrapper
    assert isinstance(error, requests.exceptions.RequestException)
    assert isinstance(error.args[0], inner)


def check(shell: str, name: str | None, kind: Kind, outcome: Outcome) -> None:
    got, error = outcome
    assert b"".join(got) == b"".join(CHUNKS)  # the same bytes, whatever the end
    if shell.startswith("httpx"):
        check_httpx(httpx2 if shell == "httpx2" else httpx, name, kind, error)
    elif shell == "aiohttp":
        check_aiohttp(kind, error)
    else:
        check_requests(kind, error)


# -- replaying each end through each shell -----------------------------------------------------


def test_every_name_of_the_engines_table_is_in_the_parity_table() -> None:
    names = {name for _, name, _, _ in ENDS}
    assert set(engine.END_NAMES) <= names


# Instant speed takes each shell's fast path; virtual time its stepped one, without waiting.
@pytest.mark.parametrize("speed", ["instant", "virtual"])
@pytest.mark.parametrize("shell", list(SHELLS))
@pytest.mark.parametrize(
    ("name", "stopped_by", "kind"), [pytest.param(*end[1:], id=end[0]) for end in ENDS]
)
def test_each_end_replays_as_the_clients_own_error_of_its_meaning(
    cassette_path: Path,
    shell: str,
    speed: str,
    name: str | None,
    stopped_by: str | None,
    kind: Kind,
) -> None:
    replay.Cassette([interaction(URL, end_of(name, stopped_by))]).save(cassette_path)

    with replay.use_cassette(cassette_path, record_mode="none", speed=speed):
        outcome = SHELLS[shell](URL)

    check(shell, name, kind, outcome)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    """`replay serve` of one cassette holding every end of the table, one path each."""
    path = tmp_path_factory.mktemp("ends") / "ends.msgpack"
    ends = [
        interaction(f"https://api.example.com/end/{id_}", end_of(name, stopped_by))
        for id_, name, stopped_by, _ in ENDS
    ]
    replay.Cassette(ends).save(path)
    with running("serve", str(path), "--speed", "instant") as server:
        yield server


@pytest.mark.parametrize(("id_", "kind"), [pytest.param(end[0], end[3], id=end[0]) for end in ENDS])
def test_replay_serve_stalls_for_a_timeout_and_drops_for_a_cut(
    served: Running, id_: str, kind: Kind
) -> None:
    # A stall is found by a short read timeout; any other end must come long before one.
    read = 0.3 if kind == "timeout" else 10.0
    outcome = httpx_sync(httpx, f"{served.url}/end/{id_}", read=read)

    got, error = outcome
    assert b"".join(got) == b"".join(CHUNKS)
    expected = {"clean": type(None), "timeout": httpx.ReadTimeout, "cut": httpx.RemoteProtocolError}
    assert type(error) is expected[kind]
    assert "Traceback" not in served.stderr


# -- recording through each shell stores the canonical name ------------------------------------

ROUTES = {
    "/hang": Script(chunks=[(0.0, CHUNKS[0]), (0.0, CHUNKS[1])], end="hang"),
    "/drop": Script(chunks=[(0.0, CHUNKS[0]), (0.0, CHUNKS[1])], end="drop"),
}
#: A read timeout short enough to be quick, long enough for the origin's instant chunks.
READ_TIMEOUT = 0.3

RECORDERS: dict[str, Callable[[str], Outcome]] = {
    "httpx": lambda url: httpx_sync(httpx, url, read=READ_TIMEOUT),
    "httpx2": lambda url: httpx_sync(httpx2, url, read=READ_TIMEOUT),
    "aiohttp": lambda url: aiohttp_read(url, timeout=READ_TIMEOUT),
    "requests": lambda url: requests_read(url, timeout=READ_TIMEOUT),
}


@pytest.mark.parametrize("shell", list(RECORDERS))
@pytest.mark.parametrize(
    ("route", "kind", "stored"),
    [("/hang", "timeout", "ReadTimeout"), ("/drop", "cut", "RemoteProtocolError")],
)
def test_recording_stores_the_canonical_name_and_replays_what_was_seen_live(
    cassette_path: Path, shell: str, route: str, kind: Kind, stored: str
) -> None:
    with Origin(ROUTES) as origin, replay.use_cassette(cassette_path, record_mode="all"):
        live = RECORDERS[shell](origin.url + route)
        url = origin.url + route
    [recorded] = replay.Cassette.load(cassette_path).interactions

    with replay.use_cassette(cassette_path, record_mode="none", speed="instant"):
        replayed = RECORDERS[shell](url)

    assert recorded.response.end.error == stored
    check(shell, stored, kind, live)
    check(shell, stored, kind, replayed)
    assert type(replayed[1]) is type(live[1])


# -- the names a recording stores, and the kinds of ends -------------------------------------


class SlowAnswer(TimeoutError):
    """A transport's own timeout: a subclass of the builtin."""


@pytest.mark.parametrize(
    ("error", "stored"),
    [
        pytest.param(aiohttp.SocketTimeoutError("x"), ("ReadTimeout", "x"), id="aiohttp-timeout"),
        pytest.param(
            aiohttp.ClientPayloadError("x"), ("RemoteProtocolError", "x"), id="aiohttp-cut"
        ),
        pytest.param(
            urllib3.exceptions.ProtocolError("x"), ("RemoteProtocolError", "x"), id="urllib3-cut"
        ),
        pytest.param(httpx.ReadError("x"), ("ReadError", "x"), id="httpx-own"),
        pytest.param(httpx2.WriteTimeout("x"), ("WriteTimeout", "x"), id="httpx2-own"),
        pytest.param(SlowAnswer("x"), ("ReadTimeout", "x"), id="subclass-of-a-timeout"),
        pytest.param(ValueError("boom"), ("RemoteProtocolError", "ValueError: boom"), id="unknown"),
        pytest.param(RuntimeError(), ("RemoteProtocolError", "RuntimeError"), id="unknown-silent"),
    ],
)
def test_a_live_error_is_stored_under_httpxs_name_for_its_meaning(
    error: BaseException, stored: tuple[str, str]
) -> None:
    assert engine.recorded_error(error) == stored


@pytest.mark.parametrize(
    ("end", "kind"),
    [
        (replay.StreamEnd(1.0), "clean"),
        (replay.StreamEnd(1.0, truncated=True), "stopped by the client"),
        (replay.StreamEnd(1.0, truncated=True, stopped_by="session"), "stopped by the session"),
        (replay.StreamEnd(1.0, error="SocketTimeoutError"), "timeout"),
        (replay.StreamEnd(1.0, error="ChunkedEncodingError"), "cut"),
        (replay.StreamEnd(1.0, error="NoLibraryRaisesThis"), "cut"),
    ],
    ids=["eof", "client", "session", "timeout", "cut", "unknown"],
)
def test_each_end_has_one_kind(end: replay.StreamEnd, kind: str) -> None:
    assert engine.end_kind(end).value == kind
