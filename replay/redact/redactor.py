"""What never reaches a cassette: credentials in headers, URLs and request bodies.

Redaction replaces a value by a placeholder and keeps the name, so the cassette still shows
that a key was sent, and matching (which never looks at these values by default) still works.
It runs on the request before it is matched or stored, and on the response headers. What is
secret does not depend on an exact list of names (`replay.redact.shapes` says how):

- headers (request and response) whose name is credential-like, plus `DEFAULT_HEADERS` and the
  names the user adds: the whole value; in every other header value, well-known keys
  (`sk-…`, `AKIA…`, JWTs…), the credentials after `Bearer` / `Basic` / `Token`, and what is
  secret in the URLs it holds (`Referer`, `Location`, `X-Original-URL`, `Link`…);
- the URL's user information (`https://TOKEN@host`, `https://user:password@host`): user and
  password; a path segment holding a well-known key (the URL half lives in
  `replay.redact.urls`);
- query and fragment parameters (parted by `&` or `;`), path parameters (`;jsessionid=…`) and
  the fields of an `application/x-www-form-urlencoded` body, whose name is credential-like
  (or one of `URL_NAMES`: `code`, `sessionid`…; plus `DEFAULT_QUERY_PARAMETERS` and the names
  the user adds), or whose value holds a well-known key: the whole value; a part without `=`
  that holds a key, whole;
- in a JSON request body (a Content-Type naming json, as matching reads it), at any depth
  (`replay.redact.deep_json`: no recursion): every string under a credential-like field, in its
  lists and objects too (not the schema of a tool's parameter, in a JSON schema's
  `properties`), and well-known keys inside any other string. The body is written anew only
  when something changed (the JSON half lives in `replay.redact.json_bodies`);
- a compressed request body (`Content-Encoding`) is decoded first; one with something to hide
  is stored decoded, without its Content-Encoding.

Response bodies are not redacted: they are what the replay plays, byte for byte; but for
one framing. In an AWS event stream (Bedrock's), each message's JSON payload is redacted as a
JSON request body is, and a message that changed is encoded anew with fresh CRCs, so the
client's own checksum check still passes (`replay.redact.eventstream`). A server that echoes
a secret into another body (a token endpoint's answer, say) needs a `before_record` hook
(`response_holds_key` lets a recording warn of the shapes of keys there); so does a request
body that is neither JSON nor a form.

The user's `hook` (`before_record`) runs after the built-in redaction. It is also applied to
each live request before matching (with an empty response), as vcrpy applies its
`before_record_request`: a request the hook rewrote on disk must still match the live
request it came from.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable
from collections.abc import Set as AbstractSet
from urllib.parse import unquote_plus

import attrs

from replay.model import Chunks, Headers, Interaction, Request, Response
from replay.redact.eventstream import is_event_stream, redact_payloads
from replay.redact.json_bodies import JsonRedaction, is_secret
from replay.redact.shapes import (
    NAME_STEMS,
    PLACEHOLDER,
    chunks_hold_key,
    hide_header_shapes,
    hide_subprotocols,
)
from replay.redact.urls import URL_MARKS, UrlRedaction, remember

__all__ = ["DEFAULT_HEADERS", "DEFAULT_QUERY_PARAMETERS", "PLACEHOLDER", "Redactor"]

#: Header names always redacted, besides every credential-like name.
DEFAULT_HEADERS: frozenset[str] = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "x-api-key",
        "api-key",
        "cookie",
        "set-cookie",
        "x-goog-api-key",
        "openai-organization",
        "openai-project",
        "x-amz-security-token",
        "x-amz-date",
    }
)
#: Query parameter (and body field) names always redacted, besides every credential-like name.
DEFAULT_QUERY_PARAMETERS: frozenset[str] = frozenset(
    {"key", "api_key", "apikey", "api-key", "token", "access_token", "auth", "secret", "password"}
)

#: What the hook sees as the response when it is applied to a live request for matching.
_NO_RESPONSE = Response(status=200)

#: Header values known to hold no key: most come back with every request (user agent,
#: content type, host), and a set lookup costs a tenth of the regular expression. Only values
#: found clean are kept, and they are stored in the cassette anyway.
_CLEAN_HEADER_VALUES: set[str] = set()


def _body_headers(headers: Headers) -> tuple[str, str]:
    """The request's Content-Type and Content-Encoding, lower case ("" without one; an
    encoding of "identity" is none)."""
    content_type = encoding = ""
    for name, value in headers:  # a plain loop, as matching reads it
        lowered = name.lower()
        if lowered == "content-type":
            content_type = value.lower()
        elif lowered == "content-encoding" and value.strip().lower() != "identity":
            encoding = value.lower()
    return content_type, encoding


def _lower_set(names: Iterable[str]) -> frozenset[str]:
    if isinstance(names, str):  # one name, not its letters
        names = (names,)
    return frozenset(name.lower() for name in names)


class _Shared:
    """What redactors of the same names share: the names, and the verdicts reached."""

    __slots__ = (
        "clean_headers",
        "clean_urls",
        "field_names",
        "header_names",
        "header_verdicts",
        "stems",
        "stems_pattern",
    )

    def __init__(self, headers: frozenset[str], query_parameters: frozenset[str]) -> None:
        self.header_names = DEFAULT_HEADERS | headers
        self.field_names = DEFAULT_QUERY_PARAMETERS | query_parameters
        stems = dict.fromkeys([*NAME_STEMS, *sorted(query_parameters)])  # common first
        self.stems = tuple(stem.encode("utf-8") for stem in stems)
        self.stems_pattern = re.compile(b"|".join(re.escape(stem) for stem in self.stems))
        self.header_verdicts: dict[str, bool] = {}
        self.clean_urls: set[str] = set()
        self.clean_headers: dict[Headers, tuple[str, str]] = {}


@functools.lru_cache(maxsize=64)
def _shared(headers: frozenset[str], query_parameters: frozenset[str]) -> _Shared:
    return _Shared(headers, query_parameters)


@attrs.frozen
class Redactor(UrlRedaction, JsonRedaction):
    """Replaces secrets by a placeholder in requests and responses.

    Args:
        headers: extra header names to redact (case-insensitive), added to the defaults.
        query_parameters: extra query parameter names to redact (case-insensitive), added to
            the defaults; they name form and JSON body fields too.
        hook: a callable applied last to every interaction (e.g. to scrub a response body).
            It is also applied, with an empty response, to each live request before matching.
    """

    headers: frozenset[str] = attrs.field(default=frozenset(), converter=_lower_set)
    query_parameters: frozenset[str] = attrs.field(default=frozenset(), converter=_lower_set)
    hook: Callable[[Interaction], Interaction | None] | None = None
    # What the defaults and the user's names add up to, and the verdicts already reached:
    # redaction runs once per replayed request, on the same few names and URLs every time.
    # Shared by the redactors of the same names (a session makes one per test).
    _shared: _Shared = attrs.field(init=False, repr=False, eq=False)
    _header_names: frozenset[str] = attrs.field(init=False, repr=False, eq=False)
    _field_names: frozenset[str] = attrs.field(init=False, repr=False, eq=False)
    _stems: tuple[bytes, ...] = attrs.field(init=False, repr=False, eq=False)
    _stems_pattern: re.Pattern[bytes] = attrs.field(init=False, repr=False, eq=False)
    _header_verdicts: dict[str, bool] = attrs.field(init=False, repr=False, eq=False)
    _clean_urls: set[str] = attrs.field(init=False, repr=False, eq=False)
    # Header lists found clean, with their Content-Type and Content-Encoding: a client sends
    # the same few lists (only Content-Length differs with the body), so one lookup replaces
    # a pass per header.
    _clean_headers: dict[Headers, tuple[str, str]] = attrs.field(init=False, repr=False, eq=False)

    @_shared.default
    def _shared_by_names(self) -> _Shared:
        return _shared(self.headers, self.query_parameters)

    @_header_names.default
    def _all_header_names(self) -> frozenset[str]:
        return self._shared.header_names

    @_field_names.default
    def _all_field_names(self) -> frozenset[str]:
        return self._shared.field_names

    @_stems.default
    def _all_stems(self) -> tuple[bytes, ...]:
        return self._shared.stems

    @_stems_pattern.default
    def _any_stem(self) -> re.Pattern[bytes]:
        return self._shared.stems_pattern

    @_header_verdicts.default
    def _shared_header_verdicts(self) -> dict[str, bool]:
        return self._shared.header_verdicts

    @_clean_urls.default
    def _shared_clean_urls(self) -> set[str]:
        return self._shared.clean_urls

    @_clean_headers.default
    def _shared_clean_headers(self) -> dict[Headers, tuple[str, str]]:
        return self._shared.clean_headers

    def _headers(self, pairs: Headers) -> Headers:
        """`pairs` with secrets replaced; `pairs` itself when none was found."""
        verdicts = self._header_verdicts
        cleaned: list[tuple[str, str]] | None = None
        for index, (name, value) in enumerate(pairs):
            secret = verdicts.get(name)
            if secret is None:
                secret = is_secret(name, self._header_names)
                remember(verdicts, name, secret)
            if secret:
                hidden = PLACEHOLDER
            elif name.lower() == "sec-websocket-protocol":  # a browser client's key rides here
                hidden = self._header_value(hide_subprotocols(value))
            elif value in _CLEAN_HEADER_VALUES:
                hidden = value
            else:
                hidden = self._header_value(value)
            if hidden != value and cleaned is None:
                cleaned = list(pairs[:index])
            if cleaned is not None:
                cleaned.append((name, hidden))
        return pairs if cleaned is None else tuple(cleaned)

    def _header_value(self, value: str) -> str:
        """A header value (not secret by its name) with keys, scheme credentials and the
        secrets of the URLs in it replaced (`Referer`, `Location`, `X-Original-URL`, `Link`
        carry a URL); `value` itself when none was."""
        hidden = hide_header_shapes(value)
        if URL_MARKS.search(hidden) is None:
            if hidden is value:  # (clean whatever the names: shared by every redactor)
                remember(_CLEAN_HEADER_VALUES, value)
            return hidden
        return self.urls_in(hidden)

    def _body(self, body: bytes, content_type: str, clean: AbstractSet[bytes]) -> bytes:
        """A request's body with secrets replaced; the body itself when none was.

        Args:
            content_type: the request's Content-Type, lower case.
            clean: JSON bodies known to hold nothing to hide (from `clean_bodies`).
        """
        if not body:
            return body
        if "json" in content_type:
            return body if body in clean else self._json(body)
        if "application/x-www-form-urlencoded" in content_type:
            text = body.decode("latin-1")
            cleaned = self._fields(text, unquote_plus)
            return body if cleaned is text else cleaned.encode("latin-1")
        return body

    def frame(self, data: bytes) -> bytes:
        """A WebSocket client's text frame as it is stored and matched: a JSON one with its
        secrets replaced as a JSON request body's are; the frame itself when none was."""
        return self._body(data, "application/json", frozenset())

    def _encoded_body(
        self, body: bytes, headers: Headers, content_type: str, encoding: str
    ) -> tuple[bytes, Headers]:
        """A compressed body (`Content-Encoding: gzip`…) and its headers, with secrets
        replaced: a body with something to hide is stored decoded, and its Content-Encoding
        header goes (a live request is made the same, so it still matches). `body` and
        `headers` themselves when nothing was hidden, or when it cannot be decoded."""
        from replay.framing.decoding import DecodingError, decoded_chunks  # (rarely needed)

        coding = [("content-encoding", encoding)]
        encoded = Response(status=200, headers=coding, chunks=Chunks((0.0,), (body,)))
        try:
            decoded = b"".join(data for _, data in decoded_chunks(encoded))
        except DecodingError:  # damaged, too large or an extra missing: nothing to look at
            return body, headers
        cleaned = self._body(decoded, content_type, frozenset())
        if cleaned is decoded:
            return body, headers
        kept = tuple((name, value) for name, value in headers if name.lower() != "content-encoding")
        return cleaned, kept

    def _request(self, request: Request, clean: AbstractSet[bytes] = frozenset()) -> Request:
        # Once per replayed request: what is known clean is looked up here, without calls.
        url = request.url
        if url not in self._clean_urls:
            url = self.url(url)
        headers = request.headers
        body_headers = self._clean_headers.get(headers)
        if body_headers is None:
            body_headers = _body_headers(headers)
            headers = self._headers(headers)
            if headers is request.headers:
                remember(self._clean_headers, headers, body_headers)
        content_type, encoding = body_headers
        body = request.body
        if encoding:
            body, headers = self._encoded_body(body, headers, content_type, encoding)
        elif body not in clean or "json" not in content_type:
            body = self._body(body, content_type, clean)
        if url is request.url and headers is request.headers and body is request.body:
            return request  # nothing to hide: no copy (this runs once per replayed request)
        return attrs.evolve(request, url=url, headers=headers, body=body)

    def request(self, request: Request, *, clean: AbstractSet[bytes] = frozenset()) -> Request:
        """`request` as it would be stored: secrets replaced, then the hook applied.

        This is what a live request is matched as, so it meets its recorded self.

        Args:
            clean: JSON bodies known to hold nothing to hide (`clean_bodies`).
        """
        cleaned = self._request(request, clean)
        if self.hook is None:
            return cleaned
        hooked = self.hook(Interaction(cleaned, _NO_RESPONSE))
        return cleaned if hooked is None else hooked.request

    def response_holds_key(self, response: Response) -> bool:
        """Whether `response`'s body (its Content-Encoding undone) holds a well-known key.

        Response bodies are stored as they came (the replay plays them byte for byte): a
        recording session warns of such a body (`KeyInResponseWarning`), naming the
        interaction, never the value. Only the first `MAX_DECODED_BYTES` (64 MiB) are looked
        through: a key is echoed in a short answer, and a long stream is not read twice.
        """
        from replay.framing.decoding import MAX_DECODED_BYTES, DecodingError, decoded_chunks

        try:
            decoded = (data for _, data in decoded_chunks(response))
            return chunks_hold_key(decoded, limit=MAX_DECODED_BYTES)
        except DecodingError:  # not decodable: look at it as it is
            raw = (chunk.data for chunk in response.chunks)
            return chunks_hold_key(raw, limit=MAX_DECODED_BYTES)

    def interaction(self, interaction: Interaction) -> Interaction | None:
        """A copy of `interaction` with secrets replaced in its request and response headers,
        then passed through the hook; None when the hook returns None (vcrpy's "do not
        record this one")."""
        response = interaction.response
        headers = _unechoed(interaction.request, self._headers(response.headers))
        if headers is not response.headers:
            response = attrs.evolve(response, headers=headers)
        if is_event_stream(response):
            response = redact_payloads(response, self._json)
        frames = interaction.frames
        if frames is not None:  # (a recorder's are already; a converted file's may not be)
            frames = tuple(
                attrs.evolve(f, data=self.frame(f.data))
                if f.sender == "client" and f.kind == "text"
                else f
                for f in frames
            )
        cleaned = Interaction(self._request(interaction.request), response, frames=frames)
        return self.hook(cleaned) if self.hook is not None else cleaned


def _unechoed(request: Request, headers: Headers) -> Headers:
    """`headers` (a 101's) without the subprotocol it echoes when that is a credential the
    request offered (Deepgram's `token, KEY` is answered `KEY`)."""
    offered = request.header("sec-websocket-protocol")
    if not offered:
        return headers
    raw = [item.strip() for item in offered.split(",")]
    secret = {  # (the items joined as `hide_subprotocols` joins them: "a,b" is "a, b")
        a for a, b in zip(raw, hide_subprotocols(", ".join(raw)).split(", "), strict=True) if a != b
    }
    if not any(n.lower() == "sec-websocket-protocol" and v.strip() in secret for n, v in headers):
        return headers
    return tuple(
        (n, PLACEHOLDER if n.lower() == "sec-websocket-protocol" and v.strip() in secret else v)
        for n, v in headers
    )
