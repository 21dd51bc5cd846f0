"""Which recorded interaction answers a request, and what a miss says.

Cassettes are built in memory and replayed through a real `httpx.Client` over
`replay.ReplayTransport` (or a session on a saved file when the message must name one).
"""

from __future__ import annotations

import functools
import json
import random
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest

import replay
from replay.matching import MatchIndex

URL = "http://api.test/v1/responses"
JSON = (("content-type", "application/json"),)


def interaction(
    body: bytes | str,
    answer: bytes,
    *,
    method: str = "POST",
    url: str = URL,
    headers: Sequence[tuple[str, str]] = JSON,
) -> replay.Interaction:
    """A recorded request and a one-chunk answer."""
    return replay.Interaction(
        replay.Request(
            method=method,
            url=url,
            headers=headers,
            body=body.encode() if isinstance(body, str) else body,
        ),
        replay.Response(status=200, chunks=[replay.Chunk(0.0, answer)]),
    )


def client(cassette: replay.Cassette) -> httpx.Client:
    return httpx.Client(transport=replay.ReplayTransport(cassette, speed="instant"))


def send(
    http: httpx.Client,
    body: bytes | str,
    *,
    method: str = "POST",
    url: str = URL,
    headers: Sequence[tuple[str, str]] = JSON,
) -> bytes:
    content = body.encode() if isinstance(body, str) else body
    return http.request(method, url, content=content, headers=list(headers)).content


# --- the default: body included, JSON compared as JSON ----------------------------------


def test_default_match_on_includes_the_body() -> None:
    assert replay.DEFAULT_MATCH_ON == (
        "method",
        "scheme",
        "host",
        "port",
        "path",
        "query",
        "body",
        "last_event_id",
    )


def test_requests_differing_only_by_body_get_their_own_answers() -> None:
    cassette = replay.Cassette(
        [interaction('{"input": "hi"}', b"hello"), interaction('{"input": "bye"}', b"goodbye")]
    )

    with client(cassette) as http:
        answers = [send(http, '{"input": "bye"}'), send(http, '{"input": "hi"}')]

    assert answers == [b"goodbye", b"hello"]


RECORDED_JSON = '{"model": "m", "input": [{"role": "user", "content": "hi"}], "n": 1}'


@pytest.mark.parametrize(
    ("body", "headers", "matches"),
    [
        pytest.param(RECORDED_JSON, JSON, True, id="same"),
        pytest.param(
            '{"n": 1, "input": [{"content": "hi", "role": "user"}], "model": "m"}',
            JSON,
            True,
            id="key-order",
        ),
        pytest.param(json.dumps(json.loads(RECORDED_JSON), indent=4), JSON, True, id="whitespace"),
        pytest.param(
            json.dumps(json.loads(RECORDED_JSON), separators=(",", ":")),
            (("content-type", "application/json; charset=utf-8"),),
            True,
            id="compact-with-charset",
        ),
        pytest.param(RECORDED_JSON.replace('"hi"', '"ho"'), JSON, False, id="value-differs"),
        pytest.param(RECORDED_JSON.replace('"n": 1', '"n": 2'), JSON, False, id="number-differs"),
        pytest.param(RECORDED_JSON[:-1] + ', "x": null}', JSON, False, id="extra-key"),
        pytest.param(
            # `curl -d '{...}'` sends JSON as a form: JSON is JSON whatever the content-type.
            json.dumps(json.loads(RECORDED_JSON), indent=4),
            (("content-type", "application/x-www-form-urlencoded"),),
            True,
            id="json-under-another-content-type",
        ),
        pytest.param("n=1&input=hi", JSON, False, id="not-json-compares-as-bytes"),
    ],
)
def test_json_bodies_compare_as_json(
    body: str, headers: Sequence[tuple[str, str]], matches: bool
) -> None:
    recorded_headers = headers if headers[0][1] == "text/plain" else JSON
    cassette = replay.Cassette([interaction(RECORDED_JSON, b"answer", headers=recorded_headers)])

    with client(cassette) as http:
        if matches:
            assert send(http, body, headers=headers) == b"answer"
        else:
            with pytest.raises(replay.CassetteMismatchError):
                send(http, body, headers=headers)


#: A JSON array nested 100,000 deep: far past what `json.loads` and the encoder recurse.
DEEP = "[" * 100_000 + "]" * 100_000


