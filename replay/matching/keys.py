"""The key of each named matcher: two requests have equal keys exactly when vcrpy's matcher
of that name finds them equal, but for three things: the `body` of a JSON-RPC 2.0 request is
compared without its `id` and progress token (`replay.matching.jsonrpc`; `raw_body` compares
the bytes), the `headers` without the values that change with every signed request
(`SIGNED_HEADERS`: a SigV4 signature and date, botocore's invocation id), and the `path`
with its escapes of characters a path holds as they are undone (`%3A` is `:`). One matcher is
replay's own: `last_event_id`, the `Last-Event-ID` header an SSE client resumes with
(`replay.matching.resume`).

A URL's keys come from one `urlsplit`. A JSON body's key does not depend on key order,
spacing, escapes or number forms, so every body is parsed (`json_key`): the scanner
`json.loads` ends in is called directly, and an object of strings, booleans and nulls (the
usual API call) is keyed by the set of its items, cheaper than its canonical text.
"""

from __future__ import annotations

import json
import json.encoder
import re
import string
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import SplitResult, parse_qsl, urlsplit

from replay.matching.jsonrpc import normalised
from replay.matching.resume import last_event_id
from replay.redact import deep_json

if TYPE_CHECKING:
    from replay.model import Request

__all__ = [
    "JSON_OPENINGS",
    "NAMES",
    "REQUEST_KEYS",
    "SIGNED_HEADERS",
    "URL_KEYS",
    "Matcher",
    "is_json",
    "json_key",
    "named_keys",
]

#: A matcher: vcrpy's name of one, or a vcrpy-style callable `(new, recorded)` that returns a
#: bool or raises AssertionError (`replay.matching`, `replay.matching.vcr`).
Matcher = str | Callable[[Any, Any], Any]


_DEFAULT_PORTS = {"http": 80, "https": 443}

# One encoder, made once: `json.dumps` with options builds a new one per call. A parsed
# body holds no cycle, so the check for one is left out.
_CANONICAL_JSON = json.JSONEncoder(sort_keys=True, separators=(",", ":"), check_circular=False)


def _c_encoder() -> Callable[[object], str]:
    """`_CANONICAL_JSON.encode`, with the C encoder it builds on every call built once (half
    the cost of canonicalising a short body, paid for each recorded body when the index is
    built); the encoder itself where the C accelerator is missing (PyPy)."""
    make = getattr(json.encoder, "c_make_encoder", None)  # undocumented: not in typeshed
    if make is None:
        return _CANONICAL_JSON.encode
    encoder = _CANONICAL_JSON
    # The arguments `JSONEncoder.iterencode` passes it (markers None: no cycle check).
    iterencode = make(
        None,
        encoder.default,
        json.encoder.encode_basestring_ascii,
        None,
        encoder.key_separator,
        encoder.item_separator,
        True,
        encoder.skipkeys,
        encoder.allow_nan,
    )

    def encode(value: object) -> str:
        return "".join(iterencode(value, 0))

    return encode


_shallow_canonical = _c_encoder()


def _canonical(value: object) -> str:
    """`value` as its canonical JSON text (sorted names, no spaces, ASCII), at any depth."""
    try:
        return _shallow_canonical(value)
    except RecursionError:  # nested deeper than the standard library writes
        return deep_json.dumps(value, separators=(",", ":"), sort_keys=True)


def _port(parts: SplitResult) -> int | None:
    return parts.port or _DEFAULT_PORTS.get(parts.scheme)


def _query(parts: SplitResult) -> tuple[tuple[str, str], ...]:
    if not parts.query:  # the usual API call: nothing to parse
        return ()
    return tuple(sorted(parse_qsl(parts.query, keep_blank_values=True)))


#: What a path segment holds as it is (RFC 3986's `pchar`): an escape of one of these names
#: the same path (botocore escapes the `:` of a Bedrock model id, anthropic's client does not).
_PLAIN_IN_PATH = frozenset(string.ascii_letters + string.digits + "-._~!$&'()*+,;=:@")
_ESCAPE = re.compile("%[0-9A-Fa-f]{2}")


def _unescaped(escape: re.Match[str]) -> str:
    char = chr(int(escape.group()[1:], 16))
    return char if char in _PLAIN_IN_PATH else escape.group().upper()


def _path(parts: SplitResult) -> str:
    """The `path` key: the path, its escapes of what a path holds as it is (`%3A`) undone."""
    path = parts.path or "/"
    return _ESCAPE.sub(_unescaped, path) if "%" in path else path


def _uri(parts: SplitResult) -> tuple[object, ...]:
    return (parts.scheme, parts.hostname, _port(parts), _path(parts), _query(parts))


#: Keys read from the URL: all of a request's come from one `urlsplit`.
URL_KEYS: dict[str, Callable[[SplitResult], object]] = {
    "scheme": lambda parts: parts.scheme,
    "host": lambda parts: parts.hostname,
    "port": _port,
    "path": _path,
    "query": _query,
    "uri": _uri,
}


#: The first byte of a body worth parsing as JSON: an object or an array (after spaces).
_JSON_STARTS = frozenset(b"{[")
#: The same, as the one-byte slices `body[:1]` gives.
JSON_OPENINGS = frozenset((b"{", b"["))


