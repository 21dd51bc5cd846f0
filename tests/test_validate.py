"""Specification of `replay.store.validate.quick`: the loader's fast path.

`quick` checks a built interaction inline and makes the model objects without running their
validators again. It must accept exactly what the model's constructors accept, and make the
same values: whatever it refuses, `interaction_of` (the constructors) says why.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from replay.model import MAX_SECONDS, STOPPERS, Chunks, Interaction, Request, Response, StreamEnd
from replay.store.validate import Floats, quick


def document(**changes: Any) -> dict[str, Any]:
    """An interaction as `unpackb` builds it from a good file, with `changes` (dotted keys)."""
    value: dict[str, Any] = {
        "request": {
            "method": "POST",
            "url": "https://api.example.com/v1/responses",
            "headers": [["Host", "api.example.com"], ["Content-Type", "application/json"]],
            "body": b'{"stream":true}',
        },
        "response": {
            "status": 200,
            "headers": [["content-type", "text/event-stream"]],
            "headers_at": 0.1,
            "chunks": {"at": [0.2, 0.3], "data": [b"data: a\n\n", b"data: b\n\n"]},
            "end": {"at": 0.4, "error": None, "message": "", "truncated": False},
        },
    }
    for dotted, new in changes.items():
        *path, last = dotted.split(".")
        place = value
        for key in path:
            place = place[key]
        if new is _DELETE:
            place.pop(last, None)
        else:
            place[last] = new
    return value


_DELETE = object()
WEEK = MAX_SECONDS


def case(changes: dict[str, Any]) -> str:
    """A test id for `changes` that is the same in every process (for pytest-xdist)."""

    def shown(value: Any) -> str:
        if value is _DELETE:
            return "deleted"
        return f"Floats{value.values!r}" if isinstance(value, Floats) else repr(value)

    return ", ".join(f"{key}={shown(value)}" for key, value in changes.items()) or "as-is"


def constructed(value: dict[str, Any]) -> Interaction:
    """What the model's constructors make of `value` (raising where they refuse it)."""
    request, response = value["request"], value["response"]
    chunks, end = response["chunks"], response["end"]
    times = chunks["at"].values if isinstance(chunks["at"], Floats) else chunks["at"]
    truncated = end["truncated"]
    stopped_by = end.get("stopped_by", "client" if truncated else None)
    if stopped_by not in STOPPERS or (stopped_by is None) == truncated:  # the loader's own rule
        raise ValueError("stopped_by does not fit truncated")
    return Interaction(
        Request(
            method=request["method"],
            url=request["url"],
            headers=request["headers"],
            body=request["body"],
        ),
        Response(
            status=response["status"],
            headers=response["headers"],
            headers_at=response["headers_at"],
            chunks=Chunks(times, chunks["data"]),
            end=StreamEnd(
                at=end["at"],
                error=end["error"],
                message=end["message"],
                truncated=truncated,
                stopped_by=stopped_by,
            ),
        ),
    )


def check_same(value: dict[str, Any]) -> Interaction | None:
    """Assert that `quick` makes what the constructors make, or refuses what they refuse."""
    fast = quick(value)
    try:
        slow = constructed(value)
    except (TypeError, ValueError):
        assert fast is None
        return None
    assert fast == slow
    assert fast.request.headers == slow.request.headers
    assert all(type(pair) is tuple for pair in fast.request.headers + fast.response.headers)
    assert type(fast.request.headers) is tuple
    assert type(fast.response.headers) is tuple
    assert fast.response.end.stopped_by == slow.response.end.stopped_by
    return fast


def test_a_good_interaction_is_made_as_its_constructors_make_it() -> None:
    made = check_same(document())
    assert made is not None
    assert made.request.headers == (
        ("Host", "api.example.com"),
        ("Content-Type", "application/json"),
    )
    assert made.response.chunks.times == (0.2, 0.3)


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"response.chunks": {"at": [], "data": []}, "response.end.at": 0.1},
        {"response.chunks.at": [1, 2], "response.end.at": 2},
        {"response.chunks.at": Floats((0.2, 0.3))},
        {"response.chunks.at": (0.2, 0.3), "response.chunks.data": (b"a", b"b")},
        {"request.headers": (("Host", "h"), ("X", "y"))},
        {"request.headers": []},
        {"response.headers": [["x-latin", "caf\xe9"]]},
        {"response.end.truncated": True},
        {"response.end.truncated": True, "response.end.stopped_by": "session"},
        {"response.end.error": "RemoteProtocolError", "response.end.message": "cut"},
        {"response.headers_at": 0, "response.end.at": 3},
        {"response.status": 100},
        {"response.status": 599},
        {"response.chunks.at": [0.1, 0.1], "response.end.at": 0.1},
        {"response.chunks.at": [0.2, WEEK], "response.end.at": WEEK},  # the bound itself
        {"response.chunks.at": Floats((0.2, WEEK)), "response.end.at": WEEK},
    ],
    ids=case,
)
def test_good_variants_are_made_alike(changes: dict[str, Any]) -> None:
    assert check_same(document(**changes)) is not None