def test_a_body_nested_past_any_parser_compares_as_bytes() -> None:
    cassette = replay.Cassette([interaction(DEEP, b"deep"), interaction(RECORDED_JSON, b"flat")])

    with client(cassette) as http:
        assert send(http, DEEP) == b"deep"  # the same bytes: the same request
        with pytest.raises(replay.CassetteMismatchError) as raised:
            send(http, "[" + DEEP + "]")  # not a RecursionError from parsing either side

    assert [name for name, _ in raised.value.differences] == ["body"]


# --- play order and repeats -------------------------------------------------------------


def test_identical_requests_play_in_recorded_order_once_each() -> None:
    cassette = replay.Cassette([interaction("same", b"1"), interaction("same", b"2")])

    with client(cassette) as http:
        answers = [send(http, "same"), send(http, "same")]
        with pytest.raises(replay.CassetteMismatchError, match="already played"):
            send(http, "same")

    assert answers == [b"1", b"2"]
    assert cassette.all_played


def test_allow_playback_repeats_replays_the_first_once_all_have_played() -> None:
    cassette = replay.Cassette(
        [interaction("same", b"1"), interaction("same", b"2")], allow_playback_repeats=True
    )

    with client(cassette) as http:
        answers = [send(http, "same") for _ in range(4)]

    assert answers == [b"1", b"2", b"1", b"1"]


def test_play_counts_follow_each_interaction() -> None:
    cassette = replay.Cassette(
        [interaction("a", b"a"), interaction("b", b"b")], allow_playback_repeats=True
    )

    with client(cassette) as http:
        for body in ("b", "b", "b"):
            send(http, body)

    assert (cassette.play_counts, cassette.play_count, cassette.all_played) == ([0, 3], 3, False)


# --- custom matchers --------------------------------------------------------------------

# (match_on, recorded (method, url, headers, body), new (method, url, headers, body), matches)
H = (("content-type", "text/plain"), ("x-model", "a"))
CUSTOM = [
    pytest.param(
        ("method", "path"),
        ("POST", URL, H, "a"),
        ("POST", URL, H, "b"),
        True,
        id="body-ignored",
    ),
    pytest.param(
        ("method", "path"),
        ("POST", URL, H, "a"),
        ("POST", URL + "/x", H, "a"),
        False,
        id="path-differs",
    ),
    pytest.param(
        ("method",), ("POST", URL, H, "a"), ("PUT", URL, H, "a"), False, id="method-differs"
    ),
    pytest.param(
        ("method", "uri"),
        ("GET", URL + "?a=1&b=2", H, ""),
        ("GET", URL + "?b=2&a=1", H, ""),
        True,
        id="uri-query-order",
    ),
    pytest.param(
        ("query",),
        ("GET", URL + "?a=1", H, ""),
        ("GET", URL + "?a=2", H, ""),
        False,
        id="query-differs",
    ),
    pytest.param(
        ("host",),
        ("GET", "http://api.test:8000/", H, ""),
        ("GET", "http://api.test:9000/", H, ""),
        True,
        id="host-ignores-port",
    ),
    pytest.param(
        ("port",),
        ("GET", "http://api.test:8000/", H, ""),
        ("GET", "http://api.test:9000/", H, ""),
        False,
        id="port-differs",
    ),
    pytest.param(
        ("scheme",),
        ("GET", "https://api.test/", H, ""),
        ("GET", "http://api.test/", H, ""),
        False,
        id="scheme-differs",
    ),
    pytest.param(
        ("headers",),
        ("GET", URL, H, ""),
        ("GET", URL, (H[0], ("x-model", "b")), ""),
        False,
        id="headers-differ",
    ),
    pytest.param(
        ("raw_body",),
        ("POST", URL, JSON, '{"a": 1, "b": 2}'),
        ("POST", URL, JSON, '{"b": 2, "a": 1}'),
        False,
        id="raw-body-is-bytes",
    ),
    pytest.param((), ("POST", URL, H, "a"), ("GET", URL + "/y", H, "b"), True, id="empty"),
]


@pytest.mark.parametrize(("match_on", "recorded", "new", "matches"), CUSTOM)
def test_custom_match_on_names(
    match_on: tuple[str, ...],
    recorded: tuple[str, str, Any, str],
    new: tuple[str, str, Any, str],
    matches: bool,
) -> None:
    method, url, headers, body = recorded
    cassette = replay.Cassette(
        [interaction(body, b"answer", method=method, url=url, headers=headers)],
        match_on=match_on,
    )
    method, url, headers, body = new

    with client(cassette) as http:
        if matches:
            assert send(http, body, method=method, url=url, headers=headers) == b"answer"
        else:
            with pytest.raises(replay.CassetteMismatchError):
                send(http, body, method=method, url=url, headers=headers)


