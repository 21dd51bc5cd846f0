"""Redaction: secrets reach the origin but never the cassette file, nor an error message.

Each secret is a unique string; "absent" means absent from the raw bytes of the saved file.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import httpx
import pytest

import replay
from replay.adapters.network import block_network
from replay.redact.redactor import PLACEHOLDER, Redactor
from replay.testing import Origin, Script

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


def test_a_blocked_request_does_not_echo_secret_query_values(origin: Origin) -> None:
    # The network block redacts the refused request for its error (`replay.errors` imports
    # nothing of replay's, so the error takes the URL as it is given).
    url = origin.url + "/v1/x?key=AIza-blocked-secret&model=m"
    with (
        block_network(allowed_hosts=()),
        pytest.raises(replay.NetworkBlockedError) as raised,
    ):
        httpx.get(url)

    assert "AIza-blocked-secret" not in str(raised.value)
    assert f"GET {origin.url}/v1/x?key={PLACEHOLDER}&model=m was refused" in str(raised.value)
    assert raised.value.url == f"{origin.url}/v1/x?key={PLACEHOLDER}&model=m"
    assert origin.requests == []


def test_user_information_in_the_url_never_reaches_the_cassette(
    origin: Origin, tmp_path: Path
) -> None:
    path = tmp_path / "c.msgpack"
    url = origin.url.replace("http://", "http://alice:s3cr3t@") + "/v1/responses"
    with replay.use_cassette(path):
        httpx.get(url)
    assert b"s3cr3t" not in path.read_bytes()
    stored = replay.Cassette.load(path).interactions[0].request.url
    assert stored.startswith("http://REDACTED:REDACTED@127.0.0.1")  # the user may be a key
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


# --- names that look like credentials, values shaped like keys ---------------------------


def redacted(
    url: str = "http://a.test/v1/x",
    headers: list[tuple[str, str]] | None = None,
    body: bytes = b"",
) -> replay.Request:
    return Redactor().request(
        replay.Request(method="POST", url=url, headers=headers or [], body=body)
    )


@pytest.mark.parametrize(
    "name",
    ["X-Amz-Security-Token", "X-Auth-Token", "Ocp-Apim-Subscription-Key", "X-Custom-Secret"],
)
def test_headers_named_like_credentials_are_redacted_without_being_listed(name: str) -> None:
    request = redacted(headers=[(name, "opaque-value-1"), ("x-request-id", "req-1")])

    assert request.headers == ((name, PLACEHOLDER), ("x-request-id", "req-1"))


@pytest.mark.parametrize(
    "name", ["x-ratelimit-remaining-tokens", "x-ratelimit-limit-tokens", "Idempotency-Key"]
)
def test_counts_and_idempotency_keys_are_kept(name: str) -> None:
    request = redacted(headers=[(name, "12000")])

    assert request.header(name) == "12000"


def test_a_key_in_any_header_value_is_redacted_by_its_shape() -> None:
    request = redacted(
        headers=[
            ("x-trace", "from sk-proj-AbC123dEf456GhI789jKl012"),
            ("x-forwarded-access", "Bearer opaque.token-value_1"),
        ]
    )

    assert request.headers == (
        ("x-trace", f"from {PLACEHOLDER}"),
        ("x-forwarded-access", f"Bearer {PLACEHOLDER}"),
    )


def test_a_key_echoed_in_a_response_header_is_redacted() -> None:
    interaction = replay.Interaction(
        replay.Request(method="GET", url="http://a.test/"),
        replay.Response(
            status=200,
            headers=[("x-echo", "AKIAIOSFODNN7EXAMPLE"), ("x-session-token", "opaque-2")],
        ),
    )

    cleaned = Redactor().interaction(interaction)

    assert cleaned is not None
    assert cleaned.response.headers == (("x-echo", PLACEHOLDER), ("x-session-token", PLACEHOLDER))


PRESIGNED = (
    "https://bucket.s3.amazonaws.com/key.txt?X-Amz-Algorithm=AWS4-HMAC-SHA256"
    "&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20240101%2Fus-east-1%2Fs3%2Faws4_request"
    "&X-Amz-Date=20240101T000000Z&X-Amz-Expires=3600&X-Amz-SignedHeaders=host"
    "&X-Amz-Security-Token=IQoJb3JpZ2luX2VjEOpaque&X-Amz-Signature=a1b2c3d4e5f6"
)


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        pytest.param(
            PRESIGNED,
            "https://bucket.s3.amazonaws.com/key.txt?X-Amz-Algorithm=AWS4-HMAC-SHA256"
            f"&X-Amz-Credential={PLACEHOLDER}&X-Amz-Date=20240101T000000Z&X-Amz-Expires=3600"
            f"&X-Amz-SignedHeaders=host&X-Amz-Security-Token={PLACEHOLDER}"
            f"&X-Amz-Signature={PLACEHOLDER}",
            id="presigned-url",
        ),
        pytest.param(
            "http://a.test/token?client_secret=opaque&grant_type=client_credentials",
            f"http://a.test/token?client_secret={PLACEHOLDER}&grant_type=client_credentials",
            id="client_secret",
        ),
        pytest.param(
            "http://a.test/p?q=AIzaSyDdI0hCZtE6vySjMm-WEfRq3CPzqKqqsHI&max_tokens=5",
            f"http://a.test/p?q={PLACEHOLDER}&max_tokens=5",
            id="key-shaped-value",
        ),
        pytest.param(
            "https://opaque-token-1@a.test/p",
            f"https://{PLACEHOLDER}@a.test/p",
            id="user-alone",
        ),
        pytest.param(
            "https://user:pass@a.test:8443/p",
            f"https://{PLACEHOLDER}:{PLACEHOLDER}@a.test:8443/p",
            id="user-and-password",
        ),
        pytest.param(
            "https://a.test/bot/xoxb-123456789012-AbCdEfGhIjKl/send?x=1",
            f"https://a.test/bot/{PLACEHOLDER}/send?x=1",
            id="key-in-path",
        ),
        pytest.param("https://a.test/p?email=a@b.test", "https://a.test/p?email=a@b.test", id="at"),
    ],
)
def test_redactor_url_hides_credentials_wherever_they_are(url: str, expected: str) -> None:
    assert Redactor().url(url) == expected


JSON = [("content-type", "application/json")]


def test_json_body_fields_named_like_credentials_are_redacted_at_any_depth() -> None:
    body = {
        "api_key": "opaque-1",
        "max_tokens": 100,
        "metadata": {"credentials": {"password": "opaque-2", "user": "alice"}},
        "tokens": ["a", "b"],
        "api_keys": ["opaque-3", "opaque-4"],
        "auth": {"value": "an object under a credential's name", "n": 1},
        "input": "my key is ghp_16C7e42F292c6912E7710c838347Ae178B4a, keep the rest",
    }

    request = redacted(headers=JSON, body=json.dumps(body).encode())

    assert json.loads(request.body) == {
        "api_key": PLACEHOLDER,
        "max_tokens": 100,
        "metadata": {"credentials": {"password": PLACEHOLDER, "user": PLACEHOLDER}},
        "tokens": ["a", "b"],
        "api_keys": [PLACEHOLDER, PLACEHOLDER],
        "auth": {"value": PLACEHOLDER, "n": 1},  # every string in it, at any depth
        "input": f"my key is {PLACEHOLDER}, keep the rest",
    }


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(b'{"model":"m","max_tokens":5,"input":"hi"}', id="only-counters"),
        pytest.param(b'{"model": "m", "input": "the key to success"}', id="a-stem-in-prose"),
        pytest.param(b'{"max_output_tokens": 5,  "stream":true}', id="spacing-kept"),
        pytest.param(b'{"api_key": 12345}', id="not-a-string"),
        pytest.param(b"{not json, key", id="not-json"),
    ],
)
def test_a_json_body_with_nothing_to_hide_is_kept_byte_for_byte(body: bytes) -> None:
    request = replay.Request(method="POST", url="http://a.test/", headers=JSON, body=body)

    assert Redactor().request(request) is request


def test_a_body_that_is_not_json_keeps_its_credential_like_text() -> None:
    body = b'{"api_key": "opaque-1"}'
    request = replay.Request(method="POST", url="http://a.test/", body=body)

    assert Redactor().request(request).body == body  # no content type: a raw body


def test_form_fields_named_like_credentials_are_redacted() -> None:
    form = [("content-type", "application/x-www-form-urlencoded")]
    body = b"grant_type=client_credentials&client_id=app&client_secret=opaque%2F1&scope=a+b"

    request = redacted(headers=form, body=body)

    assert request.body == (
        b"grant_type=client_credentials&client_id=app&client_secret=REDACTED&scope=a+b"
    )


def test_redacting_twice_changes_nothing_more() -> None:
    once = redacted(
        url="https://tok@a.test/p?token=1&q=sk-proj-AbC123dEf456GhI789jKl012",
        headers=[*JSON, ("authorization", "Bearer x"), ("x-trace", "Bearer opaque-abcdef")],
        body=b'{"api_key": "1", "input": "AKIAIOSFODNN7EXAMPLE"}',
    )

    assert Redactor().request(once) is once


def test_a_request_with_nothing_to_hide_is_not_copied() -> None:
    request = replay.Request(
        method="POST",
        url="http://a.test/v1/responses?model=m",
        headers=[*JSON, ("user-agent", "python-httpx/0.28.1")],
        body=b'{"model": "gpt-4.1", "input": "Question number 5?", "stream": true}',
    )

    assert Redactor().request(request) is request


def test_a_different_key_in_the_json_body_still_matches(
    origin: Origin, cassette_path: Path
) -> None:
    with replay.use_cassette(cassette_path):
        send(f"{origin.url}{URL_PATH}", body={"input": "hi", "api_key": "opaque-recorded"})
    origin.requests.clear()

    with replay.use_cassette(cassette_path, record_mode="none") as cassette:
        send(f"{origin.url}{URL_PATH}", body={"input": "hi", "api_key": "opaque-live"})

    assert cassette.all_played
    assert origin.requests == []
    assert b"opaque-recorded" not in cassette_path.read_bytes()


def test_a_mismatch_body_diff_shows_no_body_secret(origin: Origin, cassette_path: Path) -> None:
    with replay.use_cassette(cassette_path):
        send(f"{origin.url}{URL_PATH}", body={"input": "hi", "api_key": "opaque-recorded"})

    with (
        replay.use_cassette(cassette_path, record_mode="none"),
        pytest.raises(replay.CassetteMismatchError) as raised,
    ):
        send(f"{origin.url}{URL_PATH}", body={"input": "bye", "api_key": "opaque-live"})

    message = str(raised.value)
    assert "body differs" in message
    assert '"input": "bye"' in message  # the diff is there, and shows the field that differs
    assert "opaque-recorded" not in message
    assert "opaque-live" not in message


def test_a_cassette_holding_an_unredacted_secret_is_never_echoed_by_a_mismatch(
    origin: Origin, cassette_path: Path
) -> None:
    """A cassette recorded before a value was redacted holds it: the live request, redacted,
    no longer matches, and the message says why without showing it."""
    body = json.dumps({"input": "hi", "client_secret": "old-unredacted-secret"}).encode()
    old = replay.Request(method="POST", url=f"{origin.url}{URL_PATH}", headers=JSON, body=body)
    replay.Cassette([replay.Interaction(old, replay.Response(status=200))]).save(cassette_path)

    with (
        replay.use_cassette(cassette_path, record_mode="none"),
        pytest.raises(replay.CassetteMismatchError) as raised,
    ):
        httpx.post(f"{origin.url}{URL_PATH}", content=body, headers=dict(JSON))

    message = str(raised.value)
    assert "old-unredacted-secret" not in message
    assert "a hidden value differs" in message
    assert "record it again" in message


def test_a_mismatch_never_echoes_an_unredacted_url_secret_of_either_request(
    origin: Origin, cassette_path: Path
) -> None:
    # The error takes its URLs as given (`replay.errors` imports nothing of replay's): the
    # player redacts the live request, the matcher's explanation the nearest recorded one,
    # even one a hand-made cassette holds unredacted.
    old = replay.Request(method="GET", url=f"{origin.url}{URL_PATH}?token=old-url-secret&n=1")
    replay.Cassette([replay.Interaction(old, replay.Response(status=200))]).save(cassette_path)

    with (
        replay.use_cassette(cassette_path, record_mode="none"),
        pytest.raises(replay.CassetteMismatchError) as raised,
    ):
        httpx.get(f"{origin.url}{URL_PATH}?token=live-url-secret&n=2")

    message = str(raised.value)
    assert "old-url-secret" not in message
    assert "live-url-secret" not in message
    assert f"GET {origin.url}{URL_PATH}?token={PLACEHOLDER}&n=2 has no match" in message
    assert f"Nearest recorded request: GET {origin.url}{URL_PATH}?token={PLACEHOLDER}&n=1" in (
        message
    )
    assert raised.value.url == f"{origin.url}{URL_PATH}?token={PLACEHOLDER}&n=2"
    assert origin.requests == []


def test_a_reasoning_blocks_signature_is_no_credential() -> None:
    # Anthropic's thinking blocks and Gemini's parts carry an opaque signature the client
    # sends back verbatim: kept. A field named signature elsewhere is still a credential.
    body = {
        "messages": [
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "Hmm.", "signature": "EqQBCkYIBxgCKkAx"},
                    {"type": "text", "text": "Hi", "signature": "hmac-of-the-request"},
                ],
            }
        ],
        "contents": [{"parts": [{"text": "Hi", "thoughtSignature": "CiQBcsjafq"}]}],
    }
    request = replay.Request(
        method="POST",
        url="https://api.example.com/v1/messages",
        headers=(("content-type", "application/json"),),
        body=json.dumps(body).encode(),
    )
    stored = json.loads(Redactor().request(request).body)
    blocks = stored["messages"][0]["content"]
    assert blocks[0]["signature"] == "EqQBCkYIBxgCKkAx"
    assert blocks[1]["signature"] == "REDACTED"
    assert stored["contents"][0]["parts"][0]["thoughtSignature"] == "CiQBcsjafq"


CLEAN_BODY = b'{"model": "m", "input": "hi"}'
KEYED_BODY = b'{"model": "m", "input": "sk-proj-0123456789abcdefghijklmnop"}'
NAMED_BODY = b'{"model": "m", "api_key": "hunter2"}'


HARMLESS_BODY = b'{"max_tokens": 5}'
JSON_HEADERS = [("content-type", "application/json")]


@pytest.mark.parametrize(
    ("bodies", "clean"),
    [
        pytest.param([CLEAN_BODY], {CLEAN_BODY}, id="one-clean"),
        pytest.param([CLEAN_BODY, KEYED_BODY, NAMED_BODY], {CLEAN_BODY}, id="with-secrets"),
        pytest.param(
            [CLEAN_BODY, HARMLESS_BODY], {CLEAN_BODY, HARMLESS_BODY}, id="a-harmless-name"
        ),
    ],
)
def test_clean_bodies_are_those_redaction_leaves_as_they_are(
    bodies: list[bytes], clean: set[bytes]
) -> None:
    redactor = Redactor()
    assert redactor.clean_bodies(bodies) == clean
    # What "clean" means: a request with that body is stored as it was sent.
    for body in bodies:
        sent = replay.Request(method="POST", url="https://h/", headers=JSON_HEADERS, body=body)
        assert (redactor.request(sent).body == body) == (body in clean), body


def test_a_body_known_clean_is_kept_and_others_are_still_redacted() -> None:
    redactor = Redactor()
    clean = redactor.clean_bodies([CLEAN_BODY, KEYED_BODY])
    json_headers = [("content-type", "application/json")]
    sent = replay.Request(method="POST", url="https://h/", headers=json_headers, body=CLEAN_BODY)
    assert redactor.request(sent, clean=clean) is sent
    keyed = attrs.evolve(sent, body=KEYED_BODY)
    assert b"sk-proj" not in redactor.request(keyed, clean=clean).body
    # Known clean as JSON only: the same bytes sent as a form are looked through as a form.
    form = [("content-type", "application/x-www-form-urlencoded")]
    formed = replay.Request(method="POST", url="https://h/", headers=form, body=b"token=abc")
    assert redactor.request(formed, clean={b"token=abc"}).body == b"token=" + PLACEHOLDER.encode()


# --- JSON nested deeper than the standard library reads -------------------------------------


def deep_body(depth: int, secret: str, *, kind: str = "list") -> bytes:
    """A JSON body with `"api_key": secret` beside a value nested `depth` deep."""
    if kind == "list":
        nested = b"[" * depth + b"]" * depth
    else:
        nested = b'{"a": ' * depth + b"1" + b"}" * depth
    return b'{"api_key": "' + secret.encode() + b'", "nested": ' + nested + b"}"


@pytest.mark.parametrize("kind", ["list", "object"])
@pytest.mark.parametrize("depth", [900, 100_000])
def test_a_json_body_nested_at_any_depth_has_its_key_redacted(depth: int, kind: str) -> None:
    body = deep_body(depth, "deep-opaque-key", kind=kind)

    request = redacted(headers=JSON, body=body)

    # Only the value changed: same fields in the same order, the nesting kept whole.
    assert request.body == body.replace(b"deep-opaque-key", PLACEHOLDER.encode())


def test_a_session_keeps_its_interactions_beside_a_body_nested_2000_deep(
    origin: Origin, cassette_path: Path
) -> None:
    def deep(secret: str) -> None:
        headers = {"content-type": "application/json"}
        httpx.post(f"{origin.url}{URL_PATH}", content=deep_body(2000, secret), headers=headers)

    with replay.use_cassette(cassette_path):
        send(f"{origin.url}{URL_PATH}", body={"input": "ordinary"})
        deep("deep-recorded-key")

    saved = cassette_path.read_bytes()
    assert len(replay.Cassette.load(cassette_path).interactions) == 2
    assert b"deep-recorded-key" not in saved
    origin.requests.clear()

    # Both replay: the deep one is matched (redacted the same way) as well as the other.
    with replay.use_cassette(cassette_path, record_mode="none") as cassette:
        send(f"{origin.url}{URL_PATH}", body={"input": "ordinary"})
        deep("deep-live-key")

    assert cassette.all_played
    assert origin.requests == []


def test_a_mismatch_between_deep_bodies_is_explained_without_their_keys(
    origin: Origin, cassette_path: Path
) -> None:
    headers = {"content-type": "application/json"}
    with replay.use_cassette(cassette_path):
        httpx.post(f"{origin.url}{URL_PATH}", content=deep_body(2000, "k-1"), headers=headers)

    body = deep_body(1999, "deep-live-key-2")
    with (
        replay.use_cassette(cassette_path, record_mode="none"),
        pytest.raises(replay.CassetteMismatchError) as raised,
    ):
        httpx.post(f"{origin.url}{URL_PATH}", content=body, headers=headers)

    message = str(raised.value)
    assert "body" in message
    assert "deep-live-key-2" not in message


# --- credential forms that used to reach the file (issue 25) ---------------------------------

#: Each form a credential takes, as (query and fragment after the path, request headers,
#: JSON body): `{s}` stands for the secret, a unique string each time.
FORMS = [
    pytest.param("?model=m#access_token={s}&token_type=bearer", {}, None, id="fragment"),
    pytest.param("?sk-proj-{s}0123456789abcdefgh", {}, None, id="key-shaped-part-without-equals"),
    pytest.param("?code={s}&state=st", {}, None, id="query-code"),
    pytest.param("?sessionid={s}", {}, None, id="query-sessionid"),
    pytest.param("?passcode={s}", {}, None, id="query-passcode"),
    pytest.param("?user=u&pass={s}", {}, None, id="query-pass"),
    pytest.param("?otp={s}", {}, None, id="query-otp"),
    pytest.param("?model=m;token={s}", {}, None, id="semicolon-separated"),
    pytest.param(";jsessionid={s}?model=m", {}, None, id="path-parameter"),
    pytest.param("", {"Referer": "https://app.test/cb?token={s}"}, None, id="referer"),
    pytest.param("", {"X-Original-URL": "/v1/x?api_key={s}"}, None, id="x-original-url"),
    pytest.param("", {"Link": '<https://a.test/p?access_token={s}>; rel="next"'}, None, id="link"),
    pytest.param("", {"X-Custom": "Token {s}"}, None, id="token-scheme"),
    pytest.param("", {}, {"input": "hi", "token": {"access": "{s}"}}, id="json-object-under-name"),
    pytest.param("", {}, '{"input": "hi", "\\u0074oken": "{s}"}', id="json-name-escaped"),
    pytest.param("", {}, '{"input": "hi", "api_\\u006bey": "{s}"}', id="json-name-escaped-2"),
]


def send_form(url: str, suffix: str, headers: dict[str, str], body: Any, secret: str) -> None:
    def fill(value: Any) -> Any:  # the secret put in its place, wherever that is
        return json.loads(json.dumps(value).replace("{s}", secret))

    if isinstance(body, str):  # JSON text as it is (escapes and all)
        content = body.replace("{s}", secret).encode()
        httpx.post(url + fill(suffix), headers={**fill(headers), **dict(JSON)}, content=content)
    else:
        send(url + fill(suffix), headers=fill(headers), body=fill(body))


@pytest.mark.parametrize(("suffix", "headers", "body"), FORMS)
def test_each_form_of_a_credential_stays_out_of_the_file_and_the_mismatch(
    origin: Origin, cassette_path: Path, suffix: str, headers: dict[str, str], body: Any
) -> None:
    url = f"{origin.url}{URL_PATH}"
    match_on = (*replay.DEFAULT_MATCH_ON, "headers")  # so that a header is shown, compared
    with replay.use_cassette(cassette_path, match_on=match_on):
        send_form(url, suffix, headers, body, "recordedvalue1")

    assert len(origin.requests) == 1  # it was sent
    assert b"recordedvalue1" not in cassette_path.read_bytes()

    with (
        replay.use_cassette(cassette_path, record_mode="none", match_on=match_on),
        pytest.raises(replay.CassetteMismatchError) as raised,
    ):
        send_form(url + "/other", suffix, headers, body, "livevalue2")

    message = str(raised.value)
    assert "differs" in message
    assert "recordedvalue1" not in message
    assert "livevalue2" not in message


@pytest.mark.parametrize(("suffix", "headers", "body"), FORMS)
def test_each_form_of_a_credential_still_matches_another_value(
    origin: Origin, cassette_path: Path, suffix: str, headers: dict[str, str], body: Any
) -> None:
    url = f"{origin.url}{URL_PATH}"
    with replay.use_cassette(cassette_path):
        send_form(url, suffix, headers, body, "recordedvalue1")
    origin.requests.clear()

    with replay.use_cassette(cassette_path, record_mode="none") as cassette:
        send_form(url, suffix, headers, body, "livevalue2")

    assert cassette.all_played
    assert origin.requests == []


@pytest.mark.parametrize("name", ["code", "ticket", "sid"])
def test_an_everyday_word_under_a_url_credentials_name_stays_and_tells_requests_apart(
    origin: Origin, cassette_path: Path, name: str
) -> None:
    # `?code=python` and `?code=rust` were both stored as `code=REDACTED`: the second
    # replayed the first one's answer, with no error.
    url = f"{origin.url}{URL_PATH}"
    with replay.use_cassette(cassette_path):
        httpx.get(url, params={name: "python"})
    stored = replay.Cassette.load(cassette_path).interactions[0].request.url
    assert stored.endswith(f"?{name}=python")

    with replay.use_cassette(cassette_path, record_mode="none"):
        with pytest.raises(replay.CassetteMismatchError):
            httpx.get(url, params={name: "rust"})
        httpx.get(url, params={name: "python"})
    assert Redactor().url(f"{url}?{name}=ab12cd34ef") == f"{url}?{name}={PLACEHOLDER}"


def test_a_url_in_a_response_header_is_redacted(cassette_path: Path) -> None:
    location = "https://app.test/cb?code=location-opaque-1&state=s"
    script = Script(status=302, headers=[("location", location)], chunks=[(0.0, b"")])
    with Origin({URL_PATH: script}) as server, replay.use_cassette(cassette_path):
        response = httpx.get(f"{server.url}{URL_PATH}")

    assert response.headers["location"] == location  # the client got it
    (interaction,) = replay.Cassette.load(cassette_path).interactions
    assert (
        interaction.response.header("location") == f"https://app.test/cb?code={PLACEHOLDER}&state=s"
    )
    assert b"location-opaque-1" not in cassette_path.read_bytes()


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        pytest.param("http://a.test/p?stream", "http://a.test/p?stream", id="a-bare-name-stays"),
        pytest.param(
            "http://a.test/p?a=1;b=2&c=3", "http://a.test/p?a=1;b=2&c=3", id="separators-kept"
        ),
        pytest.param(
            "http://a.test/doc#section-2", "http://a.test/doc#section-2", id="an-anchor-stays"
        ),
        pytest.param(
            "http://a.test/p?country_code=fr&zip_code=1",
            "http://a.test/p?country_code=fr&zip_code=1",
            id="codes-by-their-words-stay",
        ),
        pytest.param(
            "http://a.test/p;v=2/q", "http://a.test/p;v=2/q", id="other-path-parameters-stay"
        ),
    ],
)
def test_what_is_no_credential_in_a_url_is_kept(url: str, expected: str) -> None:
    assert Redactor().url(url) == expected


@pytest.mark.parametrize(
    "value",
    [
        "application/json; charset=utf-8",
        "text/html,application/xhtml+xml;q=0.9,*/*;q=0.8",
        "for=192.0.2.60;proto=http;by=203.0.113.43",
        "https://app.test/page?lang=en#top",
        "max-age=0, must-revalidate",
        "x-csrf-token, content-type",
    ],
)
def test_header_values_without_credentials_are_kept(value: str) -> None:
    request = redacted(headers=[("x-any", value)])

    assert request.headers == (("x-any", value),)


@pytest.mark.parametrize(
    "body",
    [
        pytest.param({"type": "tool_use", "input": {"code": "print(1)"}}, id="code-of-a-tool-call"),
        pytest.param(
            {
                "tools": [
                    {
                        "name": "login",
                        "input_schema": {
                            "type": "object",
                            "properties": {
                                "api_key": {"type": "string", "description": "the user's key"},
                                "token": {"type": "string", "enum": ["a", "b"]},
                            },
                            "required": ["api_key"],
                        },
                    }
                ]
            },
            id="parameters-of-a-tool-named-like-credentials",
        ),
        pytest.param(
            {"messages": [{"role": "user", "content": "how many tokens is a token?"}]},
            id="prose-about-tokens",
        ),
        pytest.param({"input": "caf\u00e9 \u00e0 l'\u0153il"}, id="escaped-non-ascii"),
    ],
)
def test_llm_request_bodies_are_not_mangled(body: dict[str, Any]) -> None:
    text = json.dumps(body).encode()

    assert redacted(headers=JSON, body=text).body == text


def send_gzip(url: str, body: dict[str, Any]) -> httpx.Response:
    headers = {"content-type": "application/json", "content-encoding": "gzip"}
    return httpx.post(url, content=gzip.compress(json.dumps(body).encode()), headers=headers)


def test_a_gzip_json_body_is_redacted_and_still_matches(
    origin: Origin, cassette_path: Path
) -> None:
    url = f"{origin.url}{URL_PATH}"
    with replay.use_cassette(cassette_path):
        send_gzip(url, {"input": "hi", "api_key": "gzip-recorded-opaque"})

    assert (
        gzip.decompress(origin.requests[0].body)
        == b'{"input": "hi", "api_key": "gzip-recorded-opaque"}'
    )
    # Stored decoded (the Content-Encoding header goes with the compression), redacted.
    request = stored_request(cassette_path)
    assert json.loads(request.body) == {"input": "hi", "api_key": PLACEHOLDER}
    assert request.header("content-encoding") is None
    assert b"gzip-recorded-opaque" not in cassette_path.read_bytes()
    origin.requests.clear()

    # A live request with another key is redacted the same way: it matches.
    with replay.use_cassette(cassette_path, record_mode="none") as cassette:
        send_gzip(url, {"input": "hi", "api_key": "gzip-live-opaque"})
    assert cassette.all_played
    assert origin.requests == []

    with (
        replay.use_cassette(cassette_path, record_mode="none"),
        pytest.raises(replay.CassetteMismatchError) as raised,
    ):
        send_gzip(url, {"input": "bye", "api_key": "gzip-live-opaque"})
    assert "body differs" in str(raised.value)
    assert "gzip-live-opaque" not in str(raised.value)


def test_a_gzip_body_with_nothing_to_hide_is_kept_compressed() -> None:
    body = gzip.compress(b'{"input": "a key to the token"}', mtime=0)
    headers = [*JSON, ("content-encoding", "gzip")]
    request = replay.Request(method="POST", url="http://a.test/", headers=headers, body=body)

    assert Redactor().request(request) is request


# --- a key echoed in a response body ---------------------------------------------------------

GOOGLE_KEY = "AIzaEchoedInTheBodyUnique0123456789abcd"


def test_a_key_echoed_in_a_response_body_is_warned_of_by_its_request_never_its_value(
    cassette_path: Path,
) -> None:
    # The key is cut in two by a chunk boundary, and the body is gzip-compressed.
    chunks = [
        (0.0, b'data: {"text": "your key is ' + GOOGLE_KEY[:12].encode()),
        (0.0, GOOGLE_KEY[12:].encode() + b'"}\n\n'),
    ]
    script = Script(chunks=chunks, gzip=True)
    with Origin({URL_PATH: script}) as server:
        url = f"{server.url}{URL_PATH}"
        with (
            pytest.warns(replay.KeyInResponseWarning) as warned,
            replay.use_cassette(cassette_path),
        ):
            send(f"{url}?api_key=opaque-q")

    (warning,) = warned
    message = str(warning.message)
    assert f"POST {url}?api_key={PLACEHOLDER}" in message
    assert "before_record" in message
    assert GOOGLE_KEY not in message
    assert GOOGLE_KEY[:12] not in message


def test_a_response_body_scrubbed_by_before_record_is_not_warned_of(cassette_path: Path) -> None:
    def scrub(interaction: replay.Interaction) -> replay.Interaction:
        chunks = replay.Chunks((interaction.response.headers_at,), (b"data: scrubbed\n\n",))
        return attrs.evolve(interaction, response=attrs.evolve(interaction.response, chunks=chunks))

    script = Script(chunks=[(0.0, b"data: " + GOOGLE_KEY.encode() + b"\n\n")])
    with (
        Origin({URL_PATH: script}) as server,
        replay.use_cassette(cassette_path, before_record=scrub),
    ):
        send(f"{server.url}{URL_PATH}")  # (pytest makes a warning an error here)

    assert GOOGLE_KEY.encode() not in cassette_path.read_bytes()


def test_a_response_that_talks_about_tokens_is_not_warned_of(cassette_path: Path) -> None:
    text = b'data: {"text": "A token is about 4 characters; sk-learn and AIza are words"}\n\n'
    with (
        Origin({URL_PATH: Script(chunks=[(0.0, text)])}) as server,
        replay.use_cassette(cassette_path),
    ):
        send(f"{server.url}{URL_PATH}")  # (pytest makes a warning an error here)

    assert replay.Cassette.load(cassette_path).interactions[0].response.body == text
