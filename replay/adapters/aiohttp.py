"""The aiohttp shell of a cassette session: `ClientSession` requests recorded and replayed.

`patches()` replaces `aiohttp.ClientSession._request` (vcrpy's seam). A request is noted alike
to record or replay: method, full URL (base URL and params in), the session's headers merged
with the request's plus the body's Content-Type and `auth` (not aiohttp's automatic Host,
User-Agent, Accept*), and the bytes of `json=` or a bytes, text or form `data=` (others: empty).

Replaying, `_request` returns, once the headers are due, a real `ClientResponse` (of the
session's response class) whose `content` is aiohttp's own `StreamReader`, fed the replayed
body's chunks (`replay.engine.playing`) by the reader itself as its buffer runs dry at
instant speed (no task, no wait), else by a task that feeds each chunk when due and yields
to the reader, as a socket would: a reader that keeps up reads the recorded chunks one by
one. A recorded error ends the body as aiohttp's `SocketTimeoutError` (a read timeout: a
stall, or headers or a chunk due further away than `sock_read`) or `ClientPayloadError`.
With `auto_decompress`, gzip and deflate bodies are decoded as fed (other encodings are fed
as recorded). Traces do not fire; `timeout.total` spares replayed bodies.

Recording: see `replay.adapters.aiohttp_record`. A redirect is one interaction (first request,
final response); `ws_connect` is `replay.adapters.websockets_aiohttp`'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import http
import inspect
import types
import zlib
from collections.abc import Awaitable, Callable, Mapping
from http.cookies import CookieError, SimpleCookie
from typing import Any
from urllib.parse import urlencode

import aiohttp
from multidict import CIMultiDict, CIMultiDictProxy
from yarl import URL

from replay.adapters import routes as _routes
from replay.adapters.aiohttp_record import record, unchecked
from replay.adapters.aiohttp_stamped import connect_patch
from replay.adapters.network import refuse_unless_reachable
from replay.adapters.websockets_aiohttp import patches as ws_patches
from replay.adapters.websockets_aiohttp import replayed_socket
from replay.engine.ends import EndKind, error_kind
from replay.engine.exchange import Desk, Live, Record, route
from replay.engine.playing import Playing
from replay.errors import hide_for_replay_errors
from replay.framing.decoding import Inflater
from replay.model import Request, Response

__all__ = ["patches"]

_Send = Callable[..., Awaitable[aiohttp.ClientResponse]]
_Options = Mapping[str, Any]  # the keyword arguments of `_request`

#: What aiohttp raises when a socket read outlasts `sock_read` (3.10+; before: its base).
_READ_TIMEOUT: type[Exception] = getattr(aiohttp, "SocketTimeoutError", aiohttp.ServerTimeoutError)
_AIOHTTP_DECODES = frozenset({"gzip", "deflate", "br", "zstd"})  # decoded by aiohttp itself
_REPLAY_DECODES = frozenset({"gzip", "deflate"})  # decoded by replay for it
#: aiohttp 3.14 wants the writer of a sent request; a replayed one has sent nothing.
_SENT: dict[str, Any] = (
    {"stream_writer": types.SimpleNamespace(output_size=0)}
    if "stream_writer" in inspect.signature(aiohttp.ClientResponse.__init__).parameters
    else {}
)
_PHRASES = {status.value: status.phrase for status in http.HTTPStatus}
_FEEDERS: set[asyncio.Task[None]] = set()  # strong references to the running feed tasks


def patches() -> list[tuple[type, str, Any]]:
    """The patch of `aiohttp.ClientSession._request` that routes requests to sessions."""
    unguarded: _Send = aiohttp.ClientSession._request

    async def original(
        self: aiohttp.ClientSession, method: str, str_or_url: Any, **kwargs: Any
    ) -> aiohttp.ClientResponse:
        # The network guard: a block refuses it by its URL, pooled connection or new.
        __tracebackhide__ = hide_for_replay_errors
        if replayed_socket() is None:  # (a replayed WebSocket upgrade reaches no network)
            refuse_unless_reachable(method, _full_url(self, str_or_url))
        return await unguarded(self, method, str_or_url, **kwargs)

    @functools.wraps(unguarded)
    async def _request(
        self: aiohttp.ClientSession, method: str, str_or_url: Any, **kwargs: Any
    ) -> aiohttp.ClientResponse:
        __tracebackhide__ = hide_for_replay_errors
        session = _routes.routed()
        if session is None:
            return await original(self, method, str_or_url, **kwargs)
        return await _handle(session, self, original, method, str_or_url, kwargs)

    return [(aiohttp.ClientSession, "_request", _request), connect_patch(), *ws_patches()]


def _full_url(client: aiohttp.ClientSession, target: Any) -> str:
    """The URL a request of `client` to `target` goes to (the session's base URL joined)."""
    build = getattr(client, "_build_url", None)
    try:
        return str(build(target) if build is not None else URL(str(target)))
    except (TypeError, ValueError):
        return str(target)


async def _handle(
    session: Desk,
    client: aiohttp.ClientSession,
    send: _Send,
    method: str,
    target: Any,
    kwargs: dict[str, Any],
) -> aiohttp.ClientResponse:
    """Replay, record or refuse one request of `client` for `session`."""
    __tracebackhide__ = hide_for_replay_errors
    try:
        request = _request_of(client, method, target, kwargs)
    except (TypeError, ValueError):  # aiohttp's own send says what is wrong with it
        return await send(client, method, target, **kwargs)
    way = route(session, request.url)
    if isinstance(way, Live) or request.header("upgrade") is not None:
        return await send(client, method, target, **kwargs)
    check = kwargs.pop("raise_for_status", None)
    decided = way.decide(request)
    if isinstance(decided, Record):
        sending = send(client, method, target, raise_for_status=unchecked, **kwargs)
        response = await record(decided, sending, _decodes(client, kwargs))
    else:
        timeout = kwargs.get("timeout", client.timeout)
        sock_read = timeout.sock_read if isinstance(timeout, aiohttp.ClientTimeout) else None
        body = decided.body(_end_error, sock_read)
        await body.ahead()  # the headers, at their recorded time
        response = _replayed(client, request, decided.played.response)
        _feed(response, body, client, kwargs)
    await _check_status(client, check, response)
    return response


# -- the request -------------------------------------------------------------------------------


def _request_of(
    client: aiohttp.ClientSession, method: str, target: Any, kwargs: _Options
) -> Request:
    """The request as replay notes it (the same whether it is recorded or replayed)."""
    url = client._build_url(target).extend_query(kwargs.get("params") or {})
    headers = client._prepare_headers(kwargs.get("headers"))
    body, content_type = _body_of(client, kwargs)
    skipped = {name.lower() for name in kwargs.get("skip_auto_headers") or ()}
    if content_type and aiohttp.hdrs.CONTENT_TYPE not in headers and "content-type" not in skipped:
        headers[aiohttp.hdrs.CONTENT_TYPE] = content_type
    auth = kwargs.get("auth") or client.auth
    if isinstance(auth, aiohttp.BasicAuth) and aiohttp.hdrs.AUTHORIZATION not in headers:
        headers[aiohttp.hdrs.AUTHORIZATION] = auth.encode()
    # As the bytes on the wire (aiohttp sends utf-8), read as latin-1 like httpx's.
    pairs = [(name, value.encode().decode("latin-1")) for name, value in headers.items()]
    return Request(method=method.upper(), url=str(url), headers=pairs, body=body)


def _body_of(client: aiohttp.ClientSession, kwargs: _Options) -> tuple[bytes, str]:
    """The request body's bytes, and the Content-Type aiohttp gives it."""
    data, json = kwargs.get("data"), kwargs.get("json")
    if json is not None:
        return client.json_serialize(json).encode(), "application/json"
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data), "application/octet-stream"
    if isinstance(data, str):
        return data.encode(), "text/plain; charset=utf-8"
    fields = list(data.items()) if isinstance(data, Mapping) else data
    if isinstance(fields, (list, tuple)) and all(map(_is_field, fields)):
        return urlencode(fields, doseq=True).encode(), "application/x-www-form-urlencoded"
    return b"", ""  # no body, or a streamed one (not noted)