def is_json(request: Request) -> bool:
    """A body to compare as JSON: an object or an array, whatever the Content-Type says
    (`curl -d '{...}'` sends JSON as a form). Anything else is compared as bytes, without
    parsing: a large binary upload costs nothing here."""
    body = request.body
    if not body:
        return False
    first = body[0]
    if first in _JSON_STARTS:
        return True
    stripped = body.lstrip()
    return bool(stripped) and stripped[0] in _JSON_STARTS


#: The scanner `json.loads` ends in (a default decoder's), called directly: `loads` spends
#: more than the scan itself on looking for leading and trailing spaces. (`scan_once` is set
#: by `JSONDecoder.__init__`; typeshed does not declare it.)
_DECODER = json.JSONDecoder()
_scan: Callable[[str, int], tuple[object, int]] = _DECODER.scan_once  # type: ignore[attr-defined]


def _parse(body: bytes) -> object:
    """The JSON value of `body`, as `json.loads` decodes it (ValueError when it is not), at
    any depth."""
    try:
        return _parse_shallow(body)
    except RecursionError:  # nested deeper than the standard library reads
        return deep_json.loads(body)


def _parse_shallow(body: bytes) -> object:
    if body and body[0] in _JSON_STARTS and (len(body) == 1 or body[1]):
        # What `json.loads` would decode it as (`json.detect_encoding` says UTF-8 when
        # neither a BOM nor a NUL byte starts it), without that Python-level detection.
        text = body.decode("utf-8", "surrogatepass")
        try:
            parsed, end = _scan(text, 0)  # no space before: it starts with { or [
        except StopIteration:  # not JSON: `json.loads` says why, as ValueError
            end = -1
        if end != len(text):  # spaces after it, or not JSON
            parsed = json.loads(text)
        return parsed
    return json.loads(body)


#: What makes a body that starts as JSON compare as bytes: not JSON (`ValueError`, and
#: `UnicodeDecodeError` as from `json.loads(body)`). `_parse` and `_canonical` read and
#: write any depth (`replay.redact.deep_json`), so a client's 100,000 brackets key as JSON, the
#: same from every stack; a `RecursionError` is still caught, as a last guard (a client's
#: body must get an answer, not a traceback).
_UNPARSED = (ValueError, RecursionError)


def _json_body(body: bytes) -> tuple[str, object]:
    """The body's key as its canonical JSON text (as a mismatch message shows it)."""
    try:
        return ("json", _canonical(_without_ids(_parse(body))))
    except _UNPARSED:
        return ("raw", body)


def _without_ids(parsed: object) -> object:
    """`parsed` as the `body` matcher compares it: a JSON-RPC 2.0 request without its `id`
    and progress token (`replay.matching.jsonrpc`), anything else as it is."""
    first = parsed[0] if type(parsed) is list and parsed else parsed  # a batch: its first
    return normalised(parsed) if type(first) is dict and "jsonrpc" in first else parsed


#: The types of an object's values that make the set of its items a key as exact as its
#: canonical text: equal items then mean equal JSON (a number would not: 1 == 1.0 == true).
_FLAT_TYPES = frozenset((str, bool, type(None)))


def json_key(body: bytes) -> tuple[str, object]:
    """The body's key for the index: `_json_body`'s, or, for an object of strings, booleans
    and nulls (the usual API call), the set of its items, a third of the cost to make. Two
    JSON-equal bodies are of the same kind, so their keys are equal either way."""
    try:
        parsed = _without_ids(_parse(body))
        if type(parsed) is dict and _FLAT_TYPES.issuperset(map(type, parsed.values())):
            return ("json", frozenset(parsed.items()))
        return ("json", _canonical(parsed))
    except _UNPARSED:
        return ("raw", body)


def _body(request: Request) -> tuple[str, object]:
    return _json_body(request.body) if is_json(request) else ("raw", request.body)


#: Headers whose value changes with every signed request (AWS SigV4 and botocore's own):
#: the `headers` matcher compares only whether each is there.
SIGNED_HEADERS = frozenset(
    {
        "authorization",
        "x-amz-date",
        "x-amz-security-token",
        "amz-sdk-invocation-id",
        "amz-sdk-request",
    }
)


def _headers(request: Request) -> tuple[tuple[str, str], ...]:
    """The `headers` key: every header, lowercased and sorted, those of `SIGNED_HEADERS`
    without their values (a request signed again still matches its recording)."""
    pairs = ((name.lower(), value) for name, value in request.headers)
    return tuple(sorted((n, "" if n in SIGNED_HEADERS else v) for n, v in pairs))


#: Keys read from the rest of the request.
REQUEST_KEYS: dict[str, Callable[[Request], object]] = {
    "method": lambda request: request.method.upper(),
    "body": _body,
    "raw_body": lambda request: request.body,
    "headers": lambda request: _headers(request),
    "last_event_id": last_event_id,
}

NAMES = sorted(URL_KEYS.keys() | REQUEST_KEYS.keys())


def named_keys(names: Sequence[str], request: Request) -> list[object]:
    """The key of each named matcher for `request`, in the order of `names`."""
    if URL_KEYS.keys().isdisjoint(names):
        return [REQUEST_KEYS[name](request) for name in names]
    parts = urlsplit(request.url)
    return [
        URL_KEYS[name](parts) if name in URL_KEYS else REQUEST_KEYS[name](request) for name in names
    ]
