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
- **In a URL, by name too.** A query (or fragment, or form) parameter is also secret under
  a few names that are credentials there and ordinary words in a JSON body (`code`, an OAuth
  authorization code; `sessionid`, `pass`, `otp`…): `URL_NAMES`. The most common words of
  them (`code`, `ticket`, `sid`) only where the value is opaque, as such credentials are
  (`?code=python` stays, and tells two requests apart).
- **By shape.** A value holding a well-known key (`SHAPES`: OpenAI and Anthropic `sk-…`,
  OpenAI's ephemeral `ek_…`,
  AWS `AKIA…`/`ASIA…`, Google `AIza…`, GitHub, GitLab, Slack, Hugging Face, Stripe, JWTs) is
  secret whatever its name; in a header value, so are the credentials after `Bearer`,
  `Basic` or `Token`.

Both are one regular expression each and run on short strings; a name's verdict is cached,
since the same few names come back with every request. Each expression is compiled when it
is first used (a module attribute such as `SHAPES` too): compiling them all took 2 ms of
every run, and replaying a usual test suite needs only the short ones (the quick tests below
find nothing in its names and values).
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

__all__ = [
    "ALLOWED_NAMES",
    "HEADER_SHAPES",
    "MAY_HOLD_KEY",
    "MAY_HOLD_KEY_BYTES",
    "NAME_STEMS",
    "PLACEHOLDER",
    "SHAPES",
    "SHAPES_BYTES",
    "URL_NAMES",
    "chunks_hold_key",
    "hash_shapes",
    "hide_header_shapes",
    "hide_shapes",
    "hide_subprotocols",
    "holds_key",
    "is_secret_name",
    "is_secret_url_name",
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

#: Names of URL (and form) parameters that are credentials there, though not by their words:
#: normalised (lower case, without `-`, `_` and `.`). In a JSON body these are ordinary
#: fields (`code` of a tool call), and are judged by their words only.
URL_NAMES: frozenset[str] = frozenset(
    {
        "code",  # OAuth 2.0 authorization code (and `?code=` of most sign-in callbacks)
        "ticket",  # CAS service ticket
        "sid",
        "sessionid",  # Django, and `session_id`
        "jsessionid",  # Java servlets (also a `;jsessionid=` path parameter)
        "phpsessid",
        "pass",
        "passcode",
        "otp",
        "totp",
        "otpcode",
        "mfacode",
    }
)
_URL_NAME_JOINERS = str.maketrans("", "", "-_.")

#: Of `URL_NAMES`, the everyday words (`?code=python`, `?sid=42`): a credential only when
#: their value is opaque (`_OPAQUE`), as an authorization code, a ticket or a SID is.
URL_NAMES_IF_OPAQUE: frozenset[str] = frozenset({"code", "ticket", "sid"})
#: Eight or more characters of a token's alphabet, with a letter and a digit among them.
_OPAQUE = re.compile(r"(?=[^0-9]*[0-9])(?=[^A-Za-z]*[A-Za-z])[A-Za-z0-9._~+/=-]{8,}")

#: What every credential-like name holds, in lower case: a body without any of these (nor a
#: name the user added) has no credential-like field.
NAME_STEMS: tuple[str, ...] = (
    "token", "key", "auth", "secret", "passw", "pwd", "passphrase", "credential", "sig", "cookie"
)  # fmt: skip
_SECRET_WORD = r"""
      [a-z0-9]*(?:token|keys?|secrets?|passwords?|passwd|pwd|passphrase|credentials?
                 |signatures?|cookies?)
    | (?:secret|passw|credential|signature|cookie)[a-z0-9]*
    | o?auth(?!or(?!i[sz]))[a-z0-9]*  # auth, oauth, authorization, authn; not author(ity)
    | sig
"""
_CAMEL = r"(?<=[a-z0-9])(?=[A-Z])"
_NOT_ALNUM = r"[^a-z0-9]+"


@functools.lru_cache(maxsize=4096)
def is_secret_name(name: str) -> bool:
    """Whether a header, parameter or field called `name` holds a credential."""
    lowered = name.lower()
    # Every secret word holds a stem, and the words are runs of `lowered` (its letters
    # lowered the same, split): a name without a stem is no secret (most names are not).
    if not any(stem in lowered for stem in NAME_STEMS):
        return False
    split = _pattern("_NOT_ALNUM").split(_pattern("_CAMEL").sub("-", name).lower())
    words = [word for word in split if word]
    if "-".join(words) in ALLOWED_NAMES:
        return False
    secret_word = _pattern("_SECRET_WORD")
    return any(secret_word.fullmatch(word) for word in words)


def is_secret_url_name(name: str, value: str) -> bool:
    """Whether a URL query, fragment or form parameter called `name` holds a credential when
    its value is `value`: a secret name (`is_secret_name`), or one of `URL_NAMES` (those of
    `URL_NAMES_IF_OPAQUE` only when `value` is opaque)."""
    normal = name.lower().translate(_URL_NAME_JOINERS)
    if normal in URL_NAMES_IF_OPAQUE:
        return _OPAQUE.fullmatch(value) is not None
    return normal in URL_NAMES or is_secret_name(name)


# Each shape starts at a word boundary and needs enough characters not to hit prose; the
# prefixes that prose also makes (`sk-learn-compatible`, `xoxo-xoxo`) need a digit as well,
# which every such key holds.
_KEYS = r"""
    \b(?:
      sk-(?=[A-Za-z_-]*[0-9])[A-Za-z0-9_-]{20,}        # OpenAI (sk-, sk-proj-), Anthropic (sk-ant-)
    | ek_(?=[A-Za-z]*[0-9])[A-Za-z0-9]{20,}            # OpenAI ephemeral (Realtime client) keys
    | (?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}         # Stripe secret and restricted keys
    | (?:AKIA|ASIA)[A-Z0-9]{16}\b                      # AWS access key ids
    | AIza[A-Za-z0-9_-]{30,}                           # Google API keys
    | (?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{20,}         # GitHub tokens
    | github_pat_[A-Za-z0-9_]{20,}                     # GitHub fine-grained tokens
    | glpat-[A-Za-z0-9_-]{20,}                         # GitLab tokens
    | xox[abposr]-(?=[A-Za-z-]*[0-9])[A-Za-z0-9-]{10,} # Slack tokens
    | hf_[A-Za-z0-9]{20,}                              # Hugging Face tokens
    | eyJ[A-Za-z0-9_-]{4,}\.eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*  # JWTs
    )
"""

# What every match of SHAPES holds: one of a few rare characters (-, _, A, J) where a key's
# prefix ends. Python's regular expressions scan for a leading character class in C, so this
# looks at a long text about twenty times faster than SHAPES would; SHAPES runs only where it
# finds something.
_ANCHORS = r"""
    [-_AJ](?:
      (?<=sk-) | (?<=sk_) | (?<=rk_) | (?<=ek_) | (?<=gh._) | (?<=github_pat_) | (?<=glpat-)
    | (?<=xox.-) | (?<=hf_) | (?<=eyJ) | (?<=A)(?=KIA|SIA|Iza)
    )
"""
_HEADER_SHAPES = r"(?P<scheme>\b(?i:bearer|basic|token)\s+)[A-Za-z0-9._~+/-]{8,}=*|" + _KEYS

#: Each expression's source and flags, by its name (the public ones: `__getattr__`).
_SOURCES: dict[str, tuple[str | bytes, int]] = {
    "SHAPES": (_KEYS, re.VERBOSE),
    "SHAPES_BYTES": (_KEYS.encode(), re.VERBOSE),
    "MAY_HOLD_KEY": (_ANCHORS, re.VERBOSE),
    "MAY_HOLD_KEY_BYTES": (_ANCHORS.encode(), re.VERBOSE),
    "HEADER_SHAPES": (_HEADER_SHAPES, re.VERBOSE),
    "_SECRET_WORD": (_SECRET_WORD, re.VERBOSE),
    "_CAMEL": (_CAMEL, 0),
    "_NOT_ALNUM": (_NOT_ALNUM, 0),
}
_COMPILED: dict[str, re.Pattern[Any]] = {}
_COMPILING = threading.Lock()

if TYPE_CHECKING:
    #: The shapes of well-known keys, anywhere in a text.
    SHAPES: re.Pattern[str]
    #: `SHAPES` for bytes.
    SHAPES_BYTES: re.Pattern[bytes]
    #: A text that may hold a key (SHAPES then says): a quick test that most texts fail.
    MAY_HOLD_KEY: re.Pattern[str]
    #: `MAY_HOLD_KEY` for bytes.
    MAY_HOLD_KEY_BYTES: re.Pattern[bytes]
    #: `SHAPES`, and the credentials of an HTTP authentication scheme (`Bearer`, `Basic`,
    #: `Token`: the scheme is kept).
    HEADER_SHAPES: re.Pattern[str]


def _pattern(name: str) -> re.Pattern[Any]:
    """The expression `name` of `_SOURCES`, compiled on first use."""
    compiled = _COMPILED.get(name)
    if compiled is None:
        with _COMPILING:  # one compile, whichever thread asks first
            compiled = _COMPILED.get(name)
            if compiled is None:
                compiled = _COMPILED[name] = re.compile(*_SOURCES[name])
    return compiled


def __getattr__(name: str) -> Any:
    if name.startswith("_") or name not in _SOURCES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    compiled = _pattern(name)
    globals()[name] = compiled  # later lookups skip this function
    return compiled


#: The placeholder a secret is replaced by (also `replay.redact.redactor.PLACEHOLDER`).
PLACEHOLDER = "REDACTED"


def holds_key(text: str) -> bool:
    """Whether `text` holds a well-known key (`SHAPES.search(text)`, most often found
    without it)."""
    return (
        _pattern("MAY_HOLD_KEY").search(text) is not None
        and _pattern("SHAPES").search(text) is not None
    )


#: What each of `SHAPES` starts with: a body is looked for these (`bytes.find` scans at memory
#: speed, where an expression looks at every position), and `SHAPES` tried where one is.
_PREFIXES = (
    b"sk-", b"sk_", b"rk_", b"ek_", b"AKIA", b"ASIA", b"AIza", b"ghp_", b"gho_", b"ghu_", b"ghs_",
    b"ghr_", b"github_pat_", b"glpat-", b"xox", b"hf_", b"eyJ",
)  # fmt: skip
#: A body is looked through in blocks of about this many bytes (few chunks are this long).
_BLOCK = 1 << 20
#: How many bytes of a block are looked at again with the next one: a key cut in two by a
#: block boundary is found whole (far longer than any key; a JWT's first two parts included).
_CARRY = 4096


def chunks_hold_key(chunks: Iterable[bytes], *, limit: int | None = None) -> bool:
    """Whether a body, read as `chunks`, holds a well-known key: `SHAPES_BYTES.search` of
    the whole body, read a block at a time (a long body is never joined).

    Args:
        limit: look no further than about this many bytes (None: to the end). A body is
            looked through at about 100 MB/s.
    """
    tail = b""
    pieces: list[bytes] = []
    size = total = 0
    for chunk in chunks:
        pieces.append(chunk)
        size += len(chunk)
        if size >= _BLOCK:
            text = tail + b"".join(pieces)
            total += size
            if _block_holds_key(text):
                return True
            if limit is not None and total >= limit:
                return False
            tail, pieces, size = text[-_CARRY:], [], 0
    return _block_holds_key(tail + b"".join(pieces))


def _block_holds_key(text: bytes) -> bool:
    shapes = _pattern("SHAPES_BYTES")
    for prefix in _PREFIXES:
        at = text.find(prefix)
        while at != -1:
            if shapes.match(text, at) is not None:  # (`\b` still sees the byte before)
                return True
            at = text.find(prefix, at + 1)
    return False


def hide_shapes(text: str) -> str:
    """`text` with each well-known key replaced; `text` itself when it holds none."""
    if not holds_key(text):
        return text
    return _pattern("SHAPES").sub(PLACEHOLDER, text)


def hash_shapes(text: str) -> str:
    """`text` with each well-known key replaced by `REDACTED-` and a short hash of it; `text`
    itself when it holds none.

    For a name made of a text that may hold a key (a test id, and the cassette file named
    after it): the same key gives the same name in every run, two keys two names, and the
    name tells nothing of the key."""
    if not holds_key(text):
        return text
    return _pattern("SHAPES").sub(_hashed, text)


def _hashed(match: re.Match[str]) -> str:
    import hashlib  # (only here: most runs never hash a key)

    return f"{PLACEHOLDER}-{hashlib.sha256(match[0].encode()).hexdigest()[:10]}"


def _keep_scheme(match: re.Match[str]) -> str:
    return (match["scheme"] or "") + PLACEHOLDER


def hide_header_shapes(value: str) -> str:
    """Header `value` with each key and scheme credential replaced; `value` itself when it
    holds none."""
    # Most values hold neither a key's anchor nor a scheme: seen without HEADER_SHAPES. (An
    # ASCII value only: a scheme may match other letters case-insensitively.)
    if value.isascii() and _pattern("MAY_HOLD_KEY").search(value) is None:
        lowered = value.lower()
        if "bearer" not in lowered and "basic" not in lowered and "token" not in lowered:
            return value
    header_shapes = _pattern("HEADER_SHAPES")
    if header_shapes.search(value) is None:
        return value
    return header_shapes.sub(_keep_scheme, value)


_SUBPROTOCOL_KEY = re.compile(r"(?i)^(.*(?:api[-_]?key|token|secret|auth)[^.]*\.)(.+)$")


def hide_subprotocols(value: str) -> str:
    """A `Sec-WebSocket-Protocol` value with the credentials browsers' clients carry in it
    replaced: an item after a key-naming prefix (OpenAI's `openai-insecure-api-key.<key>`)
    keeps its prefix, an item after a `token` / `bearer` item (Deepgram's) goes whole;
    `value` itself when none is there."""
    items = [item.strip() for item in value.split(",")]
    hidden: list[str] = []
    for index, item in enumerate(items):
        named = _SUBPROTOCOL_KEY.match(item)
        if named is not None:
            item = named.group(1) + PLACEHOLDER
        elif index and items[index - 1].lower() in ("token", "bearer") and item:
            item = PLACEHOLDER
        hidden.append(item)
    joined = ", ".join(hidden)
    return value if hidden == items else joined
