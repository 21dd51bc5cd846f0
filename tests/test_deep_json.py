"""`replay.redact.deep_json`: the standard library's JSON reading and writing, at any depth."""

from __future__ import annotations

import json

import pytest

from replay.redact import deep_json
from replay.redact.deep_json import Reader

VALUES = [
    pytest.param({}, id="empty-object"),
    pytest.param([], id="empty-list"),
    pytest.param({"a": [1, -2.5, 1e300, True, False, None], "b": {"c": ""}}, id="mixed"),
    pytest.param({"é": '\u00e9\n"\\\ud83d\ude00', "z": [[], {}, [{}]]}, id="escapes"),
    pytest.param([{"b": 1, "a": [2, {"d": 3, "c": 4}]}], id="names-to-sort"),
    pytest.param("text", id="a-string-alone"),
]


@pytest.mark.parametrize("value", VALUES)
@pytest.mark.parametrize("separators", [(",", ":"), (", ", ": ")], ids=["compact", "spaced"])
def test_the_explicit_stack_reads_what_json_loads_reads(
    value: object, separators: tuple[str, str]
) -> None:
    for text in (json.dumps(value, separators=separators), json.dumps(value, indent=2)):
        assert Reader(text).value() == json.loads(text)


@pytest.mark.parametrize("value", VALUES)
@pytest.mark.parametrize("ensure_ascii", [True, False])
@pytest.mark.parametrize("sort_keys", [True, False])
def test_the_explicit_stack_writes_what_json_dumps_writes(
    value: object, ensure_ascii: bool, sort_keys: bool
) -> None:
    options = {"separators": (", ", ": "), "ensure_ascii": ensure_ascii, "sort_keys": sort_keys}
    # A value nested too deep for `json.dumps` takes the explicit stack: the same text.
    deep: object = value
    for _ in range(5000):
        deep = [deep]
    expected = "[" * 5000 + json.dumps(value, **options) + "]" * 5000  # type: ignore[arg-type]

    assert deep_json.dumps(deep, **options) == expected  # type: ignore[arg-type]


@pytest.mark.parametrize("depth", [10, 100_000])
def test_loads_and_dumps_go_back_and_forth_at_any_depth(depth: int) -> None:
    text = '{"a": ' * depth + '["x", 1]' + "}" * depth

    assert deep_json.dumps(deep_json.loads(text), separators=(", ", ": ")) == text
    assert deep_json.dumps(deep_json.loads(text.encode()), separators=(", ", ": ")) == text


@pytest.mark.parametrize(
    "text", ["", "[", "[1,]", '{"a" 1}', "[1] x", "{1: 2}", "[1 2]", '{"a": 1,}', "nul", "]"]
)
def test_what_is_not_json_is_a_value_error_at_any_depth(text: str) -> None:
    with pytest.raises(json.JSONDecodeError):
        Reader(text).value()
    with pytest.raises(json.JSONDecodeError):  # (the comma: an empty text there is no item)
        deep_json.loads("[" * 100_000 + "0, " + text + "]" * 100_000)
