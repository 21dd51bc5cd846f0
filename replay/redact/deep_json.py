"""JSON read and written at any depth: `json.loads` and `json.dumps`, and where they stop.

Both of the standard library's recurse once per level of nesting, and give up with a
`RecursionError` past about a thousand levels (fewer, the deeper the caller's stack). A
request body is untrusted input, and redaction and matching must read any of them: these
functions call the standard ones (in C, fast) and, only when a value is nested too deep for
them, do the same work with an explicit stack instead. The result is the same value and the
same text either way, so what is stored and what is matched does not depend on the depth of
the stack that read it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

__all__ = ["dumps", "loads"]

_DECODER = json.JSONDecoder()
#: Scans one value at an index; used here for the values that nest nothing.
_SCAN: Callable[[str, int], tuple[object, int]] = _DECODER.scan_once  # type: ignore[attr-defined]
#: Reads a string's text from past its opening quote (typeshed does not declare it).
_STRING: Callable[[str, int], tuple[str, int]] = json.decoder.scanstring  # type: ignore[attr-defined]
_SPACES = re.compile(r"[ \t\n\r]*")
_CLOSING = {"{": "}", "[": "]"}


def loads(text: str | bytes) -> Any:
    """`json.loads(text)`, at any depth.

    Raises:
        ValueError: `text` is not JSON (`json.JSONDecodeError`, or `UnicodeDecodeError`).
    """
    try:
        return json.loads(text)
    except RecursionError:
        pass
    if isinstance(text, bytes):
        text = text.decode(json.detect_encoding(text), "surrogatepass")
    return Reader(text).value()


class Reader:
    """One JSON text read with an explicit stack of the containers still open."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.at = _SPACES.match(text, 0).end()  # type: ignore[union-attr]
        self.open: list[tuple[dict[str, Any] | list[Any], str]] = []  # (container, its name)

    def value(self) -> Any:
        while True:
            value = self._next()
            while value is not _OPENED:
                if not self.open:
                    if _SPACES.match(self.text, self.at).end() != len(self.text):  # type: ignore[union-attr]
                        self._fail("Extra data")
                    return value
                value = self._add(value)

    def _next(self) -> Any:
        """The value at `at`, or `_OPENED` when it is a container with items to read."""
        text, start = self.text, self.at
        opening = text[start : start + 1]
        if opening not in _CLOSING:
            try:
                value, self.at = _SCAN(text, start)
            except StopIteration:
                self._fail("Expecting value")
            return value
        self.at = self._skip(start + 1)
        container: dict[str, Any] | list[Any] = {} if opening == "{" else []
        if text[self.at : self.at + 1] == _CLOSING[opening]:
            self.at += 1
            return container
        self.open.append((container, self._name() if opening == "{" else ""))
        return _OPENED

    def _add(self, value: Any) -> Any:
        """Put `value` in the innermost open container; what that container then adds to
        its own (itself, when it closes), or `_OPENED` when another item follows."""
        container, name = self.open[-1]
        if isinstance(container, dict):
            container[name] = value
        else:
            container.append(value)
        self.at = self._skip(self.at)
        separator = self.text[self.at : self.at + 1]
        self.at += 1
        if separator == ",":
            self.at = self._skip(self.at)
            if isinstance(container, dict):
                self.open[-1] = (container, self._name())
            return _OPENED
        if separator != ("}" if isinstance(container, dict) else "]"):
            self._fail("Expecting ',' delimiter")
        self.open.pop()
        return container

    def _name(self) -> str:
        """The name of an object's item at `at`, and past its colon."""
        if self.text[self.at : self.at + 1] != '"':
            self._fail("Expecting property name enclosed in double quotes")
        name, end = _STRING(self.text, self.at + 1)
        self.at = self._skip(end)
        if self.text[self.at : self.at + 1] != ":":
            self._fail("Expecting ':' delimiter")
        self.at = self._skip(self.at + 1)
        return name

    def _skip(self, at: int) -> int:
        return _SPACES.match(self.text, at).end()  # type: ignore[union-attr]

    def _fail(self, message: str) -> Any:
        raise json.JSONDecodeError(message, self.text, min(self.at, len(self.text)))


#: What `Reader._next` returns for a container left open (no JSON value is this object).
_OPENED: Any = object()


def dumps(
    value: Any,
    *,
    separators: tuple[str, str],
    ensure_ascii: bool = True,
    sort_keys: bool = False,
) -> str:
    """`json.dumps(value, ...)` with these options, at any depth."""
    try:
        return json.dumps(
            value, separators=separators, ensure_ascii=ensure_ascii, sort_keys=sort_keys
        )
    except RecursionError:
        pass
    item_separator, name_separator = separators
    scalar = json.JSONEncoder(ensure_ascii=ensure_ascii).encode
    parts: list[str] = []
    # What is left to write, last first: a value, or a tuple holding text to write as is
    # (`json.loads` makes no tuple).
    todo: list[Any] = [value]
    while todo:
        item = todo.pop()
        if isinstance(item, tuple):
            parts.append(item[0])
        elif isinstance(item, dict):
            pieces: list[Any] = [("{",)]
            for number, (name, inner) in enumerate(
                sorted(item.items()) if sort_keys else item.items()
            ):
                pieces += [(item_separator,)] if number else []
                pieces += [(scalar(name) + name_separator,), inner]
            todo += reversed([*pieces, ("}",)])
        elif isinstance(item, list):
            pieces = [("[",)]
            for number, inner in enumerate(item):
                pieces += [(item_separator,), inner] if number else [inner]
            todo += reversed([*pieces, ("]",)])
        else:
            parts.append(scalar(item))
    return "".join(parts)
