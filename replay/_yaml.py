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

from replay.errors import CassetteFormatError

__all__ = ["load_yaml"]

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
            (the message names the tag and its line; nothing was constructed).
    """
    try:
        return yaml.load(text, Loader=_CassetteLoader)
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