@pytest.mark.parametrize(
    "changes",
    [
        {"response.status": 99},
        {"response.status": 600},
        {"response.status": True},
        {"response.headers_at": -0.1},
        {"response.headers_at": math.nan},
        {"response.headers_at": math.inf},
        {"response.end.at": math.nan},
        {"response.end.at": -1},
        {"response.end.at": 0.25},  # before the last chunk
        {"response.headers_at": 0.25},  # the first chunk before the headers
        {"response.chunks": {"at": [], "data": []}, "response.end.at": 0.05},
        {"response.chunks.at": [0.3, 0.2]},
        {"response.chunks.at": [0.2, math.nan]},
        {"response.chunks.at": [0.2, math.inf]},
        {  # past the bound: each time, on a timeline in order
            "response.headers_at": 1e300,
            "response.chunks": {"at": [], "data": []},
            "response.end.at": 1e300,
        },
        {"response.end.at": WEEK + 0.001},
        {"response.end.at": 2**64 - 1},
        {"response.chunks.at": [0.2, 1e300], "response.end.at": 1e300},
        {"response.chunks.at": Floats((0.2, 1e300)), "response.end.at": 1e300},
        {"response.chunks.at": [True, 0.3]},
        {"response.chunks.at": [0.2]},
        {"response.chunks.data": [b"a", "b"]},
        {"request.headers": [["Host", "\u20ac"]]},
        {"request.headers": [["\u20ac", "x"]]},
        {"request.headers": [["Host", "h", "x"]]},
        {"request.headers": [["Host"]]},
        {"request.headers": ["ab"]},
        {"request.headers": [[b"Host", "h"]]},
        {"response.headers": [["a", 1]]},
        {"response.end.stopped_by": "client"},  # not truncated
        {"response.end.truncated": True, "response.end.stopped_by": None},
        {"response.end.stopped_by": "server"},
    ],
    ids=case,
)
def test_what_a_constructor_refuses_is_left_to_the_slow_path(changes: dict[str, Any]) -> None:
    assert check_same(document(**changes)) is None
    assert quick(document(**changes)) is None


@pytest.mark.parametrize(
    "changes",
    [
        {"request.method": b"POST"},
        {"request.url": None},
        {"request.body": "text"},
        {"request.headers": _DELETE},
        {"response.headers_at": "0"},
        {"response.end.error": _DELETE},
        {"response.end.message": None},
        {"response.end.truncated": 0},
        {"response.chunks.data": {"a": 1}},
        {"response.chunks.at": None},
        {"response": []},
    ],
    ids=case,
)
def test_a_field_of_another_type_is_left_to_the_slow_path(changes: dict[str, Any]) -> None:
    assert quick(document(**changes)) is None


_odd = st.sampled_from([math.nan, math.inf, -math.inf, -0.5, True, "1"])
_text = st.text(alphabet=st.sampled_from("aZ-\xe9"), max_size=3)
_odd_text = st.sampled_from(["\u20ac", b"a", 1, None])
_good_headers = st.lists(st.tuples(_text, _text).map(list), max_size=3)
_odd_headers = st.lists(
    st.one_of(
        st.tuples(_text, _odd_text).map(list),
        st.tuples(_odd_text, _text).map(list),
        st.lists(_text, max_size=3),
        _text,
    ),
    min_size=1,
    max_size=2,
)


@st.composite
def interactions(draw: st.DrawFn) -> dict[str, Any]:
    """An interaction, good (as most are) or with one field or two made odd."""
    times = sorted(draw(st.lists(st.floats(min_value=0, max_value=2), max_size=4)))
    headers_at = draw(st.floats(min_value=0, max_value=times[0] if times else 2))
    truncated = draw(st.booleans())
    changes: dict[str, Any] = {
        "request.headers": draw(_good_headers),
        "response.headers": draw(_good_headers),
        "response.status": draw(st.integers(min_value=100, max_value=599)),
        "response.headers_at": headers_at,
        "response.chunks": {
            "at": times if draw(st.booleans()) else Floats(tuple(times)),
            "data": [draw(st.binary(max_size=2)) for _ in times],
        },
        "response.end.at": draw(
            st.floats(min_value=times[-1] if times else headers_at, max_value=3)
        ),
        "response.end.truncated": truncated,
        "response.end.stopped_by": draw(
            st.sampled_from(["client", "session", _DELETE] if truncated else [None, _DELETE])
        ),
    }
    odd = {
        "request.headers": _odd_headers,
        "response.headers": _odd_headers,
        "response.status": st.sampled_from([99, 600, True, 200.0]),
        "response.headers_at": _odd,
        "response.end.at": st.one_of(_odd, st.floats(min_value=0, max_value=3)),
        "response.end.stopped_by": st.sampled_from([None, "client", "session", "server"]),
        "response.chunks": st.builds(
            lambda at, data: {"at": at, "data": data},
            st.lists(st.one_of(st.floats(min_value=0, max_value=2), st.integers(0, 2), _odd)),
            st.lists(st.one_of(st.binary(max_size=1), _odd_text), max_size=4),
        ),
    }
    for name in draw(st.lists(st.sampled_from(sorted(odd)), max_size=2, unique=True)):
        changes[name] = draw(odd[name])
    return document(**changes)


@given(interactions())
def test_quick_accepts_exactly_what_the_constructors_accept(value: dict[str, Any]) -> None:
    check_same(value)
