"""Which recorded interaction answers a request.

Matchers are vcrpy's, by name (`method`, `scheme`, `host`, `port`, `path`, `query`, `body`,
`raw_body`, `headers`, `uri`) or as vcrpy-style callables `(new, recorded)` that return a bool
or raise AssertionError. For speed, each named matcher is turned into a key: interactions
are bucketed by the tuple of keys, so a lookup is one dict access, not a scan of the cassette
(a vcrpy cassette compares every request with every recorded one). Callables, which cannot be
keyed, are checked only against the candidates of the bucket. vcrpy's own matchers explain a
miss, so the messages read as vcrpy users know them.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlsplit

from replay.errors import ALREADY_PLAYED, ConfigurationError

if TYPE_CHECKING:
    from replay.model import Request

__all__ = ["DEFAULT_MATCH_ON", "MatchIndex", "MatchOn", "Matcher"]

Matcher = str | Callable[[Any, Any], Any]
MatchOn = Sequence[Matcher]

#: Body included: LLM calls differ only by body, and vcrpy's default (without it) replays
#: the wrong answer.
DEFAULT_MATCH_ON: tuple[str, ...] = ("method", "scheme", "host", "port", "path", "query", "body")

_DEFAULT_PORTS = {"http": 80, "https": 443}


def _port(request: Request) -> int | None:
    parts = urlsplit(request.url)
    return parts.port or _DEFAULT_PORTS.get(parts.scheme)


def _query(request: Request) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(parse_qsl(urlsplit(request.url).query, keep_blank_values=True)))


def _body(request: Request) -> tuple[str, object]:
    content_type = (request.header("content-type") or "").lower()
    if "json" in content_type and request.body:
        try:
            parsed = json.loads(request.body)
        except ValueError:
            pass
        else:
            return ("json", json.dumps(parsed, sort_keys=True, separators=(",", ":")))
    return ("raw", request.body)


def _uri(request: Request) -> tuple[object, ...]:
    parts = urlsplit(request.url)
    return (parts.scheme, parts.hostname, _port(request), parts.path or "/", _query(request))


_KEYS: dict[str, Callable[[Request], object]] = {
    "method": lambda request: request.method.upper(),
    "scheme": lambda request: urlsplit(request.url).scheme,
    "host": lambda request: urlsplit(request.url).hostname,
    "port": _port,
    "path": lambda request: urlsplit(request.url).path or "/",
    "query": _query,
    "body": _body,
    "raw_body": lambda request: request.body,
    "headers": lambda request: tuple(sorted((k.lower(), v) for k, v in request.headers)),
    "uri": _uri,
}


def _to_vcr(request: Request) -> Any:
    from vcr.request import Request as VcrRequest

    return VcrRequest(request.method, request.url, request.body, dict(request.headers))


def _vcr_matcher(matcher: Matcher) -> Callable[[Any, Any], Any]:
    if callable(matcher):
        if hasattr(matcher, "__name__"):
            return matcher

        # vcrpy names each failure by `__name__`, which partials and callable objects lack.
        def named(new: Any, recorded: Any) -> Any:
            return matcher(new, recorded)

        named.__name__ = repr(matcher)
        return named
    import vcr.matchers

    function: Callable[[Any, Any], Any] = getattr(vcr.matchers, matcher)
    return function


def _short(value: object, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "…"


class MatchIndex:
    """Recorded requests bucketed by their matcher keys; hands out interactions in order.

    Args:
        requests: the recorded requests, by interaction index.
        match_on: matcher names and vcrpy-style callables.
        allow_playback_repeats: once every candidate has played, play the first again.
    """

    def __init__(
        self,
        requests: Sequence[Request],
        *,
        match_on: MatchOn,
        allow_playback_repeats: bool = False,
    ) -> None:
        if isinstance(match_on, str):
            raise ConfigurationError(
                f"match_on must be a sequence of matchers, not the string {match_on!r}: "
                f"write ({match_on!r},)"
            )
        unknown = [m for m in match_on if not callable(m) and m not in _KEYS]
        if unknown:
            raise ConfigurationError(
                f"unknown matcher {unknown[0]!r}: use one of {', '.join(sorted(_KEYS))} "
                "or a callable (new_request, recorded_request)"
            )
        self._names = [m for m in match_on if isinstance(m, str)]
        self._callables = [_vcr_matcher(m) for m in match_on if callable(m)]
        self._match_on = tuple(match_on)
        self._repeats = allow_playback_repeats
        self._requests: list[Request] = []
        self._buckets: dict[tuple[object, ...], list[int]] = {}
        # Position of the first possibly unplayed index in each bucket: interactions play in
        # order, so skipping the played ones is amortised O(1) even for identical requests.
        self._cursors: dict[tuple[object, ...], int] = {}
        for index, request in enumerate(requests):
            self.add(index, request)

    def key(self, request: Request) -> tuple[object, ...]:
        """The tuple of named-matcher keys of `request`."""
        return tuple(_KEYS[name](request) for name in self._names)

    def add(self, index: int, request: Request) -> None:
        """Index the request of interaction `index` (indices must grow)."""
        self._requests.append(request)
        self._buckets.setdefault(self.key(request), []).append(index)

    def take(
        self, request: Request, play_counts: Sequence[int], *, among_first: int | None = None
    ) -> int | None:
        """The index of the interaction that answers `request`, or None.

        Args:
            request: the (redacted) request to answer.
            play_counts: how often each interaction has played, by index.
            among_first: consider only interactions with an index below this.
        """
        key = self.key(request)
        bucket = self._buckets.get(key)
        if not bucket:
            return None
        limit = len(play_counts) if among_first is None else among_first
        cursor = self._cursors.get(key, 0)
        while cursor < len(bucket) and play_counts[bucket[cursor]] > 0 and not self._callables:
            cursor += 1
        self._cursors[key] = cursor
        for index in itertools.islice(bucket, cursor, None):
            if index >= limit:  # buckets hold indices in increasing order
                break
            if play_counts[index] == 0 and self._callables_match(request, index):
                return index
        if self._repeats:
            return next(
                (i for i in bucket if i < limit and self._callables_match(request, i)), None
            )
        return None

    def _callables_match(self, request: Request, index: int) -> bool:
        if not self._callables:
            return True
        from vcr.matchers import requests_match

        return bool(
            requests_match(_to_vcr(request), _to_vcr(self._requests[index]), self._callables)
        )

    def explain(
        self, request: Request, play_counts: Sequence[int]
    ) -> tuple[str | None, list[tuple[str, str]]]:
        """The nearest recorded request and (matcher, difference) pairs, for an error message.

        Nearest: the most matchers passing, unplayed interactions first, then earliest.
        """
        if not self._requests:
            return None, []
        keys = [_KEYS[name](request) for name in self._names]

        def score(index: int) -> tuple[int, int, int]:
            recorded = self._requests[index]
            passing = sum(k == _KEYS[n](recorded) for n, k in zip(self._names, keys, strict=False))
            return (passing, int(play_counts[index] == 0 or self._repeats), -index)

        nearest = max(range(len(self._requests)), key=score)
        recorded = self._requests[nearest]
        from vcr.matchers import get_matchers_results

        matchers = [_vcr_matcher(m) for m in self._match_on]
        _, failures = get_matchers_results(_to_vcr(request), _to_vcr(recorded), matchers)
        differences = [(name, message or "differs") for name, message in failures]
        if not differences:  # vcrpy's matcher is looser than our key (e.g. blank query values)
            differences = [
                (name, f"{_short(key)} != {_short(_KEYS[name](recorded))}")
                for name, key in zip(self._names, keys, strict=True)
                if key != _KEYS[name](recorded)
            ]
        if not differences and play_counts[nearest] > 0:
            differences = [(ALREADY_PLAYED, "allow_playback_repeats=True lets it answer again")]
        return f"{recorded.method} {recorded.url}", differences
