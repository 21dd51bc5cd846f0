"""The JSON half of `replay.redact.redactor`: a request body's secrets, at any depth.

`JsonRedaction` is what `Redactor` does to a JSON body (the names and the stems come from
the redactor): every string under a credential-like field (in its lists and objects too;
not the schema of a tool's parameter, in a JSON schema's `properties`; not a reasoning
block's signature), and well-known keys inside any other string. The body is parsed only
when a key's shape or a credential-like name may be in it (`replay.redact.deep_json`: no
recursion), and written anew only when something changed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from replay.redact import (
    deep_json,
    shapes,  # (its expressions are compiled when first used)
)
from replay.redact.shapes import PLACEHOLDER, hide_shapes, is_secret_name

__all__ = ["JsonRedaction", "is_secret"]

#: Up to this many bytes, a JSON body is looked for names with one regular expression.
_SHORT_BODY = 256

#: A JSON escape of an ASCII letter (in a body made lower case), which a stem may hide behind.
_ESCAPED_LETTER = re.compile(rb"\\u00(?:4[1-9a-f]|5[0-9a]|6[1-9a-f]|7[0-9a])")

#: Fields named like credentials that LLM APIs use for something else: the opaque signature
#: of a reasoning block, which the client sends back verbatim in the next turn (Gemini's
#: `thoughtSignature`; Anthropic's `signature` of a thinking block, and Bedrock Converse's
#: of a `reasoningContent` / `reasoningText`, below). Not credentials.
_REASONING_SIGNATURES = frozenset({"thoughtSignature", "thought_signature"})
_THINKING_BLOCKS = frozenset({"thinking", "redacted_thinking"})
_REASONING_OWNERS = frozenset({"reasoningContent", "reasoningText"})


def _reasoning_signature(name: str, owner: dict[str, object], parent: object) -> bool:
    """Whether field `name` of the JSON object `owner` (itself the field `parent` of its own
    owner) is a reasoning block's signature."""
    if name in _REASONING_SIGNATURES:
        return True
    return name == "signature" and (
        owner.get("type") in _THINKING_BLOCKS or parent in _REASONING_OWNERS
    )


def _credential(name: str, item: object, owner: dict[str, object], parent: object) -> bool:
    """Whether field `name` of JSON object `owner`, holding `item`, is the credential its name
    says it is.

    Args:
        parent: the name of the field that holds `owner` (None at the top, an index in a
            list). In a JSON schema's `properties` (a tool's parameters, in a request to an
            LLM) an object is the schema of a parameter that may be called `api_key`, not
            a credential.
    """
    if parent == "properties" and not isinstance(item, str):
        return False
    return not _reasoning_signature(name, owner, parent)


def is_secret(name: str, always: frozenset[str]) -> bool:
    """Whether `name` (a header, parameter or field) is redacted, given the names `always`
    redacted (lower case)."""
    return name.lower() in always or is_secret_name(name)


class JsonRedaction:
    """What `Redactor` does to JSON bodies; it provides the names and the stems."""

    __slots__ = ()
    #: Field names always redacted, lower case (the defaults and the user's).
    _field_names: frozenset[str]
    #: The stems of credential-like names (and the user's names), and one pattern of them.
    _stems: tuple[bytes, ...]
    _stems_pattern: re.Pattern[bytes]

    def _json(self, body: bytes) -> bytes:
        """A JSON body with secrets replaced; `body` itself when none was (or it is not
        JSON). It is parsed only when a key's shape or a credential-like name may be in it."""
        # The usual case in a replay is a body with nothing to hide: seen without parsing.
        keys = shapes.MAY_HOLD_KEY_BYTES.search(body) is not None
        if not keys and not self._may_name_a_secret(body.lower()):
            return body
        try:
            parsed = deep_json.loads(body)  # at any depth: a body is untrusted input
        except ValueError:  # not JSON after all
            return shapes.SHAPES_BYTES.sub(PLACEHOLDER.encode(), body)
        cleaned, changed = self._json_value(parsed, keys=keys)
        if not changed:
            return body
        separators = (", ", ": ") if b": " in body else (",", ":")
        try:
            return deep_json.dumps(cleaned, separators=separators, ensure_ascii=False).encode()
        except UnicodeEncodeError:  # a lone surrogate (from a \ud800 escape) stays escaped
            return deep_json.dumps(cleaned, separators=separators).encode()

    def clean_bodies(self, bodies: Iterable[bytes]) -> frozenset[bytes]:
        """Those of `bodies` that this redactor leaves as they are when sent as JSON.

        A player passes them to `request`: a live request repeats a recorded body byte for
        byte, and one set lookup then stands for looking through it. They are looked
        through together, joined (what is in one body is in the whole), and one by one only
        when the whole holds a key's shape or a credential-like name.
        """
        unique = frozenset(bodies)
        joined = b"\0".join(unique)
        if shapes.MAY_HOLD_KEY_BYTES.search(joined) is None and not self._may_name_a_secret(
            joined.lower()
        ):
            return unique
        return frozenset(body for body in unique if self._json(body) is body)

    def _may_name_a_secret(self, lowered: bytes) -> bool:
        """Whether a credential-like name (or one the user added) may be in `lowered`."""
        if len(lowered) <= _SHORT_BODY:  # one regular expression costs least
            if self._stems_pattern.search(lowered) is not None:
                return True
        # On a longer body, `in` (once per stem) scans ten times faster than alternatives.
        elif any(stem in lowered for stem in self._stems):
            return True
        # A name may spell a letter as an escape (`"api\u005fkey"`, `"\u0074oken"`).
        # (`in` for one byte is a memchr: a body without a backslash pays next to nothing.)
        return (
            b"\\" in lowered and b"\\u00" in lowered and _ESCAPED_LETTER.search(lowered) is not None
        )

    def _json_value(self, value: Any, *, keys: bool) -> tuple[Any, bool]:
        """`value` (freshly parsed: changed in place) with secrets replaced, and whether
        anything was.

        A loop over an explicit stack, not recursion: a body nested 100,000 deep is walked
        like any other.

        Args:
            keys: the body may hold a key's shape: look for it in every string.
        """
        if isinstance(value, str):
            hidden = hide_shapes(value) if keys else value
            return hidden, hidden is not value
        changed = False
        # Containers to walk, each with whether it is under a credential-like name (then
        # every string in it goes, at any depth: `{"token": {"access": "…"}}`) and the name
        # it is under (a JSON schema's `properties` hold a tool's parameters' names).
        todo: list[tuple[Any, bool, object]] = [(value, False, None)]
        while todo:
            container, secret, parent = todo.pop()
            places: list[tuple[Any, Any, bool]]
            if isinstance(container, dict):
                places = self._fields_of(container, secret=secret, parent=parent)
            else:
                places = [(index, item, secret) for index, item in enumerate(container)]
            for place, item, named in places:
                if isinstance(item, str):
                    hidden = PLACEHOLDER if named else hide_shapes(item) if keys else item
                    if hidden != item:
                        container[place] = hidden
                        changed = True
                elif isinstance(item, (dict, list)):
                    todo.append((item, named, place))
        return value, changed

    def _fields_of(
        self, owner: dict[str, Any], *, secret: bool, parent: object
    ) -> list[tuple[Any, Any, bool]]:
        """The items of JSON object `owner`, each with whether it is secret: by its name, or
        by `owner`'s (`secret`). One call per object, none per item: most bodies are flat."""
        if secret:
            return [(name, item, True) for name, item in owner.items()]
        names = self._field_names
        return [
            (name, item, is_secret(name, names) and _credential(name, item, owner, parent))
            for name, item in owner.items()
        ]
