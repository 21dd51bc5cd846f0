"""Small makers the synthetic streams of every dialect share: word-ish tokens, stable ids,
a JSON Schema for a tool's arguments. (`replay.dialects.common` offers them too.)"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping

__all__ = ["json_schema", "stable_id", "tokenize"]

_TOKEN = re.compile(r"\s*(?:\w+|[^\w\s]+)|\s+")  # a word or a punctuation run, with its space


def tokenize(text: str) -> list[str]:
    """Cut `text` into word-ish pieces that join back to it ("Hello", " there", ",")."""
    return _TOKEN.findall(text)


def stable_id(prefix: str, *parts: object) -> str:
    """A reproducible id: `prefix` and 24 hex digits of a hash of `parts`."""
    digest = hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()
    return prefix + digest[:24]


_JSON_TYPES: tuple[tuple[type, str], ...] = (
    (bool, "boolean"),
    (int, "integer"),
    (float, "number"),
    (str, "string"),
    (list, "array"),
    (dict, "object"),
)


def json_schema(arguments: Mapping[str, object]) -> dict[str, object]:
    """A plausible JSON Schema for a function taking `arguments` (every field required)."""
    properties = {
        name: {"type": next((kind for cls, kind in _JSON_TYPES if isinstance(v, cls)), "null")}
        for name, v in arguments.items()
    }
    return {
        "type": "object",
        "properties": properties,
        "required": list(arguments),
        "additionalProperties": False,
    }
