"""Matching through vcrpy's own code: vcrpy-style callables, and why a request matched none.

`replay.matching` keys the named matchers itself. A callable, which cannot be keyed, is
called on vcrpy's requests; a miss is explained by vcrpy's matchers, so that the messages
read as vcrpy users know them. Only those two need this module (and vcrpy).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from replay.errors import ALREADY_PLAYED
from replay.matching.keys import Matcher, named_keys
from replay.matching.resume import difference
from replay.redact.redactor import Redactor

if TYPE_CHECKING:
    from replay.model import Request

__all__ = ["explain", "to_vcr", "vcr_matcher"]

#: What a "no match" explanation shows of both requests: their redacted form.
_SHOWN = Redactor()
#: The "matcher" named when a request resumes a stream from another point than recorded.
RESUME_POINT = "resume point"
#: The "matcher" named when two requests differ only where redaction hides a value.
_HIDDEN_VALUE = "a hidden value"
_RECORD_AGAIN = (
    "the requests differ only where a secret is redacted, which the cassette holds "
    "unredacted (recorded by an older replay?): record it again"
)


def to_vcr(request: Request) -> Any:
    """`request` as a vcrpy request, which vcrpy's matchers and vcrpy-style callables take."""
    from vcr.request import Request as VcrRequest

    return VcrRequest(request.method, request.url, request.body, dict(request.headers))


def vcr_matcher(matcher: Matcher) -> Callable[[Any, Any], Any]:
    """vcrpy's matcher of that name, or the callable, named as vcrpy names its failures."""
    if callable(matcher):
        if hasattr(matcher, "__name__"):
            return matcher

        # vcrpy names each failure by `__name__`, which partials and callable objects lack.
        def named(new: Any, recorded: Any) -> Any:
            return matcher(new, recorded)

        named.__name__ = repr(matcher)
        return named
    if matcher == "last_event_id":  # replay's own
        from replay.matching.resume import vcr_last_event_id

        return vcr_last_event_id
    import vcr.matchers

    function: Callable[[Any, Any], Any] = getattr(vcr.matchers, matcher)
    return function


def explain(
    request: Request,
    requests: Sequence[Request],
    play_counts: Sequence[int],
    *,
    names: Sequence[str],
    match_on: Sequence[Matcher],
    repeats: bool,
) -> tuple[str | None, list[tuple[str, str]]]:
    """The recorded request nearest `request` and (matcher, difference) pairs (see
    `MatchIndex.explain`): the most of the named matchers `names` passing, unplayed
    interactions first (all, with `repeats`), then the earliest."""
    if not requests:
        return None, []
    keys = named_keys(names, request)

    def score(index: int) -> tuple[int, int, int]:
        recorded = named_keys(names, requests[index])
        passing = sum(k == r for k, r in zip(keys, recorded, strict=True))
        return (passing, int(play_counts[index] == 0 or repeats), -index)

    nearest = max(range(len(requests)), key=score)
    differs = keys != named_keys(names, requests[nearest])
    # Both sides as redaction shows them, so that the message never echoes a secret,
    # not even one that a cassette recorded before it was redacted holds.
    request, recorded = _SHOWN.request(request), _SHOWN.request(requests[nearest])
    from vcr.matchers import get_matchers_results

    matchers = [vcr_matcher(m) for m in match_on]
    try:
        _, failures = get_matchers_results(to_vcr(request), to_vcr(recorded), matchers)
    except RecursionError:  # its body matcher's `json.loads` of a body nested too deep
        failures = []  # told by the keys below, which read a body at any depth
    differences = [(name, message or "differs") for name, message in failures]
    resumed = difference(request, recorded)
    if resumed is not None:  # said in words, first; vcrpy's header comparison left out
        others = [d for d in differences if d[0] != "last_event_id"]
        differences = [(RESUME_POINT, resumed), *others]
    if not differences:  # vcrpy's matcher is looser than our key (e.g. blank query values)
        shown_keys = named_keys(names, request)
        recorded_keys = named_keys(names, recorded)
        differences = [
            (name, f"{_short(key)} != {_short(theirs)}")
            for name, key, theirs in zip(names, shown_keys, recorded_keys, strict=True)
            if key != theirs
        ]
    if not differences and differs:  # in a value the cassette holds and redaction hides
        differences = [(_HIDDEN_VALUE, _RECORD_AGAIN)]
    if not differences and play_counts[nearest] > 0:
        differences = [(ALREADY_PLAYED, "it answered an earlier request")]
    return f"{recorded.method} {recorded.url}", differences


def _short(value: object, limit: int = 80) -> str:
    """A matcher's key as a person reads it: a body as its text, not its Python repr."""
    if isinstance(value, tuple) and len(value) == 2 and value[0] in ("raw", "json"):
        value = value[1]
    if isinstance(value, bytes):
        text = value.decode("utf-8", "backslashreplace")
    else:
        text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[:limit] + "…"
