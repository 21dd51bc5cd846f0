"""pydantic-ai's cassette serializer, undone: `parsed_body` back to the body it stood for.

pydantic-ai's tests write vcrpy cassettes through their own serializer: a JSON body (request
or response, by content type) is stored parsed, as `parsed_body`, in place of `body`, and
other bodies as YAML literal text. Its deserializer turns `parsed_body` back into
`json.dumps(parsed_body)`, which is what its tests replay; this module does exactly the same,
so a converted cassette holds the bytes pydantic-ai itself would have played.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["PARSED_BODY", "ParsedBodyError", "unparse_bodies"]

PARSED_BODY = "parsed_body"


class ParsedBodyError(ValueError):
    """A `parsed_body` that no JSON text stands for (the message names the place)."""


def unparse_bodies(interactions: list[Any]) -> bool:
    """Turn each `parsed_body` of a vcrpy document's interactions back into a `body`, in place.

    As pydantic-ai's deserializer: a request's body is the JSON text, a response's is
    `{"string": text}`. Entries that are not mappings are left for the caller to refuse.

    Returns:
        Whether any `parsed_body` was found (the cassette was written by pydantic-ai).

    Raises:
        ParsedBodyError: a `parsed_body` holds what JSON cannot (a YAML date, a set...).
    """
    found = False
    for i, item in enumerate(interactions):
        if not isinstance(item, dict):
            continue
        for kind in ("request", "response"):
            data = item.get(kind)
            if not isinstance(data, dict) or PARSED_BODY not in data:
                continue
            found = True  # a `null` one too, which pydantic-ai drops: its body was `null`
            text = _dumped(data.pop(PARSED_BODY), f"interactions[{i}].{kind}.{PARSED_BODY}")
            data["body"] = {"string": text} if kind == "response" else text
    return found


def _dumped(parsed: Any, where: str) -> str:
    try:
        return json.dumps(parsed)  # pydantic-ai's own spelling: default separators, ASCII
    except (TypeError, ValueError) as exc:
        raise ParsedBodyError(f"{where}: not JSON ({exc})") from exc
