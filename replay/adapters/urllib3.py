"""The urllib3 shell: `HTTPConnectionPool.urlopen` (and so `PoolManager`, and botocore, which
sends through it), recorded and replayed.

The response is urllib3's own `HTTPResponse` (a subclass), reading a file of the body's
pieces (`replay.adapters.filebody`): `preload_content`, `read(amt)`, `read1`, `stream`,
`data`, `json()`, gzip / deflate decoding and `release_conn` are urllib3's. A chunked
response streams each recorded chunk as it is due (`stream`, `read_chunked`), as urllib3
hands out each HTTP chunk; a recorded end is raised as urllib3 raises it live
(`ReadTimeoutError`, `ProtocolError`). Recording, the real `urlopen` runs with the routing
bypassed and streams; the reader of the requests shell's (`replay.adapters.requests`, which
reads a urllib3 response) stamps each chunk as it arrives.

A requests call is routed once: requests' shell replays without urllib3 and records with
the routing bypassed. What urllib3 does inside one `urlopen` (a redirect it follows, a
retry) is one exchange: the request asked, and the answer urllib3 handed back.
"""

from __future__ import annotations

import inspect
from collections.abc import Generator, Iterable
from typing import Any

from urllib3 import HTTPHeaderDict, HTTPResponse
from urllib3.connectionpool import HTTPConnectionPool
from urllib3.exceptions import ReadTimeoutError
from urllib3.util.timeout import Timeout

from replay.adapters import routes
from replay.adapters.filebody import body_file, recorded_source, replayed_source, request_body
from replay.engine.exchange import Exchange, Record, Replay, route
from replay.errors import hide_for_replay_errors
from replay.model import Request

__all__ = ["patches"]


def patches() -> list[tuple[type, str, Any]]:
    """The patch of `HTTPConnectionPool.urlopen` (see `replay.adapters`)."""
    urlopen = HTTPConnectionPool.__dict__["urlopen"]
    signature = inspect.signature(urlopen)

    def routed_urlopen(self: Any, method: str, url: str, *args: Any, **kw: Any) -> Any:
        __tracebackhide__ = hide_for_replay_errors
        session = routes.routed()
        full = _url(self, url)
        way = None if session is None else route(session, full)
        if not isinstance(way, Exchange):  # no session, or an ignored host: live
            return urlopen(self, method, url, *args, **kw)
        bound = signature.bind(self, method, url, *args, **kw)
        bound.apply_defaults()
        asked = bound.arguments
        data = request_body(asked["body"])
        headers = self.headers if asked["headers"] is None else asked["headers"]
        decided = way.decide(Request(method=method, url=full, headers=_pairs(headers), body=data))
        if isinstance(decided, Replay):
            return _replayed(self, decided, full, asked)
        return _recorded(self, decided, urlopen, bound, data)

    return [(HTTPConnectionPool, "urlopen", routed_urlopen)]


def _url(pool: Any, target: str) -> str:
    """The absolute URL of `target` (a path, or a proxy's absolute URL) on `pool`."""
    if "://" in target:
        return target
    default = 443 if pool.scheme == "https" else 80
    host = pool.host
    host = f"[{host}]" if ":" in host and not host.startswith("[") else host
    port = "" if pool.port in (None, default) else f":{pool.port}"
    return f"{pool.scheme}://{host}{port}{target}"


def _pairs(headers: Any) -> list[tuple[str, str]]:
    items = headers.items() if hasattr(headers, "items") else headers
    return [(_text(name), _text(value)) for name, value in items]


def _header_dict(pairs: Iterable[tuple[str, str]]) -> HTTPHeaderDict:
    headers = HTTPHeaderDict()
    for name, value in pairs:
        headers.add(name, value)
    return headers


def _text(value: str | bytes) -> str:
    return value.decode("latin-1") if isinstance(value, bytes) else str(value)


def _read_timeout(pool: Any, timeout: Any) -> float | None:
    """The read timeout of `urlopen`'s `timeout=` (the pool's when not given), in seconds."""
    if not isinstance(timeout, (Timeout, int, float)) or isinstance(timeout, bool):
        timeout = pool.timeout
    if isinstance(timeout, Timeout):
        timeout = timeout.read_timeout
    return float(timeout) if isinstance(timeout, (int, float)) else None


def _replayed(pool: Any, replay: Replay, url: str, asked: dict[str, Any]) -> HTTPResponse:
    """The replayed response, once its headers are due (later than the read timeout: urllib3's
    `ReadTimeoutError`, as its `urlopen` raises it)."""
    read_timeout = _read_timeout(pool, asked["timeout"])
    try:
        source, stop = replayed_source(replay, read_timeout)
    except TimeoutError:
        message = f"Read timed out. (read timeout={read_timeout})"
        raise ReadTimeoutError(pool, url, message) from None
    played = replay.played.response
    return _Response(
        body=body_file(source, stop),
        headers=_header_dict(played.headers),
        status=played.status,
        version=11,
        version_string="HTTP/1.1",
        preload_content=asked["preload_content"],
        decode_content=asked["decode_content"],
        pool=pool,
        retries=asked["retries"],
        request_method=asked["method"],
        request_url=url,
    )


def _recorded(pool: Any, record: Record, urlopen: Any, bound: Any, data: bytes) -> HTTPResponse:
    """Send for real (streaming) and hand back the response, its body recorded as it comes."""
    from replay.adapters.requests import _Upstream  # (it reads urllib3's)

    asked = bound.arguments
    preload, decode = asked["preload_content"], asked["decode_content"]
    asked.update(body=data, preload_content=False, decode_content=False)
    with routes.bypassed():
        real = record.sent(lambda: urlopen(*bound.args, **bound.kwargs))
    headers = list(real.headers.items())
    source, stop = recorded_source(record, _Upstream(real), real.status, headers)
    return _Response(
        body=body_file(source, stop),
        headers=_header_dict(headers),
        status=real.status,
        version=real.version,
        version_string=getattr(real, "version_string", "HTTP/1.1"),
        reason=real.reason,
        preload_content=preload,
        decode_content=decode,
        pool=pool,
        retries=real.retries,
        request_method=asked["method"],
        request_url=real.url,
    )


class _Response(HTTPResponse):
    """urllib3's response over a file of the body's pieces: a chunked one streams each
    recorded chunk as it is due, as urllib3 streams each HTTP chunk."""

    def supports_chunked_reads(self) -> bool:
        """False: the file holds the body, not its chunked framing."""
        return False

    def stream(
        self, amt: int | None = 2**16, decode_content: bool | None = None
    ) -> Generator[bytes, None, None]:
        """Each piece of the body: a chunked one's chunks as they are due (at most `amt`)."""
        if self.chunked:
            yield from self.read_chunked(amt, decode_content)
        else:
            yield from super().stream(amt, decode_content)

    def read_chunked(
        self, amt: int | None = None, decode_content: bool | None = None
    ) -> Generator[bytes, None, None]:
        """Each chunk of the body as it is due (split to at most `amt` bytes)."""
        while data := self.read1(amt, decode_content=decode_content):
            yield data