def same_model(new: Any, recorded: Any) -> None:
    """A vcrpy-style matcher: asserts, on vcrpy request objects."""
    assert json.loads(new.body)["model"] == json.loads(recorded.body)["model"], "model differs"


def same_model_bool(new: Any, recorded: Any) -> bool:
    """A vcrpy-style matcher that answers with a bool."""
    return bool(json.loads(new.body)["model"] == json.loads(recorded.body)["model"])


@pytest.mark.parametrize("matcher", [same_model, same_model_bool], ids=["asserts", "bool"])
@pytest.mark.parametrize(
    ("body", "matches"),
    [('{"model": "m", "input": "other"}', True), ('{"model": "x", "input": "hi"}', False)],
    ids=["same-model", "other-model"],
)
def test_vcrpy_style_callable_matcher(matcher: Any, body: str, matches: bool) -> None:
    cassette = replay.Cassette(
        [interaction('{"model": "m", "input": "hi"}', b"answer")],
        match_on=("method", "path", matcher),
    )

    with client(cassette) as http:
        if matches:
            assert send(http, body) == b"answer"
        else:
            with pytest.raises(replay.CassetteMismatchError, match=matcher.__name__):
                send(http, body)


def test_callable_without_a_name_is_named_in_the_message() -> None:
    matcher = functools.partial(same_model)
    cassette = replay.Cassette(
        [interaction('{"model": "m"}', b"answer")], match_on=("method", matcher)
    )

    with client(cassette) as http, pytest.raises(replay.CassetteMismatchError) as raised:
        send(http, '{"model": "x"}')

    assert "functools.partial" in str(raised.value)


# --- the mismatch message ---------------------------------------------------------------


@pytest.fixture
def saved(tmp_path: Path) -> Path:
    """A cassette file with one chat request, a GET, and one unrelated request."""
    path = tmp_path / "chat.msgpack"
    replay.Cassette(
        [
            interaction('{"model": "m", "input": "hi", "stream": true}', b"hello"),
            interaction("", b"models", method="GET", url="http://api.test/v1/models"),
        ]
    ).save(path)
    return path


def mismatch(path: Path, body: str, *, url: str = URL) -> replay.CassetteMismatchError:
    with (
        replay.use_cassette(path, record_mode="none"),
        httpx.Client() as http,
        pytest.raises(replay.CassetteMismatchError) as raised,
    ):
        send(http, body, url=url)
    return raised.value


def test_mismatch_message_names_request_cassette_nearest_and_hint(saved: Path) -> None:
    error = mismatch(saved, '{"model": "m", "input": "bye", "stream": true}')
    message = str(error)

    assert f"POST {URL} has no match in cassette {str(saved)!r}" in message
    assert "record mode 'none'" in message
    assert f"Nearest recorded request: POST {URL}" in message
    assert "record_mode='new_episodes'" in message


def test_mismatch_message_shows_a_short_body_diff(saved: Path) -> None:
    message = str(mismatch(saved, '{"model": "m", "input": "bye", "stream": true}'))

    assert "body differs" in message
    assert '-  "input": "hi",' in message
    assert '+  "input": "bye",' in message
    assert '"model"' in message  # one line of context, not the whole body
    assert len(message.splitlines()) < 20


def test_mismatch_error_carries_its_fields(saved: Path) -> None:
    error = mismatch(saved, '{"model": "m", "input": "bye", "stream": true}')

    assert (error.method, error.url, error.cassette_path) == ("POST", URL, saved)
    assert error.record_mode == "none"
    assert error.nearest == f"POST {URL}"
    assert [name for name, _ in error.differences] == ["body"]
    assert isinstance(error, LookupError)


def test_mismatch_names_every_failing_matcher(saved: Path) -> None:
    error = mismatch(saved, '{"model": "m"}', url="http://api.test:81/v1/responses?x=1")

    assert [name for name, _ in error.differences] == ["port", "query", "body"]


def test_mismatch_explains_a_difference_vcrpy_overlooks() -> None:
    # vcrpy's `query` drops blank values; the match key keeps them, so the message must too.
    cassette = replay.Cassette([interaction("", b"a", method="GET", url=URL + "?a=")])

    with client(cassette) as http, pytest.raises(replay.CassetteMismatchError) as raised:
        send(http, "", method="GET", url=URL)

    assert [name for name, _ in raised.value.differences] == ["query"]


