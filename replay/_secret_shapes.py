"""What a secret looks like: credential-like names, and the shapes of well-known keys.

Two tests, so that redaction does not depend on an exact list of names:

- **By name.** A header, query parameter, form field or JSON field is secret when one of the
  words of its name (split at `-`, `_`, `.` and camelCase) is credential-like: it ends with
  `token`, `key(s)`, `secret(s)`, `password`, `passwd`, `pwd`, `passphrase`, `credential(s)`,
  `signature` or `cookie(s)`; it starts with `secret`, `passw`, `credential`, `signature` or
  `cookie`; it is `auth`, `oauth` or starts with them (`authorization`, `authtoken`; not
  `author`, `authority`); or it is `sig`. The plural `tokens` is a count, not a credential
  (`max_tokens`, `prompt_tokens`, `cache_read_input_tokens`, `x-ratelimit-remaining-tokens`),
  and `tokenizer` is no token. `ALLOWED_NAMES` lists the few credential-like names known to be
  harmless.
- **By shape.** A value holding a well-known key (`SHAPES`: OpenAI and Anthropic `sk-…`,
  AWS `AKIA…`/`ASIA…`, Google `AIza…`, GitHub, GitLab, Slack, Hugging Face, Stripe, JWTs) is
  secret whatever its name; in a header value, so are the credentials after `Bearer` or
  `Basic`.

Both are one precompiled regular expression each and run on short strings; a name's verdict
is cached, since the same few names come back with every request.
"""

from __future__ import annotations

import functools
import re

__all__ = [
    "ALLOWED_NAMES",
    "HEADER_SHAPES",
    "MAY_HOLD_KEY",
    "MAY_HOLD_KEY_BYTES",
    "NAME_STEMS",
    "PLACEHOLDER",
    "SHAPES",
    "SHAPES_BYTES",
    "hide_header_shapes",
    "hide_shapes",
    "is_secret_name",
]

#: Credential-like names that are harmless, normalised (lower case, words joined by `-`).
#: Values of these are still checked for the shapes of keys.
ALLOWED_NAMES: frozenset[str] = frozenset(
    {
        "idempotency-key",  # a retry's identity, not a credential
        "x-idempotency-key",
        "prompt-cache-key",  # OpenAI: a cache-routing hint
        "www-authenticate",  # a server's challenge, not a credential
        "proxy-authenticate",
        "access-control-allow-credentials",  # CORS: "true"
        "bos-token",  # a tokenizer's special tokens ("</s>"), sent to LLM servers
        "eos-token",
        "pad-token",
        "unk-token",
    }
)

_SECRET_WORD = re.compile(
    r"""
      [a-z0-9]*(?:token|keys?|secrets?|passwords?|passwd|pwd|passphrase|credentials?
                 |signatures?|cookies?)
    | (?:secret|passw|credential|signature|cookie)[a-z0-9]*
    | o?auth(?!or(?!i[sz]))[a-z0-9]*  # auth, oauth, authorization, authn; not author(ity)
    | sig
    """,
    re.VERBOSE,
)
#: What every credential-like name holds, in lower case: a body without any of these (nor a
#: name the user added) has no credential-like field.
NAME_STEMS: tuple[str, ...] = (
    "token", "key", "auth", "secret", "passw", "pwd", "passphrase", "credential", "sig", "cookie"
)  # fmt: skip
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_NOT_ALNUM = re.compile(r"[^a-z0-9]+")


@functools.lru_cache(maxsize=4096)
def is_secret_name(name: str) -> bool:
    """Whether a header, parameter or field called `name` holds a credential."""
    words = [word for word in _NOT_ALNUM.split(_CAMEL.sub("-", name).lower()) if word]
    if "-".join(words) in ALLOWED_NAMES:
        return False
    return any(_SECRET_WORD.fullmatch(word) for word in words)


# Each shape starts at a word boundary and needs enough characters not to hit prose.
_KEYS = r"""
    \b(?:
      sk-[A-Za-z0-9_-]{20,}                            # OpenAI (sk-, sk-proj-), Anthropic (sk-ant-)
    | (?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}         # Stripe secret and restricted keys
    | (?:AKIA|ASIA)[A-Z0-9]{16}                        # AWS access key ids
    | AIza[A-Za-z0-9_-]{30,}                           # Google API keys
    | (?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{20,}         # GitHub tokens
    | github_pat_[A-Za-z0-9_]{20,}                     # GitHub fine-grained tokens
    | glpat-[A-Za-z0-9_-]{20,}                         # GitLab tokens
    | xox[abposr]-[A-Za-z0-9-]{10,}                    # Slack tokens
    | hf_[A-Za-z0-9]{20,}                              # Hugging Face tokens
    | eyJ[A-Za-z0-9_-]{4,}\.eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*  # JWTs
    )
"""

#: The shapes of well-known keys, anywhere in a text.
SHAPES = re.compile(_KEYS, re.VERBOSE)

# What every match of SHAPES holds: one of a few rare characters (-, _, A, J) where a key's
# prefix ends. Python's regular expressions scan for a leading character class in C, so this
# looks at a long text about twenty times faster than SHAPES would; SHAPES runs only where it
# finds something.
_ANCHORS = r"""
    [-_AJ](?:
      (?<=sk-) | (?<=sk_) | (?<=rk_) | (?<=gh._) | (?<=github_pat_) | (?<=glpat-)
    | (?<=xox.-) | (?<=hf_) | (?<=eyJ) | (?<=A)(?=KIA|SIA|Iza)
    )
"""
#: A text that may hold a key (SHAPES then says): a quick test that most texts fail.
MAY_HOLD_KEY = re.compile(_ANCHORS, re.VERBOSE)
#: `MAY_HOLD_KEY` for bytes.
MAY_HOLD_KEY_BYTES = re.compile(_ANCHORS.encode(), re.VERBOSE)
#: `SHAPES` for bytes.
SHAPES_BYTES = re.compile(_KEYS.encode(), re.VERBOSE)

#: `SHAPES`, and the credentials of an HTTP authentication scheme (the scheme is kept).
HEADER_SHAPES = re.compile(
    r"(?P<scheme>\b(?i:bearer|basic)\s+)[A-Za-z0-9._~+/-]{8,}=*|" + _KEYS, re.VERBOSE
)

#: The placeholder a secret is replaced by (also `replay.redact.PLACEHOLDER`).
PLACEHOLDER = "REDACTED"


def hide_shapes(text: str) -> str:
    """`text` with each well-known key replaced; `text` itself when it holds none."""
    if MAY_HOLD_KEY.search(text) is None or SHAPES.search(text) is None:
        return text
    return SHAPES.sub(PLACEHOLDER, text)


def _keep_scheme(match: re.Match[str]) -> str:
    return (match["scheme"] or "") + PLACEHOLDER


def hide_header_shapes(value: str) -> str:
    """Header `value` with each key and scheme credential replaced; `value` itself when it
    holds none."""
    if HEADER_SHAPES.search(value) is None:
        return value
    return HEADER_SHAPES.sub(_keep_scheme, value)
