"""Which recorded interaction answers a request.

Matchers are vcrpy's, by name (`method`, `scheme`, `host`, `port`, `path`, `query`, `body`,
`raw_body`, `headers`, `uri`) or as vcrpy-style callables `(new, recorded)` that return a bool
or raise AssertionError. For speed, each named matcher is turned into a key: interactions
are bucketed by the tuple of keys, so a lookup is one dict access, not a scan of the cassette
(a vcrpy cassette compares every request with every recorded one). Callables, which cannot be
keyed, are checked only against the candidates of the bucket, and vcrpy's own matchers
explain a miss, so the messages read as vcrpy users know them (`replay.matching.vcr`).

The keys are `replay.matching.keys`'. A key costs little: a request whose URL or JSON body
repeats a recorded one byte for byte (the usual case in a replay) takes the keys computed
when that one was indexed, instead of parsing and canonicalising again.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from replay.errors import ConfigurationError
from replay.matching.keys import (
    JSON_OPENINGS,
    NAMES,
    REQUEST_KEYS,
    URL_KEYS,
    Matcher,
    is_json,
    json_key,
)
from replay.matching.resume import LAST_EVENT_ID, last_event_id

if TYPE_CHECKING:
    from replay.model import Request

__all__ = [
    "DEFAULT_MATCH_ON",
    "MatchIndex",
    "MatchOn",
    "Matcher",
    "answers_alike",
    "keyed_by_request",
    "same_but_resume",
]

MatchOn = Sequence[Matcher]

#: Body included: LLM calls differ only by body, and vcrpy's default (without it) replays
#: the wrong answer. `last_event_id`: a request that resumes an SSE stream is answered by the
#: resume recorded from the same event (`replay.matching.resume`).
DEFAULT_MATCH_ON: tuple[str, ...] = (
    "method",
    "scheme",
    "host",
    "port",
    "path",
    "query",
    "body",
    "last_event_id",
)


class _Bucket:
    """The interactions of one key, by increasing index, and where the unplayed ones begin."""

    __slots__ = ("cursor", "indices")

    def __init__(self, first: int) -> None:
        self.indices = [first]
        # Interactions play in order, so skipping the played ones is amortised O(1) even
        # for many identical requests.
        self.cursor = 0


class _Plan:
    """What a `match_on` asks for, checked: the keys a bucket's key is made of.

    A bucket's key: the method, the other request keys, then the body's, then the URL keys
    as one tuple (an order of our own: only equality of whole keys matters).
    """

    __slots__ = (
        "by_body",
        "by_last_event_id",
        "by_method",
        "callables",
        "keyed_by_request",
        "names",
        "request_keys",
        "url_keys",
    )

    def __init__(self, match_on: tuple[Matcher, ...]) -> None:
        unknown = [m for m in match_on if not callable(m) and m not in NAMES]
        if unknown:
            raise ConfigurationError(
                f"unknown matcher {unknown[0]!r}: use one of {', '.join(NAMES)} "
                "or a callable (new_request, recorded_request)"
            )
        self.names = [m for m in match_on if isinstance(m, str)]
        self.callables: list[Callable[[Any, Any], Any]] = []
        if any(map(callable, match_on)):
            from replay.matching.vcr import vcr_matcher

            self.callables = [vcr_matcher(m) for m in match_on if callable(m)]
        self.by_method = "method" in self.names
        self.request_keys = [
            REQUEST_KEYS[n] for n in self.names if n in REQUEST_KEYS and n not in ("body", "method")
        ]
        self.by_last_event_id = "last_event_id" in self.names
        self.by_body = "body" in self.names
        self.url_keys = [URL_KEYS[n] for n in self.names if n in URL_KEYS]
        #: Whether the key is made of the method, URL and body alone (`keyed_by_request`),
        #: and the Last-Event-ID header, which `answers_alike` compares too.
        self.keyed_by_request = not self.callables and "headers" not in self.names


@functools.lru_cache(maxsize=64)
def _plan(match_on: tuple[Matcher, ...]) -> _Plan:
    """The plan of `match_on`, made once: every cassette of a suite asks the same."""
    return _Plan(match_on)


def _plan_of(match_on: tuple[Matcher, ...]) -> _Plan:
    """`_plan(match_on)`, or a plan made afresh for an unhashable callable."""
    try:
        return _plan(match_on)
    except TypeError:
        return _Plan(match_on)


def keyed_by_request(match_on: MatchOn) -> bool:
    """Whether, under `match_on`, two requests of the same method, URL and body bytes (and
    `Last-Event-ID` header, see `answers_alike`) always match (no other headers, no
    callables)."""
    return _plan_of(tuple(match_on)).keyed_by_request


def answers_alike(match_on: MatchOn, recorded: Request, request: Request) -> bool:
    """Whether `request` matches `recorded` under `match_on` because it repeats it: the same
    method, URL and body bytes, the same `Last-Event-ID`, and nothing else is compared."""
    plan = _plan_of(tuple(match_on))
    return (
        plan.keyed_by_request
        and recorded.body == request.body
        and recorded.url == request.url
        and recorded.method == request.method
        and (not plan.by_last_event_id or last_event_id(recorded) == last_event_id(request))
    )


def same_but_resume(match_on: MatchOn, wanted: Request, recorded: Request) -> bool:
    """Whether `wanted` asks what `recorded` asked under the named matchers of `match_on`
    (its callables are not asked), but for where they resume a stream (their
    `Last-Event-ID`): a resume of the stream `recorded` opened."""
    import attrs

    index = MatchIndex((), match_on=match_on)

    def bare(request: Request) -> Request:
        headers = tuple(p for p in request.headers if p[0].lower() != LAST_EVENT_ID)
        return attrs.evolve(request, headers=headers)

    return index.key(bare(wanted)) == index.key(bare(recorded))


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
        self._match_on = tuple(match_on)
        plan = _plan_of(self._match_on)
        self._names = plan.names
        self._callables = plan.callables
        self._repeats = allow_playback_repeats
        self._by_method = plan.by_method
        self._request_keys = plan.request_keys
        self._by_body = plan.by_body
        self._url_keys = plan.url_keys
        # The keys of the recorded URLs and JSON bodies. A request to replay usually repeats
        # its recording byte for byte: it then finds its keys here instead of parsing its
        # URL and JSON body again. Filled by `add` only, so it holds nothing the cassette
        # does not hold already.
        self._known_urls: dict[str, tuple[object, ...]] = {}
        self._known_json: dict[bytes, tuple[str, object]] = {}
        # The bucket of each recorded (method, URL, body), when the key is made of nothing
        # else: a request that repeats one byte for byte (the usual case) finds its bucket
        # with one lookup, without a key.
        self._by_request: dict[tuple[str, str, bytes], _Bucket] | None = (
            None if "headers" in self._names else {}
        )
        # A request that resumes a stream is keyed by its Last-Event-ID too: never looked up
        # by (method, URL, body) alone.
        self._by_last_event_id = plan.by_last_event_id
        self._requests = list(requests)
        self._buckets: dict[tuple[object, ...], _Bucket] = {}
        self._place(self._requests, 0)

    def key(self, request: Request) -> tuple[object, ...]:
        """The named-matcher keys of `request` as one tuple.

        Two requests have equal keys exactly when every named matcher finds them equal.
        """
        return self._key(request, learn=False)

    def add(self, index: int, request: Request) -> None:
        """Index the request of interaction `index` (indices must grow)."""
        self._requests.append(request)
        self._place([request], index)

    def _place(self, requests: Iterable[Request], first: int) -> None:
        """Bucket `requests`, numbered from `first`, in one loop (it runs for each recorded
        request when a cassette is first asked)."""
        buckets, by_request, key_of = self._buckets, self._by_request, self._key
        for index, request in enumerate(requests, first):
            key = key_of(request, learn=True)
            bucket = buckets.get(key)
            if bucket is None:
                bucket = buckets[key] = _Bucket(index)
            else:
                bucket.indices.append(index)
            if by_request is not None and not (
                self._by_last_event_id and last_event_id(request) is not None
            ):
                by_request[request.method, request.url, request.body] = bucket

    def _key(self, request: Request, *, learn: bool) -> tuple[object, ...]:
        # Made for each recorded request, inline: the known keys are looked up here.
        key: list[object] = [request.method.upper()] if self._by_method else []
        if self._request_keys:
            key += [function(request) for function in self._request_keys]
        if self._by_body:
            body = request.body
            known = self._known_json.get(body)  # only JSON bodies are known
            if known is None:
                if body[:1] in JSON_OPENINGS:  # `is_json`, its usual case inline
                    known = json_key(body)
                    if learn:
                        self._known_json[body] = known
                else:
                    known = self._new_body_key(request, learn)
            key.append(known)
        if self._url_keys:
            url = request.url
            known_url = self._known_urls.get(url)
            key.append(self._url_key(url, learn) if known_url is None else known_url)
        return tuple(key)

    def _new_body_key(self, request: Request, learn: bool) -> tuple[str, object]:
        """The body's key, not in `_known_json`."""
        if not is_json(request):
            return ("raw", request.body)
        key = json_key(request.body)
        if learn:
            self._known_json[request.body] = key
        return key

    def _url_key(self, url: str, learn: bool) -> tuple[object, ...]:
        known = self._known_urls.get(url)
        if known is None:
            parts = urlsplit(url)
            known = tuple(function(parts) for function in self._url_keys)
            if learn:
                self._known_urls[url] = known
        return known

    def take(
        self, request: Request, play_counts: Sequence[int], *, among_first: int | None = None
    ) -> int | None:
        """The index of the interaction that answers `request`, or None.

        Args:
            request: the (redacted) request to answer.
            play_counts: how often each interaction has played, by index.
            among_first: consider only interactions with an index below this.
        """
        by_request = self._by_request
        if by_request is not None and self._by_last_event_id and last_event_id(request) is not None:
            by_request = None
        bucket = (
            None
            if by_request is None
            else by_request.get((request.method, request.url, request.body))
        )
        if bucket is None:
            bucket = self._buckets.get(self._key(request, learn=False))
            if bucket is None:
                return None
        indices = bucket.indices
        limit = len(play_counts) if among_first is None else among_first
        if not self._callables:
            cursor = bucket.cursor
            count = len(indices)
            while cursor < count and play_counts[indices[cursor]] > 0:
                cursor += 1
            bucket.cursor = cursor
            # The first unplayed one answers, if it may: the loop below, made short for the
            # usual case (once per replayed request).
            if cursor < count and indices[cursor] < limit:
                return indices[cursor]
        for index in itertools.islice(indices, bucket.cursor, None):
            if index >= limit:  # indices increase
                break
            if play_counts[index] == 0 and self._callables_match(request, index):
                return index
        if self._repeats:
            return next(
                (i for i in indices if i < limit and self._callables_match(request, i)), None
            )
        return None

    def _callables_match(self, request: Request, index: int) -> bool:
        if not self._callables:
            return True
        from vcr.matchers import requests_match

        from replay.matching.vcr import to_vcr

        return bool(requests_match(to_vcr(request), to_vcr(self._requests[index]), self._callables))

    def explain(
        self, request: Request, play_counts: Sequence[int]
    ) -> tuple[str | None, list[tuple[str, str]]]:
        """The nearest recorded request and (matcher, difference) pairs, for an error message.

        Nearest: the most matchers passing, unplayed interactions first, then earliest.
        """
        from replay.matching.vcr import explain

        return explain(
            request,
            self._requests,
            play_counts,
            names=self._names,
            match_on=self._match_on,
            repeats=self._repeats,
        )
