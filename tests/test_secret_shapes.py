"""What a secret looks like: credential-like names, and the shapes of well-known keys."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from replay.redact import shapes as _secret_shapes
from replay.redact.shapes import (
    ALLOWED_NAMES,
    HEADER_SHAPES,
    MAY_HOLD_KEY,
    MAY_HOLD_KEY_BYTES,
    NAME_STEMS,
    PLACEHOLDER,
    SHAPES,
    chunks_hold_key,
    hide_header_shapes,
    hide_shapes,
    is_secret_name,
)

SECRET_NAMES = [
    "Authorization",
    "Proxy-Authorization",
    "X-Amz-Security-Token",
    "X-Auth-Token",
    "Ocp-Apim-Subscription-Key",
    "x-goog-api-key",
    "X-Amz-Signature",
    "X-Amz-Credential",
    "X-Goog-Credential",
    "client_secret",
    "api_key",
    "apiKey",
    "APIKEY",
    "accessToken",
    "refresh_token",
    "id_token",
    "oauth_token",
    "auth",
    "x-csrf-token",
    "Cookie",
    "Set-Cookie",
    "password",
    "db_password",
    "passwd",
    "passphrase",
    "private_key",
    "AccessKeyId",
    "sig",
    "secrets",
    "api_keys",
    "authToken",
]

HARMLESS_NAMES = [
    # LLM usage counters and limits: the plural is a count
    "max_tokens",
    "max_output_tokens",
    "max_completion_tokens",
    "prompt_tokens",
    "completion_tokens",
    "total_tokens",
    "input_tokens",
    "output_tokens",
    "reasoning_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
    "maxTokens",
    "x-ratelimit-remaining-tokens",
    "x-ratelimit-limit-tokens",
    "x-ratelimit-reset-tokens",
    "anthropic-ratelimit-input-tokens-remaining",
    "skip_special_tokens",
    # no credential word in them
    "keep_alive",
    "top_k",
    "keyword",
    "tokenizer",
    "author",
    ":authority",
    "content-type",
    "user-agent",
    "model",
    "x-request-id",
    "signed_headers",
    # the allow-list
    "idempotency-key",
    "Idempotency-Key",
    "idempotency_key",
    "prompt_cache_key",
    "WWW-Authenticate",
    "Access-Control-Allow-Credentials",
    "eos_token",
]


@pytest.mark.parametrize("name", SECRET_NAMES)
def test_credential_like_names_are_secret(name: str) -> None:
    assert is_secret_name(name)


@pytest.mark.parametrize("name", HARMLESS_NAMES)
def test_counts_and_known_harmless_names_are_not(name: str) -> None:
    assert not is_secret_name(name)


@given(
    st.lists(
        st.one_of(
            st.sampled_from(["Token", "key", "Secrets", "passwd", "AUTH", "oauth", "Sig", "pwd"]),
            st.text(alphabet="aAcdeikKnoprstwy-_.", max_size=8),
        ),
        max_size=4,
    ).map("".join)
)
def test_every_secret_name_holds_a_stem(name: str) -> None:
    """Redaction skips a body without any stem: every secret name must hold one."""
    if is_secret_name(name):
        assert any(stem in name.lower() for stem in NAME_STEMS)


def test_the_allow_list_is_short_and_normalised() -> None:
    assert len(ALLOWED_NAMES) <= 12
    assert all(name == name.lower() and "_" not in name for name in ALLOWED_NAMES)


KEYS = [
    pytest.param("sk-" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8s9T0u1V2w3X4", id="openai"),
    pytest.param("sk-proj-AbC123dEf456GhI789jKl012MnO345pQr678", id="openai-project"),
    pytest.param("sk-ant-api03-AbC123dEf456GhI789jKl012MnO345pQr678-xyzAA", id="anthropic"),
    pytest.param("AKIAIOSFODNN7EXAMPLE", id="aws-access-key-id"),
    pytest.param("ASIAY34FZKBOKMUTVV7A", id="aws-temporary-key-id"),
    pytest.param("AIzaSyDdI0hCZtE6vySjMm-WEfRq3CPzqKqqsHI", id="google"),
    pytest.param("ghp_16C7e42F292c6912E7710c838347Ae178B4a", id="github"),
    pytest.param("gho_16C7e42F292c6912E7710c838347Ae178B4a", id="github-oauth"),
    pytest.param("github_pat_11ABCDEFG0123456789_abcdefghijklmnop", id="github-fine-grained"),
    pytest.param("glpat-AbC123dEf456GhI789jKl0", id="gitlab"),
    pytest.param("xoxb-123456789012-1234567890123-AbCdEfGhIjKl", id="slack"),
    pytest.param("hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345", id="hugging-face"),
    pytest.param("sk_live_4eC39HqLyjWDarjtT1zdp7dc", id="stripe"),
    pytest.param(
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0."
        "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        id="jwt",
    ),
]


@pytest.mark.parametrize("key", KEYS)
def test_well_known_keys_are_hidden_wherever_they_are_in_a_text(key: str) -> None:
    assert hide_shapes(key) == PLACEHOLDER
    assert hide_shapes(f"my key is {key}, keep it") == f"my key is {PLACEHOLDER}, keep it"
    assert hide_header_shapes(f"token={key}") == f"token={PLACEHOLDER}"


@pytest.mark.parametrize(
    "text",
    [
        "task-management-and-scheduling-tool",  # sk- inside a word
        "sk-learn",  # too short
        "ASIA is a continent",
        "Bearer of good news",  # not a header value
        "hf_token",
        "eyJ alone",
        "max_tokens",
        "",
    ],
)
def test_prose_and_short_lookalikes_are_kept(text: str) -> None:
    assert hide_shapes(text) is text


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param("Bearer opaque.token-value_1", f"Bearer {PLACEHOLDER}", id="bearer"),
        pytest.param("bearer opaque.token-value_1", f"bearer {PLACEHOLDER}", id="any-case"),
        pytest.param("Basic dXNlcjpwYXNzd29yZA==", f"Basic {PLACEHOLDER}", id="basic"),
        pytest.param("Token 9944b09199c62bcf9418ad846dd0e4bb", f"Token {PLACEHOLDER}", id="token"),
        pytest.param("Bearer short", "Bearer short", id="too-short-to-be-one"),
        pytest.param("x-csrf-token, content-type", "x-csrf-token, content-type", id="a-name"),
        pytest.param("gzip, deflate", "gzip, deflate", id="nothing"),
    ],
)
def test_a_header_value_hides_the_credentials_of_its_scheme(value: str, expected: str) -> None:
    assert hide_header_shapes(value) == expected


@given(
    st.lists(
        st.one_of(
            st.sampled_from([str(p.values[0]) for p in KEYS]),
            st.text(alphabet="sk-_AKIASzaeyJ.ghpxobfr0123456789 ", max_size=30),
        ),
        max_size=5,
    ).map("".join)
)
def test_the_quick_test_never_misses_a_key(text: str) -> None:
    """MAY_HOLD_KEY lets redaction skip a text: it must find something wherever SHAPES does."""
    if SHAPES.search(text):
        assert MAY_HOLD_KEY.search(text)
        assert MAY_HOLD_KEY_BYTES.search(text.encode())


_SECRET_WORD = re.compile(_secret_shapes._SECRET_WORD, re.VERBOSE)


def is_secret_name_in_full(name: str) -> bool:
    """`is_secret_name` without its quick test: every word through the expression."""
    lowered = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "-", name).lower()
    words = [word for word in re.split(r"[^a-z0-9]+", lowered) if word]
    if "-".join(words) in ALLOWED_NAMES:
        return False
    return any(_SECRET_WORD.fullmatch(word) for word in words)


@given(
    st.lists(
        st.one_of(
            st.sampled_from(["Token", "key", "Secrets", "passwd", "AUTH", "oauth", "Sig", "pwd"]),
            st.sampled_from([*SECRET_NAMES, *HARMLESS_NAMES, *ALLOWED_NAMES]),
            st.text(alphabet="aAcdeikKnoprstwy-_.\u0130\u212a\u017f\u03a3", max_size=8),
        ),
        max_size=4,
    ).map("".join)
)
def test_the_quick_test_on_names_gives_the_full_verdict(name: str) -> None:
    assert is_secret_name(name) == is_secret_name_in_full(name)


@given(
    st.lists(
        st.one_of(
            st.sampled_from([str(p.values[0]) for p in KEYS]),
            st.sampled_from(
                [
                    "Bearer ",
                    "basic ",
                    "BEARER\t",
                    "b\u0130sic ",
                    "opaque.token-value",
                    "To\u212aen ",
                ]
            ),
            st.text(alphabet="sk-_AKIASzaeyJ.ghpxobfr0123456789 \xe9\u017f", max_size=30),
        ),
        max_size=5,
    ).map("".join)
)
def test_the_quick_test_on_header_values_gives_the_full_result(value: str) -> None:
    expected = HEADER_SHAPES.sub(lambda m: (m["scheme"] or "") + PLACEHOLDER, value)
    assert hide_header_shapes(value) == expected


def test_the_expressions_are_compiled_once_on_first_use() -> None:
    assert _secret_shapes.SHAPES is _secret_shapes.SHAPES
    assert _secret_shapes.SHAPES_BYTES.search(b"AKIAIOSFODNN7EXAMPLE")
    assert _secret_shapes.HEADER_SHAPES.pattern.endswith(_secret_shapes._KEYS)
    with pytest.raises(AttributeError):
        _secret_shapes.NO_SUCH_SHAPES  # noqa: B018
    with pytest.raises(AttributeError):
        _secret_shapes._CAMEL_CASE  # noqa: B018


def test_a_key_in_chunks_is_found_wherever_the_chunks_split_it() -> None:
    body = b'data: {"text": "use sk-ant-api03-SplitAnywhereUnique0123456789 here"}\n\n'
    for cut in range(len(body) + 1):
        assert _secret_shapes.chunks_hold_key([body[:cut], body[cut:]]), cut
    assert _secret_shapes.chunks_hold_key([bytes([byte]) for byte in body])


def test_chunks_without_a_key_hold_none() -> None:
    body = b'data: {"text": "a token is four characters; sk-learn, AIza and eyJ are words"}\n\n'
    assert not _secret_shapes.chunks_hold_key([body[:20], body[20:], b""])
    assert not _secret_shapes.chunks_hold_key([])


@given(
    st.lists(
        st.lists(
            st.one_of(
                st.sampled_from([str(p.values[0]) for p in KEYS]),
                st.text(alphabet="sk-_AKIASzaeyJ.ghpxobfr0123456789 ", max_size=30),
            ),
            max_size=4,
        ).map(lambda parts: "".join(parts).encode()),
        max_size=4,
    )
)
def test_chunks_hold_a_key_exactly_when_the_joined_body_does(chunks: list[bytes]) -> None:
    expected = SHAPES.search(b"".join(chunks).decode()) is not None
    assert _secret_shapes.chunks_hold_key(chunks) == expected


def test_a_key_across_the_blocks_of_a_long_body_is_found() -> None:
    key = b"AKIAIOSFODNN7EXAMPLE"
    filler = b" " * (_secret_shapes._BLOCK - 7)  # the key starts 7 bytes before a block ends
    assert _secret_shapes.chunks_hold_key([filler, key[:7], key[7:], b" end"])
    assert not _secret_shapes.chunks_hold_key([filler, b"AKIA", b"-not-a-key"])
    # Past the limit (at a block's end) a body is not looked through.
    block = b" " * _secret_shapes._BLOCK
    assert _secret_shapes.chunks_hold_key([block, key])
    assert not _secret_shapes.chunks_hold_key([block, key], limit=len(block))


def test_hash_shapes_puts_a_short_hash_in_place_of_each_key() -> None:
    one, two = "sk-proj-QwErTy7UiOpAsDfGhJkLzXcVbNm", "sk-proj-MnBvCx3ZlKjHgFdSaPoIuYtReWq"
    hashed = _secret_shapes.hash_shapes(f"test_x[{one}-gpt]")
    assert re.fullmatch(r"test_x\[REDACTED-[0-9a-f]{10}\]", hashed)  # (the id is one key)
    assert _secret_shapes.hash_shapes(f"test_x[{one}-gpt]") == hashed  # (sha256: every run)
    assert _secret_shapes.hash_shapes(f"test_x[{two}-gpt]") != hashed
    plain = "test_x[gpt-4o-mini]"
    assert _secret_shapes.hash_shapes(plain) is plain


@pytest.mark.parametrize(
    "prose",
    [
        "use sk-learn-compatible-transformers-and-pipelines here",
        "xoxo-xoxo-xoxo-xoxo",
        "ASIAPACIFIC2024REGION01",
        "risk-averse-strategies-for-everyone-here",
        "task-0f8fad5b-d9cb-469f-a165-70867728950e",
    ],
)
def test_prose_that_starts_like_a_key_is_not_one(prose: str) -> None:
    # A response echoing such prose made KeyInResponseWarning fail the recording test (the
    # suite's warnings are errors); a request value holding it was redacted.
    assert SHAPES.search(prose) is None
    assert not chunks_hold_key([prose.encode()])