def test_mismatch_on_an_empty_cassette_says_so(tmp_path: Path) -> None:
    error = mismatch(tmp_path / "missing.msgpack", "{}")

    assert error.nearest is None
    assert "no recorded interactions" in str(error)


# --- match keys -------------------------------------------------------------------------

TEXT = (("content-type", "text/plain"),)


def request(
    body: str = "", *, url: str = URL, headers: Sequence[tuple[str, str]] = JSON
) -> replay.Request:
    return replay.Request(method="POST", url=url, headers=headers, body=body.encode())


# (match_on, recorded, new, whether they share a key)
KEYS = [
    pytest.param(
        ("body",), request('{"a": 1}'), request('{"a":1}', headers=TEXT), True, id="json-as-text"
    ),
    pytest.param(("body",), request("a=1"), request("a=1 "), False, id="form-as-bytes"),
    pytest.param(("body",), request('{"a": 1'), request('{"a":  1'), False, id="bad-json-as-bytes"),
    pytest.param(("body",), request('{"a": 1'), request('{"a": 1'), True, id="bad-json-same-bytes"),
    pytest.param(("body",), request("1"), request("1.0"), False, id="json-number-spelling"),
    # An object of strings, booleans and nulls is keyed by its items, any other by its text.
    pytest.param(
        ("body",),
        request('{"a": true, "b": null}'),
        request('{"b":null,"a":true}'),
        True,
        id="flat-object-key-order",
    ),
    pytest.param(("body",), request('{"a": true}'), request('{"a": 1}'), False, id="true-is-not-1"),
    pytest.param(("body",), request('{"a": 1}'), request('{"a": 1.0}'), False, id="1-is-not-1.0"),
    pytest.param(("body",), request('{"a": 0.0}'), request('{"a": -0.0}'), False, id="signed-zero"),
    pytest.param(
        ("body",), request('{"a": null, "a": "x"}'), request('{"a": "x"}'), True, id="last-key-wins"
    ),
    pytest.param(("body",), request('{"a": "\\u00e9"}'), request('{"a": "é"}'), True, id="escape"),
    pytest.param(
        ("body",), request('{"a": "1"}'), request('{"a": 1}'), False, id="string-vs-number"
    ),
    pytest.param(("body",), request("{}"), request("{ }"), True, id="empty-object"),
    pytest.param(
        ("body",),
        request('{"a": 1}', headers=(*TEXT, *JSON)),
        request('{"a":1}', headers=(*TEXT, *JSON)),
        True,
        id="content-type-does-not-count",
    ),
    pytest.param(
        ("body",),
        request('{"a": 1}', headers=(("Content-Type", "Application/JSON"),)),
        request('{"a":1}', headers=(("CONTENT-TYPE", "application/json"),)),
        True,
        id="content-type-any-case",
    ),
    pytest.param(
        ("path",),
        request(url="http://api.test:99999/x"),
        request(url="http://api.test/x"),
        True,
        id="unnamed-bad-port-unread",
    ),
    pytest.param(
        ("uri",),
        request(url="http://api.test/x?b=2&a=1"),
        request(url="HTTP://API.test:80/x?a=1&b=2"),
        True,
        id="uri-normalised",
    ),
    pytest.param(
        ("scheme", "host", "port", "path", "query"),
        request(url="https://api.test/x?a="),
        request(url="https://api.test:443/x?a="),
        True,
        id="url-parts-default-port",
    ),
    pytest.param(
        ("query", "method"),
        request(url="https://api.test/x?a="),
        request(url="https://api.test/x"),
        False,
        id="blank-query-value-counts",
    ),
    pytest.param(("body", "body"), request('{"a": 1}'), request('{"a":1}'), True, id="named-twice"),
]


@pytest.mark.parametrize(("match_on", "recorded", "new", "same"), KEYS)
def test_keys_are_equal_exactly_when_every_named_matcher_agrees(
    match_on: tuple[str, ...], recorded: replay.Request, new: replay.Request, same: bool
) -> None:
    index = MatchIndex([recorded], match_on=match_on)

    assert (index.key(new) == index.key(recorded)) is same
    assert index.take(new, [0]) == (0 if same else None)


@pytest.mark.parametrize(("match_on", "recorded", "new", "same"), KEYS)
def test_a_key_does_not_depend_on_what_the_index_has_seen(
    match_on: tuple[str, ...], recorded: replay.Request, new: replay.Request, same: bool
) -> None:
    # The index keeps the keys of recorded URLs and bodies; a fresh index computes them.
    seen, fresh = MatchIndex([recorded, new], match_on=match_on), MatchIndex([], match_on=match_on)

    assert [seen.key(r) for r in (recorded, new)] == [fresh.key(r) for r in (recorded, new)]


