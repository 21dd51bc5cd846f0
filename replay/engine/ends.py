"""The end vocabulary: what a recorded end means, in one table that every shell asks.

A body ends in one of five ways (`EndKind`): cleanly (EOF); by a timeout (the client's read
gave up: no data came in time); by a cut (the connection broke, the peer broke the protocol,
the body came incomplete); or, recording, stopped before its end by the client (it closed the
response) or by the session (it ended while the body still streamed). A replayed body ends
the same way for every client: a timeout as the client library's own read timeout, a cut as
its own broken-connection error, anything else as a clean end at the recorded time.

`StreamEnd.error` names the error that ended a body. The cassette's vocabulary is httpx's
names: a recording stores `ReadTimeout` for a timeout and `RemoteProtocolError` for a cut,
whatever library it went through (an error of httpx's own, such as `ReadError`, keeps its
name: httpx replays it as itself). Cassettes recorded before this held other libraries'
names too (aiohttp's `SocketTimeoutError`, urllib3's `ProtocolError`, ...): `END_NAMES`
knows them, and they mean what they meant. A name nobody knows is a cut.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from replay.model import StreamEnd

__all__ = [
    "CLOSED_AFTER_END",
    "CLOSED_AFTER_END_TEXT",
    "CUT_NAME",
    "END_NAMES",
    "TIMEOUT_NAME",
    "EndKind",
    "end_kind",
    "error_kind",
    "recorded_error",
    "stored_name",
]


class EndKind(enum.Enum):
    """How a body ended, whatever the library that recorded it called it."""

    CLEAN = "clean"  # EOF
    TIMEOUT = "timeout"  # the client's read timed out
    CUT = "cut"  # the connection broke or the body came incomplete
    STOPPED_BY_CLIENT = "stopped by the client"  # a recording, stopped before the body's end
    STOPPED_BY_SESSION = "stopped by the session"


#: The one wording of a body the client closed after its dialect's terminal event (`[DONE]`,
#: `response.completed`, `message_stop`; `replay.dialects.closed_after_end`): complete, not
#: truncated. A label (`show`'s columns, the report) and a sentence (`--events`, `check`).
CLOSED_AFTER_END: Final = "closed after end"
CLOSED_AFTER_END_TEXT: Final = "complete, closed by the client after its end"

#: What a new recording stores for a timeout and for a cut.
TIMEOUT_NAME: Final = "ReadTimeout"
CUT_NAME: Final = "RemoteProtocolError"

_T, _C = EndKind.TIMEOUT, EndKind.CUT

#: httpx's (and httpx2's) request errors: stored, and replayed by httpx, as they are.
_HTTPX: Final = {
    **dict.fromkeys(
        ("ReadTimeout", "ConnectTimeout", "WriteTimeout", "PoolTimeout", "TimeoutException"), _T
    ),
    **dict.fromkeys(
        (
            "RemoteProtocolError",  # a body cut short, a broken HTTP message
            "ReadError",  # a connection reset
            "LocalProtocolError",
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
        ),
        _C,
    ),
}

#: Every error name a client library records, and what it means.
END_NAMES: Final[Mapping[str, EndKind]] = MappingProxyType(
    {
        **_HTTPX,
        # aiohttp: a read timeout (sock_read) is a SocketTimeoutError (ServerTimeoutError
        # before 3.10); a body cut short is a ClientPayloadError.
        "SocketTimeoutError": _T,
        "ServerTimeoutError": _T,
        "ConnectionTimeoutError": _T,
        "ClientPayloadError": _C,
        "ServerDisconnectedError": _C,
        "ClientConnectionResetError": _C,
        "ClientOSError": _C,
        "ClientConnectionError": _C,
        # urllib3 (under requests): ReadTimeoutError, ProtocolError ("Connection broken").
        "ReadTimeoutError": _T,
        "ConnectTimeoutError": _T,
        "ProtocolError": _C,  # (httpx's own ProtocolError is the base of its two)
        "IncompleteRead": _C,
        # requests, which wraps urllib3's: ReadTimeout and ConnectTimeout are httpx's names too.
        "Timeout": _T,
        "ChunkedEncodingError": _C,
        "ConnectionError": _C,
        # Python's own (asyncio's TimeoutError is the builtin's name).
        "TimeoutError": _T,
        "ConnectionResetError": _C,
        "BrokenPipeError": _C,
    }
)

_STORED = {EndKind.TIMEOUT: TIMEOUT_NAME, EndKind.CUT: CUT_NAME}


def error_kind(name: str | None) -> EndKind:
    """What the recorded error `name` means: CLEAN for None, TIMEOUT or CUT (unknown: CUT)."""
    if name is None:
        return EndKind.CLEAN
    return END_NAMES.get(name, EndKind.CUT)


def end_kind(end: StreamEnd) -> EndKind:
    """How the recorded body `end` ended (an error wins over a stop)."""
    if end.error is not None:
        return error_kind(end.error)
    if end.stopped_by == "session":
        return EndKind.STOPPED_BY_SESSION
    return EndKind.STOPPED_BY_CLIENT if end.truncated else EndKind.CLEAN


def stored_name(name: str) -> str:
    """The name the cassette stores for an error named `name`: one of httpx's as it is, any
    other as httpx's name for what it means (`ReadTimeout`, `RemoteProtocolError`)."""
    if name in _HTTPX:
        return name
    return _STORED[END_NAMES.get(name, EndKind.CUT)]


def recorded_error(error: BaseException) -> tuple[str, str]:
    """The name and message a recording stores for the live `error` that ended a body.

    The error's class and its bases are looked up (a subclass of a timeout is a timeout);
    an error no library is known to raise is stored as a cut, its class named in the message.
    """
    names = [klass.__name__ for klass in type(error).__mro__]
    known = [name for name in names if name in END_NAMES]
    timeouts = [name for name in known if END_NAMES[name] is EndKind.TIMEOUT]
    message = str(error)
    if not known:
        return CUT_NAME, f"{names[0]}: {message}" if message else names[0]
    return stored_name((timeouts or known)[0]), message
