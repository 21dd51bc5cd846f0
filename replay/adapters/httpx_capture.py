"""Capturing an httpx or httpx2 request as a `replay.model.Request`, once per request sent.

On the replay's hot path: the request's URL text and decoded headers are looked up by the
parts httpx keeps (private attributes, read where present: any other request is formatted
and decoded as it is), and the `Request` is made past its validators
(`replay.store.prechecked`): httpx made its values valid.
"""

from __future__ import annotations

from typing import Any, Protocol

from replay.model import Headers, Request
from replay.store.prechecked import request_of

__all__ = ["request_from_httpx"]


class _HttpxRequest(Protocol):
    """What `request_from_httpx` reads of an httpx or httpx2 request."""

    @property
    def method(self) -> str: ...
    @property
    def url(self) -> Any: ...
    @property
    def headers(self) -> Any: ...
    @property
    def content(self) -> bytes: ...


def request_from_httpx(request: _HttpxRequest) -> Request:
    """Capture an httpx or httpx2 request whose body has been read."""
    method, url, body = request.method, _url_text(request.url), request.content
    headers = _headers_of(request.headers)
    if not isinstance(method, str) or not isinstance(body, bytes):
        return Request(method=method, url=url, headers=headers, body=body)  # the error says why
    # Valid by construction (str pairs decoded from latin-1 bytes): the validators and the
    # header converter, half of this call's cost once per replayed request, are skipped.
    return request_of(method, url, headers, body)


#: The most entries each cache below holds; past it, it is emptied.
_LIMIT = 256

#: URL texts by their httpx / httpx2 parts, for `_url_text`.
_URL_TEXTS: dict[tuple[object, ...], str] = {}

#: Header lists as `request_from_httpx` decodes them, by their raw bytes: a client sends the
#: same few lists (only Content-Length changes with the body), so one lookup replaces two
#: decodes a header, and the same tuple comes back (the redactor looks it up in a dict).
_DECODED_HEADERS: dict[tuple[tuple[bytes, bytes], ...], Headers] = {}

#: `_DECODED_HEADERS` by httpx's triples, for `_headers_of`.
_DECODED_TRIPLES: dict[tuple[object, ...], Headers] = {}


def _url_text(url: Any) -> str:
    """`str(url)` of an httpx / httpx2 URL. Their `__str__` formats the URL's parts anew
    (a third of the capture's cost), and a client sends the same few URLs: the text is
    looked up by those parts (the named tuple `__str__` formats)."""
    parts = getattr(url, "_uri_reference", None)  # private: any other URL is formatted
    if not isinstance(parts, tuple):
        return str(url)
    text = _URL_TEXTS.get(parts)
    if text is None:
        if len(_URL_TEXTS) >= _LIMIT:
            _URL_TEXTS.clear()
        text = _URL_TEXTS[parts] = str(url)
    return text


def _headers_of(headers: Any) -> Headers:
    """The pairs of httpx / httpx2 `headers`, decoded. Their `raw` is a list made anew from
    their (name, lower-case name, value) triples: the decoded pairs are looked up by those
    triples instead (half the cost of `raw`)."""
    triples = getattr(headers, "_list", None)  # private: any other headers give `raw`
    if isinstance(triples, list):
        try:
            key = tuple(triples)
            found = _DECODED_TRIPLES.get(key)
        except TypeError:  # not hashable triples after all
            pass
        else:
            if found is None:
                if len(_DECODED_TRIPLES) >= _LIMIT:
                    _DECODED_TRIPLES.clear()
                found = _DECODED_TRIPLES[key] = _decoded(tuple(headers.raw))
            return found
    raw = tuple(headers.raw)
    return _DECODED_HEADERS.get(raw) or _decoded(raw)


def _decoded(raw: tuple[tuple[bytes, bytes], ...]) -> Headers:
    if len(_DECODED_HEADERS) >= _LIMIT:
        _DECODED_HEADERS.clear()
    decoded = tuple([(name.decode("latin-1"), value.decode("latin-1")) for name, value in raw])
    _DECODED_HEADERS[raw] = decoded
    return decoded