# --- speed of lookup --------------------------------------------------------------------


def test_thousand_body_distinct_interactions_replay_at_mock_transport_speed() -> None:
    count = 1000
    bodies = [json.dumps({"model": "m", "input": f"question {i}"}).encode() for i in range(count)]
    cassette = replay.Cassette(
        [interaction(body, b"data: %d\n\n" % i) for i, body in enumerate(bodies)]
    )
    order = list(range(count))
    random.Random(7).shuffle(order)

    def mock(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=b"data: x\n\n")

    def timed(transport: httpx.BaseTransport) -> tuple[float, list[bytes]]:
        with httpx.Client(transport=transport) as http:
            started = time.perf_counter()
            answers = [send(http, bodies[i]) for i in order]
            return time.perf_counter() - started, answers

    mock_time, _ = timed(httpx.MockTransport(mock))
    replay_time, answers = timed(replay.ReplayTransport(cassette, speed="instant"))

    assert answers == [b"data: %d\n\n" % i for i in order]
    assert cassette.all_played
    assert replay_time < 20 * mock_time, f"{replay_time:.3f} s vs {mock_time:.3f} s"


def _by_index(
    requests: Sequence[replay.Request],
    asked: Sequence[replay.Request],
    match_on: Sequence[Any],
    repeats: bool,
    among_first: int | None,
) -> list[int | None]:
    """What the match index alone answers to `asked`, in turn."""
    index = MatchIndex(requests, match_on=match_on, allow_playback_repeats=repeats)
    counts = [0] * len(requests)
    answers = []
    for request in asked:
        found = index.take(request, counts, among_first=among_first)
        if found is not None:
            counts[found] += 1
        answers.append(found)
    return answers


@pytest.mark.parametrize("seed", range(40))
def test_a_small_cassette_answers_as_its_index_would(seed: int) -> None:
    # A small cassette first compares a request with its first unplayed interaction, byte
    # for byte, and builds no index when that answers: the answers must be the index's,
    # JSON-equal bodies of other bytes, headers and callables matched on, repeats included.
    chance = random.Random(seed)
    bodies = [b'{"a": 1}', b'{"a":1}', b'{"b": 2}', b"plain", b""]
    urls = [URL, URL + "?x=1", "http://other.test/v1"]
    headers = [JSON, (("content-type", "text/plain"),)]

    def request() -> replay.Request:
        return replay.Request(
            method=chance.choice(["POST", "post", "GET"]),
            url=chance.choice(urls),
            headers=chance.choice(headers),
            body=chance.choice(bodies),
        )

    recorded = [request() for _ in range(chance.randint(1, 6))]
    asked = [chance.choice(recorded) if chance.random() < 0.7 else request() for _ in range(8)]
    match_on = chance.choice(
        [
            replay.DEFAULT_MATCH_ON,
            ("method", "path"),
            ("method", "uri", "headers"),
            ("body",),
            (*replay.DEFAULT_MATCH_ON, lambda new, old: new.method == old.method),
        ]
    )
    repeats = chance.random() < 0.3
    among_first = chance.choice([None, len(recorded), max(0, len(recorded) - 1)])
    cassette = replay.Cassette(
        [replay.Interaction(r, replay.Response(status=200)) for r in recorded],
        match_on=match_on,
        allow_playback_repeats=repeats,
    )
    answers = [cassette.find(r, among_first=among_first) for r in asked]
    assert answers == _by_index(recorded, asked, match_on, repeats, among_first)


def test_a_cassette_replayed_in_its_order_builds_no_index(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[MatchIndex] = []
    building = MatchIndex.__init__

    def counted(index: MatchIndex, *args: Any, **kwargs: Any) -> None:
        built.append(index)
        building(index, *args, **kwargs)

    monkeypatch.setattr(MatchIndex, "__init__", counted)
    bodies = [b'{"n": 1}', b'{"n": 2}', b'{"n":1}']
    cassette = replay.Cassette([interaction(body, body) for body in bodies])
    played = [cassette.find(recorded.request) for recorded in cassette.interactions]
    assert played == [0, 1, 2]
    assert built == []  # (the speed this is for: no key was made)
    # Other bytes than the first unplayed one's: the index answers (its JSON-equal first).
    again = replay.Cassette([interaction(body, body) for body in bodies])
    assert again.find(again.interactions[2].request) == 0
    assert len(built) == 1