def _is_field(pair: object) -> bool:
    """Whether `pair` is a (name, value) form field that urlencodes as aiohttp's FormData."""
    return isinstance(pair, tuple) and len(pair) == 2 and isinstance(pair[1], (str, int, float))


# -- replay ------------------------------------------------------------------------------------


def _replayed(
    client: aiohttp.ClientSession, request: Request, recorded: Response
) -> aiohttp.ClientResponse:
    """A response of `client`'s response class with the recorded status and headers."""
    url = URL(request.url)
    sent = CIMultiDictProxy(CIMultiDict(request.headers))
    response: aiohttp.ClientResponse = client._response_class(
        request.method,
        url,
        writer=None,
        continue100=None,
        timer=None,  # type: ignore[arg-type]
        request_info=aiohttp.RequestInfo(url, request.method, sent, url),
        traces=[],
        loop=asyncio.get_running_loop(),
        session=client,
        **_SENT,
    )
    response.version = aiohttp.HttpVersion11
    response.status = recorded.status
    response.reason = _PHRASES.get(recorded.status, "")
    raw = tuple(
        (name.encode("latin-1"), value.encode("latin-1")) for name, value in recorded.headers
    )
    response._raw_headers = raw
    # aiohttp reads header values as utf-8 (undecodable bytes kept as surrogates).
    decoded = [
        (name.decode("latin-1"), value.decode("utf-8", "surrogateescape")) for name, value in raw
    ]
    response._headers = CIMultiDictProxy(CIMultiDict(decoded))
    cookies: SimpleCookie = SimpleCookie()
    for header in response.headers.getall(aiohttp.hdrs.SET_COOKIE, ()):
        with contextlib.suppress(CookieError):  # aiohttp skips a malformed cookie too
            cookies.load(header)
    if cookies:  # into the session's jar, as aiohttp does
        response.cookies = cookies
        client.cookie_jar.update_cookies(cookies, response.url)
    return response


