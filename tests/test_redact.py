"""Redaction: secrets reach the origin but never the cassette file, nor an error message.

Each secret is a unique string; "absent" means absent from the raw bytes of the saved file.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import httpx
import pytest

import replay
from replay._origin import Origin, Script
from replay.redact import PLACEHOLDER, Redactor

URL_PATH = "/v1/responses"
SET_COOKIE = "session=sc-secret-from-the-server; Path=/; HttpOnly"


@pytest.fixture
def origin() -> Iterator[Origin]:
    """An origin whose answer sets a cookie, as a login endpoint would."""
    script = Script(
        chunks=[(0.0, b"data: ok\n\n")],
        headers=[("content-type", "text/event-stream"), ("set-cookie", SET_COOKIE)],
    )
    with Origin({URL_PATH: script}) as server:
        yield server


def send(url: str, *, headers: dict[str, str] | None = None, body: Any = None) -> httpx.Response:
    return httpx.post(url, headers=headers, json=body if body is not None else {"input": "hi"})


def stored_request(path: Path) -> replay.Request:
    (interaction,) = replay.Cassette.load(path).interactions
    return interaction.request


# --- what is redacted -------------------------------------------------------------------

HEADERS = [
    pytest.param("Authorization", "Bearer sk-secret-authorization", id="authorization"),
    pytest.param("Proxy-Authorization", "Basic cHJveHktc2VjcmV0", id="proxy-authorization"),
    pytest.param("x-api-key", "sk-ant-secret-x-api-key", id="x-api-key"),
    pytest.param("api-key", "azure-secret-api-key", id="api-key"),
    pytest.param("Cookie", "session=cookie-secret-value", id="cookie"),
    pytest.param("AUTHORIZATION", "Bearer sk-secret-upper-case", id="name-case-insensitive"),
]


@pytest.mark.parametrize(("name", "secret"), HEADERS)
def test_secret_request_headers_reach_the_origin_but_not_the_file(
    origin: Origin, cassette_path: Path, name: str, secret: str
) -> None:
    with replay.use_cassette(cassette_path):
        send(f"{origin.url}{URL_PATH}", headers={name: secret})

    assert origin.requests[0].header(name) == secret
    assert secret.encode() not in cassette_path.read_bytes()
    assert stored_request(cassette_path).header(name) == PLACEHOLDER


QUERY = [
    pytest.param("key", "AIza-secret-key", id="key"),
    pytest.param("api_key", "secret-api_key", id="api_key"),
    pytest.param("apikey", "secret-apikey", id="apikey"),
    pytest.param("token", "secret-token", id="token"),
    pytest.param("access_token", "secret-access_token", id="access_token"),
    pytest.param("API_KEY", "secret-upper-case", id="name-case-insensitive"),
]


@pytest.mark.parametrize(("name", "secret"), QUERY)
def test_secret_query_parameters_reach_the_origin_but_not_the_file(
    origin: Origin, cassette_path: Path, name: str, secret: str
) -> None:
    with replay.use_cassette(cassette_path):
        send(f"{origin.url}{URL_PATH}?model=m&{name}={secret}")

    assert origin.requests[0].query == f"model=m&{name}={secret}"
    assert secret.encode() not in cassette_path.read_bytes()
    assert stored_request(cassette_path).url.endswith(f"?model=m&{name}={PLACEHOLDER}")


def test_set_cookie_reaches_the_client_but_not_the_file(
    origin: Origin, cassette_path: Path
) -> None:
    with replay.use_cassette(cassette_path):
        live = send(f"{origin.url}{URL_PATH}")

    assert live.headers["set-cookie"] == SET_COOKIE
    assert b"sc-secret-from-the-server" not in cassette_path.read_bytes()
    (interaction,) = replay.Cassette.load(cassette_path).interactions
    assert interaction.response.header("set-cookie") == PLACEHOLDER


def test_user_added_header_names_are_redacted(origin: Origin, cassette_path: Path) -> None:
    with replay.use_cassette(cassette_path, redact_headers=["X-Tenant-Token"]):
        send(f"{origin.url}{URL_PATH}", headers={"x-tenant-token": "tenant-secret"})

    assert origin.requests[0].header("x-tenant-token") == "tenant-secret"
    assert b"tenant-secret" not in cassette_path.read_bytes()


def test_user_added_query_names_are_redacted(origin: Origin, cassette_path: Path) -> None:
    with replay.use_cassette(cassette_path, redact_query_parameters=["Sig"]):
        send(f"{origin.url}{URL_PATH}?sig=signature-secret&model=m")

    assert origin.requests[0].query == "sig=signature-secret&model=m"
    assert b"signature-secret" not in cassette_path.read_bytes()
    assert stored_request(cassette_path).url.endswith(f"?sig={PLACEHOLDER}&model=m")


def test_other_headers_and_parameters_are_kept(origin: Origin, cassette_path: Path) -> None:
    with replay.use_cassette(cassette_path):
        send(f"{origin.url}{URL_PATH}?model=m", headers={"x-request-id": "req-1"})

    request = stored_request(cassette_path)
    assert request.header("x-request-id") == "req-1"
    assert request.url.endswith("?model=m")


# --- before_record ----------------------------------------------------------------------


def scrub_user(interaction: replay.Interaction) -> replay.Interaction:
    """Replace the body's "user" field, as a user's before_record hook would."""
    body = json.loads(interaction.request.body)
    body["user"] = "someone"
    request = attrs.evolve(interaction.request, body=json.dumps(body).encode())
    return attrs.evolve(interaction, request=request)


def test_before_record_rewrites_what_is_saved(origin: Origin, cassette_path: Path) -> None:
    with replay.use_cassette(cassette_path, before_record=scrub_user):
        send(f"{origin.url}{URL_PATH}", body={"input": "hi", "user": "alice@example.com"})

    assert json.loads(origin.requests[0].body)["user"] == "alice@example.com"
    assert b"alice@example.com" not in cassette_path.read_bytes()
    assert json.loads(stored_request(cassette_path).body)["user"] == "someone"


def test_before_record_also_shapes_the_request_being_matched(
    origin: Origin, cassette_path: Path
) -> None:
    body = {"input": "hi", "user": "alice@example.com"}
    with replay.use_cassette(cassette_path, before_record=scrub_user):
        send(f"{origin.url}{URL_PATH}", body=body)
    origin.requests.clear()

    with replay.use_cassette(cassette_path, record_mode="none", before_record=scrub_user):
        assert send(f"{origin.url}{URL_PATH}", body=body).text == "data: ok\n\n"

    assert origin.requests == []


def test_before_record_runs_after_the_built_in_redaction(
    origin: Origin, cassette_path: Path
) -> None:
    seen: list[str | None] = []

    def look(interaction: replay.Interaction) -> replay.Interaction:
        seen.append(interaction.request.header("authorization"))
        return interaction

    with replay.use_cassette(cassette_path, before_record=look):
        send(f"{origin.url}{URL_PATH}", headers={"authorization": "Bearer sk-hook-secret"})

    assert seen
    assert set(seen) == {PLACEHOLDER}


# --- matching on redacted requests ------------------------------------------------------


@pytest.mark.parametrize(
    ("recorded", "replayed", "match_on"),
    [
        pytest.param(
            {"headers": {"authorization": "Bearer sk-old"}},
            {"headers": {"authorization": "Bearer sk-new"}},
            replay.DEFAULT_MATCH_ON,
            id="authorization",
        ),
        pytest.param(
            {"headers": {"authorization": "Bearer sk-old"}},
            {"headers": {"authorization": "Bearer sk-new"}},
            (*replay.DEFAULT_MATCH_ON, "headers"),
            id="authorization-matching-headers",
        ),
        pytest.param(
            {"query": "api_key=old-key"},
            {"query": "api_key=new-key"},
            replay.DEFAULT_MATCH_ON,
            id="api_key-query",
        ),
    ],
)
def test_replay_with_a_different_key_still_matches(
    origin: Origin,
    cassette_path: Path,
    recorded: dict[str, Any],
    replayed: dict[str, Any],
    match_on: tuple[str, ...],
) -> None:
    def request(options: dict[str, Any]) -> httpx.Response:
        url = f"{origin.url}{URL_PATH}?{options.get('query', '')}"
        return send(url, headers=options.get("headers"))

    with replay.use_cassette(cassette_path, match_on=match_on):
        request(recorded)
    origin.requests.clear()

    with replay.use_cassette(cassette_path, record_mode="none", match_on=match_on) as cassette:
        assert request(replayed).text == "data: ok\n\n"

    assert cassette.all_played
    assert origin.requests == []


def test_secrets_never_appear_in_a_mismatch_message(origin: Origin, cassette_path: Path) -> None:
    match_on = (*replay.DEFAULT_MATCH_ON, "headers")
    with replay.use_cassette(cassette_path, match_on=match_on):
        send(
            f"{origin.url}{URL_PATH}?token=recorded-token",
            headers={"authorization": "Bearer sk-recorded", "x-api-key": "recorded-api-key"},
        )

    with (
        replay.use_cassette(cassette_path, record_mode="none", match_on=match_on),
        pytest.raises(replay.CassetteMismatchError) as raised,
    ):
        send(
            f"{origin.url}{URL_PATH}?token=live-token",
            headers={"authorization": "Bearer sk-live", "cookie": "id=live-cookie"},
        )

    message = str(raised.value)
    assert "headers differs" in message  # the headers were compared, and explained
    for secret in ("recorded-token", "sk-recorded", "recorded-api-key", "live-token"):
        assert secret not in message
    assert "sk-live" not in message
    assert "live-cookie" not in message


# --- the Redactor itself ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        pytest.param("http://a.test/p", "http://a.test/p", id="no-query"),
        pytest.param("http://a.test/p?model=m", "http://a.test/p?model=m", id="nothing-secret"),
        pytest.param(
            "http://a.test/p?key=s1&model=m",
            f"http://a.test/p?key={PLACEHOLDER}&model=m",
            id="first",
        ),
        pytest.param(
            "http://a.test/p?q=a%20b+c&token=s2&x=%2F",
            f"http://a.test/p?q=a%20b+c&token={PLACEHOLDER}&x=%2F",
            id="others-keep-their-encoding",
        ),
        pytest.param(
            "http://a.test/p?token=s1&token=s2",
            f"http://a.test/p?token={PLACEHOLDER}&token={PLACEHOLDER}",
            id="repeated",
        ),
        pytest.param("http://a.test/p?token", "http://a.test/p?token", id="no-value"),
        pytest.param(
            "http://a.test/p?access%5Ftoken=s3",
            f"http://a.test/p?access%5Ftoken={PLACEHOLDER}",
            id="encoded-name",
        ),
        pytest.param(
            "http://a.test/p?api_key=s4#frag",
            f"http://a.test/p?api_key={PLACEHOLDER}#frag",
            id="fragment-kept",
        ),
    ],
)
def test_redactor_replaces_only_secret_query_values(url: str, expected: str) -> None:
    assert Redactor().url(url) == expected


def test_redactor_takes_a_single_name_as_one_name() -> None:
    redactor = Redactor(headers="X-Secret")  # type: ignore[arg-type]

    assert redactor.headers == frozenset({"x-secret"})


def test_network_blocked_error_does_not_echo_secret_query_values() -> None:
    error = replay.errors.NetworkBlockedError(
        method="GET", url="https://api.test/v1/x?key=AIza-blocked-secret&model=m"
    )

    assert "AIza-blocked-secret" not in str(error)
    assert f"GET https://api.test/v1/x?key={PLACEHOLDER}&model=m" in str(error)


def test_unplayed_interactions_warning_does_not_echo_secret_query_values() -> None:
    unplayed = [
        replay.Interaction(
            replay.Request(method="GET", url="https://api.test/v1/x?token=unplayed-secret"),
            replay.Response(status=200),
        )
    ]

    message = replay.errors.UnplayedInteractionsWarning.describe("c.msgpack", unplayed)

    assert "unplayed-secret" not in message
    assert message.startswith("1 unplayed interaction in cassette 'c.msgpack'")


def test_a_password_in_the_url_never_reaches_the_cassette(origin: Origin, tmp_path: Path) -> None:
    path = tmp_path / "c.msgpack"
    url = origin.url.replace("http://", "http://alice:s3cr3t@") + "/v1/responses"
    with replay.use_cassette(path):
        httpx.get(url)
    assert b"s3cr3t" not in path.read_bytes()
    stored = replay.Cassette.load(path).interactions[0].request.url
    assert stored.startswith("http://alice:REDACTED@127.0.0.1")
    # The live request is redacted the same way before matching: it still replays.
    with replay.use_cassette(path, record_mode="none") as cassette:
        httpx.get(url)
    assert cassette.play_count == 1


def test_a_before_record_hook_returning_none_drops_the_interaction(
    origin: Origin, tmp_path: Path
) -> None:
    path = tmp_path / "c.msgpack"

    def keep_only_responses(interaction: replay.Interaction) -> replay.Interaction | None:
        return interaction if interaction.request.url.endswith("/responses") else None

    with replay.use_cassette(path, before_record=keep_only_responses):
        httpx.get(origin.url + "/v1/responses")
        httpx.get(origin.url + "/v1/messages")
    assert [i.request.url for i in replay.Cassette.load(path).interactions] == [
        origin.url + "/v1/responses"
    ]
