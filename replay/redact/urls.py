"""The URL half of `Redactor`: URLs, the URLs in header values, and `name=value` fields.

What is hidden (`replay.redact.shapes` says what is secret): the user information
(`https://TOKEN@host`, `https://user:password@host`); a path segment holding a well-known
key, and a path parameter named like a credential (`/p;jsessionid=…`); query and fragment
parameters (parted by `&` or `;`) whose name is credential-like or one of `URL_NAMES`
(`code`, `sessionid`…), or whose value holds a key, and a part without `=` that holds a key.
A form body is read as a query. A header value that holds a URL (`Referer`, `Location`,
`X-Original-URL`, `Link`…) has each URL-like run in it redacted as a URL.

Only those change: the other parameters keep their order and their exact encoding, so the
stored URL is the one that was sent, minus the secrets. URLs found clean are remembered (per
set of names: `Redactor` shares them), since the same few come back with every request.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote, unquote_plus, urlsplit, urlunsplit

from replay.redact.shapes import PLACEHOLDER, holds_key, is_secret_url_name

__all__ = ["URL_MARKS", "UrlRedaction", "remember"]

#: What a URL in a header value holds (a query, a fragment, parameters, user information).
URL_MARKS = re.compile(r"[?#;@]")
#: A URL (or a path) in a header value: a run without spaces, quotes or angle brackets
#: around one of `URL_MARKS` (`Link: <…?token=…>; rel="next"`, `Refresh: 0; url=…`).
_URL_LIKE = re.compile(r"""[^\s<>"',]*[?#;@][^\s<>"']*""")
#: Where fields part in a query with `;` in it (`a=1;token=…`, as older servers read it).
_FIELD_SEPARATORS = re.compile(r"([&;])")

#: How many verdicts a cache keeps before it starts again.
_CACHE_LIMIT = 4096


def remember(cache: set[str] | dict[Any, Any], value: Any, verdict: object = True) -> None:
    """Keep `value` (with its `verdict`, in a dict) in `cache`, which is emptied when full."""
    if len(cache) >= _CACHE_LIMIT:
        cache.clear()
    if isinstance(cache, dict):
        cache[value] = verdict
    else:
        cache.add(value)


class UrlRedaction:
    """What `Redactor` does to URLs and fields; it provides the names and the cache."""

    __slots__ = ()
    #: Parameter names always redacted, lower case (the defaults and the user's).
    _field_names: frozenset[str]
    #: URLs (and header values holding URLs) found clean for these names.
    _clean_urls: set[str]

    def urls_in(self, text: str) -> str:
        """`text` (a header value) with each URL-like run in it redacted as a URL; `text`
        itself when nothing was."""
        if text in self._clean_urls:
            return text
        hidden = _URL_LIKE.sub(lambda match: self.url(match[0]), text)
        if hidden == text:
            remember(self._clean_urls, text)
            return text
        return hidden

    def url(self, url: str) -> str:
        """`url` with its user information, secret query and fragment values, key-shaped
        path segments and secret path parameters (`;jsessionid=…`) replaced.

        Only those change: the other parameters keep their order and their exact encoding,
        so the stored URL is the one that was sent, minus the secrets; `url` itself is
        returned when there is nothing to hide.
        """
        if url in self._clean_urls:
            return url
        parts = urlsplit(url)
        netloc = _without_userinfo(parts.netloc)
        path = self._path(parts.path)
        query = self._fields(parts.query, unquote_plus)
        # `#access_token=…`: OAuth's implicit flow hands the token over in the fragment.
        fragment = self._fields(parts.fragment, unquote_plus)
        if (netloc, path, query, fragment) == parts[1:]:
            remember(self._clean_urls, url)
            return url
        changed = parts._replace(netloc=netloc, path=path, query=query, fragment=fragment)
        return urlunsplit(changed)

    def _path(self, path: str) -> str:
        """`path` with key-shaped segments and secret parameters (`/p;jsessionid=…`)
        replaced; `path` itself when none was."""
        path = _without_keys(path)
        if ";" not in path:
            return path
        segments = path.split("/")
        cleaned = [self._segment(segment) for segment in segments]
        return path if cleaned == segments else "/".join(cleaned)

    def _segment(self, segment: str) -> str:
        name, semicolon, parameters = segment.partition(";")
        hidden = self._fields(parameters, unquote)
        return segment if hidden is parameters else f"{name}{semicolon}{hidden}"

    def _fields(self, text: str, decode: Callable[[str], str]) -> str:
        """`name=value&…` text (`;` separates fields too) with secret values replaced;
        `text` itself when none was."""
        if not text:
            return text
        # The separators stay where they were, at the odd places.
        fields = _FIELD_SEPARATORS.split(text) if ";" in text else text.split("&")
        step = 2 if ";" in text else 1
        cleaned = list(fields)
        for index in range(0, len(fields), step):
            cleaned[index] = self._field(fields[index], decode)
        if cleaned == fields:
            return text
        return "".join(cleaned) if step == 2 else "&".join(cleaned)

    def _field(self, field: str, decode: Callable[[str], str]) -> str:
        name, equals, value = field.partition("=")
        if not equals:  # a key alone (`?sk-…`) goes whole; a bare name (`?stream`) stays
            return PLACEHOLDER if holds_key(decode(field)) else field
        if value == PLACEHOLDER:
            return field
        if self._secret_parameter(decode(name), decode(value)) or holds_key(decode(value)):
            return f"{name}={PLACEHOLDER}"
        return field

    def _secret_parameter(self, name: str, value: str) -> bool:
        """Whether URL, fragment or form parameter `name` holding `value` is a credential
        (`URL_NAMES`)."""
        return name.lower() in self._field_names or is_secret_url_name(name, value)


def _without_userinfo(netloc: str) -> str:
    """`netloc` with its user (a token, often) and password replaced."""
    userinfo, at, host = netloc.rpartition("@")
    if not at or not userinfo:
        return netloc
    hidden = f"{PLACEHOLDER}:{PLACEHOLDER}" if ":" in userinfo else PLACEHOLDER
    return netloc if userinfo == hidden else f"{hidden}@{host}"


def _without_keys(path: str) -> str:
    """`path` with each segment that holds a well-known key replaced."""
    if not holds_key(unquote(path)):
        return path
    return "/".join(
        PLACEHOLDER if holds_key(unquote(segment)) else segment for segment in path.split("/")
    )