class _Socketless:
    """What aiohttp's `StreamReader` expects of its protocol: here, nothing to pause."""

    connected = True
    _reading_paused = False

    def pause_reading(self) -> None: ...
    def resume_reading(self, resume_parser: bool = True) -> None: ...


def _end_error(name: str, message: str) -> Exception:
    """A recorded end as aiohttp raises it mid-body."""
    timeout = error_kind(name) is EndKind.TIMEOUT
    return (_READ_TIMEOUT if timeout else aiohttp.ClientPayloadError)(message)


class _ReplayedBody(aiohttp.StreamReader):
    """aiohttp's StreamReader of a replayed response, fed its body's chunks: by the reader
    itself when its buffer runs dry (instant speed), else by a task (`feed`). A release or
    close (which sets the 'connection closed' error) stops both."""

    __slots__ = ("_body", "_chunks", "_feeder", "_inflater")

    def __init__(self, body: Playing, inflater: Inflater | None, limit: int) -> None:
        loop = asyncio.get_running_loop()
        super().__init__(_Socketless(), limit, loop=loop)  # type: ignore[arg-type]
        self._body = body
        self._chunks = iter(body) if body.instant else None  # taken by the reader itself
        self._inflater = inflater
        self._feeder: asyncio.Task[None] | None = None
        self.begin_http_chunk_receiving()  # each recorded chunk is an HTTP chunk (`iter_chunks`)

    def take(self, data: bytes | None, error: Exception | None = None) -> bool:
        """Feed a chunk, or the end (None: EOF; `error`: aiohttp's); True: more follow."""
        inflater = self._inflater
        try:
            if error is not None:
                self.set_exception(error)
            elif data is not None:
                self.feed_data(data if inflater is None else inflater.decode(data))
                self.end_http_chunk_receiving()
                return True
            else:
                self.feed_data(b"" if inflater is None else inflater.flush())
                self.feed_eof()
        except zlib.error as exc:  # aiohttp's words for a body that does not decode
            self.set_exception(
                aiohttp.ClientPayloadError(f"Can not decode content-encoding: {exc}")
            )
        self._body.close()
        return False

    def _pull(self) -> bool:
        """Feed the next chunk of an instant body, taken now; True: more follow."""
        assert self._chunks is not None
        try:
            data = next(self._chunks, None)
        except Exception as error:  # the recorded end
            return self.take(None, error)
        return self.take(data)

    async def feed(self) -> None:
        """Feed each chunk when due, yielding to the reader after each."""
        body = self._body
        while True:
            try:
                data: bytes | None = await body.__anext__()
            except StopAsyncIteration:
                data = None
            except Exception as error:  # the recorded end
                self.take(None, error)
                return
            if not self.take(data):
                return
            await asyncio.sleep(0)

    async def _wait(self, func_name: str) -> None:
        if self._feeder is not None:
            return await super()._wait(func_name)
        self._pull()  # (a recorded error is raised to the reader at once)
        if self._exception is not None:
            raise self._exception

    async def wait_eof(self) -> None:
        if self._feeder is None:  # instant speed: nothing feeds the body unless it is read
            while self._exception is None and self._pull():
                pass
        await super().wait_eof()

    def set_exception(self, exc: BaseException, *args: Any, **kwargs: Any) -> None:
        super().set_exception(exc, *args, **kwargs)
        self._body.close()
        if self._feeder is not None and self._feeder is not asyncio.current_task():
            self._feeder.cancel()


def _feed(
    response: aiohttp.ClientResponse,
    body: Playing,
    client: aiohttp.ClientSession,
    kwargs: _Options,
) -> None:
    """Give `response` its body: taken by its reader at instant speed, else fed by a task."""
    encoding = (response.headers.get(aiohttp.hdrs.CONTENT_ENCODING) or "").strip().lower()
    decoded = _decodes(client, kwargs) and encoding in _REPLAY_DECODES
    limit: int = kwargs.get("read_bufsize") or client._read_bufsize
    response.content = reader = _ReplayedBody(body, Inflater(encoding) if decoded else None, limit)
    if not body.instant:
        reader._feeder = task = asyncio.get_running_loop().create_task(reader.feed())
        _FEEDERS.add(task)
        task.add_done_callback(_FEEDERS.discard)


# -- both --------------------------------------------------------------------------------------


def _decodes(client: aiohttp.ClientSession, kwargs: _Options) -> bool:
    """Whether aiohttp decodes the response body for this request (`auto_decompress`)."""
    chosen = kwargs.get("auto_decompress")
    return bool(client.auto_decompress if chosen is None else chosen)


async def _check_status(
    client: aiohttp.ClientSession, check: Any, response: aiohttp.ClientResponse
) -> None:
    """aiohttp's `raise_for_status` (the request's, else the session's) on `response`."""
    check = client.raise_for_status if check is None else check
    if callable(check):
        await check(response)
    elif check:
        response.raise_for_status()
