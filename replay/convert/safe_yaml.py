"""YAML read with a loader of replay's own choosing: plain data, never a Python object.

vcrpy before 8.3 reads cassettes with `yaml.CLoader` (or `yaml.Loader`), which builds any
Python object a tag names: `!!python/object/apply:os.system ["..."]` runs a command. A
cassette is data, so replay never hands its text to vcrpy's reader, whatever vcrpy is
installed: it reads it here with PyYAML's safe loader (the C one when PyYAML has it), which
knows only YAML's own types (`!!binary` included, which vcrpy writes for bytes). The two
tags old vcrpy cassettes carry for text, `!!python/unicode` and `!!python/str`, are read as
the strings they hold; any other tag is refused, naming it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from replay.convert.json_export import MAX_NESTING
from replay.errors import CassetteFormatError

__all__ = ["MAX_EXPANSION", "load_yaml"]

_NESTED = f"values nested more than {MAX_NESTING} deep"

_SafeLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _CassetteLoader(_SafeLoader):  # type: ignore[misc]
    """PyYAML's safe loader, reading the text tags of Python 2-era vcrpy cassettes too."""


def _text(loader: Any, node: Any) -> str:
    return str(loader.construct_scalar(node))


for _tag in ("python/unicode", "python/str"):
    _CassetteLoader.add_constructor(f"tag:yaml.org,2002:{_tag}", _text)


def load_yaml(text: str, path: Path) -> Any:
    """The plain data `text` holds, read without constructing any Python object.

    Raises:
        CassetteFormatError: the text is not YAML, or a tag in it asks for a Python object
            (the message names the tag and its line; nothing was constructed), or it is no
            cassette: it nests past `MAX_NESTING`, its aliases expand it past
            `MAX_EXPANSION` times its size (a "billion laughs"), an alias is recursive,
            or an integer has more digits than Python converts.
    """
    try:
        _check_shape(text, path)
        return yaml.load(text, Loader=_CassetteLoader)
    except ValueError as exc:  # int() of an integer past `sys.get_int_max_str_digits`
        if isinstance(exc, CassetteFormatError):
            raise
        raise CassetteFormatError(path, f"not a cassette: {_first_line(exc)}") from None
    except yaml.constructor.ConstructorError as exc:
        tag = _refused_tag(exc)
        if tag is None:
            raise CassetteFormatError(path, f"not a vcrpy cassette ({_problem(exc)})") from None
        raise CassetteFormatError(
            path,
            f"refused: the YAML tag {tag} at line {_line(exc)} asks to build a Python object, "
            "and a cassette is data only (nothing was run)",
        ) from None
    except yaml.YAMLError as exc:
        raise CassetteFormatError(path, f"not a vcrpy cassette ({_problem(exc)})") from None


#: How many times its own size the data of a YAML text may expand to, with its aliases
#: repeated (a cassette's anchors share a few headers); past it, the aliases of a few
#: kilobytes would make gigabytes of what reads them ("billion laughs").
MAX_EXPANSION = 4
#: What any text may expand to, however small (in characters, with a count per node).
MIN_EXPANDED = 4 * 1024 * 1024


def _check_shape(text: str, path: Path) -> None:
    """Refuse `text` if its nodes nest deeper than `MAX_NESTING`, or expand, aliases
    repeated, past `MAX_EXPANSION` times its size; from its events, before any node is
    composed (composing recurses) or any value built.

    Each node's expanded size (characters of its scalars, plus one per node) is counted
    once, when it ends, and an alias adds its anchor's: linear in the events.
    """
    budget = max(MIN_EXPANDED, MAX_EXPANSION * len(text))
    anchored: dict[str, int] = {}  # the expanded size of each anchor's node
    open_nodes: list[list[Any]] = []  # [anchor, size so far] of each node still open
    opened: set[str] = set()  # their anchors
    total = 0
    for event in yaml.parse(text, Loader=_CassetteLoader):
        if isinstance(event, yaml.CollectionStartEvent):
            if len(open_nodes) >= MAX_NESTING:
                raise CassetteFormatError(path, f"not a cassette: {_NESTED}, line {_at(event)}")
            open_nodes.append([event.anchor, 1])
            opened.add(event.anchor)
            total += 1
            continue
        if isinstance(event, yaml.CollectionEndEvent):
            anchor, size = open_nodes.pop()
            opened.discard(anchor)
        elif isinstance(event, yaml.ScalarEvent):
            anchor, size = event.anchor, 1 + len(event.value)
            total += size
        elif isinstance(event, yaml.AliasEvent):
            anchor, size = None, _aliased(event, anchored, opened, path)
            total += size
        else:
            continue
        if total > budget:
            raise CassetteFormatError(path, _expanded(budget, event))
        if anchor is not None:
            anchored[anchor] = size
        if open_nodes:
            open_nodes[-1][1] += size


def _aliased(event: Any, anchored: dict[str, int], opened: set[str], path: Path) -> int:
    """The expanded size of the node alias `event` repeats (1 for an unknown anchor: the
    composer says what is wrong with it); refused if that node is still open."""
    if event.anchor in opened:
        raise CassetteFormatError(
            path,
            f"not a cassette: the alias *{event.anchor} at line {_at(event)} is inside "
            "the node it names (a value that contains itself)",
        )
    return anchored.get(event.anchor, 1)


def _expanded(budget: int, event: Any) -> str:
    return (
        f"not a cassette: its aliases would expand it past {budget:,} characters, at line "
        f'{_at(event)} (a "billion laughs"): not read'
    )


def _at(event: Any) -> int:
    mark = getattr(event, "start_mark", None)
    return int(mark.line) + 1 if mark is not None else 0


def _first_line(exc: Exception) -> str:
    """The gist of `exc`'s message (Python's advice after a ';' is not the user's)."""
    return str(exc).split(";")[0].splitlines()[0] if str(exc) else type(exc).__name__


def _refused_tag(exc: Any) -> str | None:
    """The tag PyYAML could not construct, shortened (`!!python/object/apply:os.system`)."""
    found = re.search(r"constructor for the tag '([^']*)'", str(getattr(exc, "problem", "")))
    return found[1].replace("tag:yaml.org,2002:", "!!") if found else None


def _line(exc: Any) -> int:
    mark = getattr(exc, "problem_mark", None)
    return int(mark.line) + 1 if mark is not None else 0


def _problem(exc: Any) -> str:
    """One line on why the text did not parse: YAML's problem and its line."""
    problem = getattr(exc, "problem", None)
    if problem and getattr(exc, "problem_mark", None) is not None:
        return f"{problem}, line {_line(exc)}"
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
