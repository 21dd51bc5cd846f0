"""A tree of vcrpy cassettes (a pytest-recording suite's) made replay's, each file reported.

Each vcrpy cassette (`*.yaml`, `*.yml`, vcrpy JSON; gzip-compressed too) is converted by
`replay.convert.files.convert` into a replay cassette beside it, named as replay names a
test's cassette (`replay.session.naming.cassette_file_name` of pytest-recording's name: the
directory layout, `cassettes/<module>/`, is the same). The originals are kept, so that
pytest-recording can still run the suite during the move.

Each converted cassette is marked with the matching it was recorded under (vcrpy's default,
method + URI, or what `--match-on` says the suite's `vcr_config` asked for): a small JSON file
beside it, `<name>.match_on.json`. The pytest-recording surface replay serves
(`replay.plugin.vcr_compat`) replays a marked cassette under that matching, so that a request
whose body drifted since the recording still finds its answer; recording the cassette again
(record mode `all` or `rewrite`) removes the mark, and the cassette moves to replay's default
matching (the body included).
"""

from __future__ import annotations

import errno
import json
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

import attrs

from replay.convert.files import convert, read_cassette
from replay.errors import CassetteFormatError, ConfigurationError
from replay.session.naming import cassette_file_name

__all__ = [
    "MARK_SUFFIX",
    "VCRPY_MATCH_ON",
    "Migrated",
    "mark",
    "mark_path",
    "migrate_tree",
    "recorded_under",
    "unmark",
]

#: vcrpy's default `match_on`: what a cassette recorded without one was matched on.
VCRPY_MATCH_ON: tuple[str, ...] = ("method", "scheme", "host", "port", "path", "query")
#: The mark beside a migrated cassette `x.msgpack`: `x.match_on.json`.
MARK_SUFFIX = ".match_on.json"

_TEXT_SUFFIXES = (".yaml", ".yml", ".json")
_SKIPPED_DIRS = frozenset({"__pycache__", "node_modules", "site-packages"})


@attrs.frozen
class Migrated:
    """What `migrate_tree` did with one file.

    Attributes:
        source: the vcrpy cassette (or the file that turned out not to be one).
        target: the replay cassette written, or that would have been.
        status: "converted", "exists" (the target was there already: kept), "skipped" (not
            a vcrpy cassette) or "failed" (a vcrpy cassette that could not be read).
        interactions: how many the cassette holds.
        source_format: the variant read ("vcrpy YAML"...), "" when none was.
        note: why it was skipped or failed, "" otherwise.
    """

    source: Path
    target: Path
    status: str
    interactions: int = 0
    source_format: str = ""
    note: str = ""


def mark_path(cassette: str | Path) -> Path:
    """The mark of the cassette `cassette` (`x.msgpack` → `x.match_on.json`)."""
    path = Path(cassette)
    return path.with_name(path.name.removesuffix(".msgpack") + MARK_SUFFIX)


def mark(cassette: str | Path, match_on: Sequence[str], source: str = "") -> None:
    """Mark `cassette` as recorded under `match_on` (by vcrpy, from `source`)."""
    document = {"recorded_by": "vcrpy", "match_on": list(match_on), "source": source}
    mark_path(cassette).write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")


def recorded_under(cassette: str | Path) -> tuple[str, ...] | None:
    """The matching `cassette` was recorded under, if a migration marked it; else None.

    Raises:
        CassetteFormatError: the mark is there, but not one `mark` writes.
    """
    path = mark_path(cassette)
    try:
        if path.stat().st_size > 64 * 1024:  # (a mark names a few matchers)
            raise CassetteFormatError(path, "not a mark of `replay migrate` (too large)")
        text = path.read_bytes()
    except (FileNotFoundError, NotADirectoryError):
        return None
    try:  # (ValueError: not UTF-8 JSON; RecursionError: nested too deep to be a mark)
        names = json.loads(text.decode("utf-8"))["match_on"]
    except (ValueError, KeyError, TypeError, RecursionError) as exc:
        raise CassetteFormatError(path, "not a mark of `replay migrate` (no match_on)") from exc
    if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
        raise CassetteFormatError(path, "match_on: expected a list of matcher names")
    return tuple(names)


def unmark(cassette: str | Path) -> bool:
    """Remove `cassette`'s mark: it now matches as replay does. Whether there was one."""
    try:
        mark_path(cassette).unlink()
    except FileNotFoundError:
        return False
    return True


def _stem(path: Path) -> str | None:
    """The cassette name of a vcrpy file (`test_a.yaml.gz` → `test_a`), None for other files
    (a migration's own marks, `x.match_on.json`, included)."""
    name = path.name
    if name.endswith(MARK_SUFFIX):
        return None
    plain = name.removesuffix(".gz")
    for suffix in _TEXT_SUFFIXES:
        if plain.lower().endswith(suffix) and len(plain) > len(suffix):
            return plain[: -len(suffix)]
    return None


def _candidates(root: Path) -> Iterator[Path]:
    """The text cassette files under `root` (a file itself, or a tree), in a stable order."""
    if root.is_file():
        yield root
        return
    for directory, subdirectories, files in os.walk(root):
        subdirectories[:] = sorted(
            d for d in subdirectories if not d.startswith(".") and d not in _SKIPPED_DIRS
        )
        for name in sorted(files):
            path = Path(directory) / name
            if _stem(path) is not None:
                yield path


def _not_vcrpy(problem: str) -> bool:
    """Whether a refusal says the file is something else (not a damaged vcrpy cassette): a
    YAML document of another shape is; a file that does not parse as YAML is a failure."""
    other = ("not a vcrpy cassette (expected a mapping", "a Ruby VCR", "neither a replay JSON")
    return problem.startswith(other)


def migrate_tree(
    root: str | Path,
    *,
    match_on: Sequence[str] = VCRPY_MATCH_ON,
    overwrite: bool = False,
) -> list[Migrated]:
    """Convert every vcrpy cassette under `root` into a replay cassette beside it, marked.

    Args:
        root: a directory (searched recursively, hidden directories left out) or one file.
        match_on: the matching the cassettes were recorded under (vcrpy's default, or the
            suite's `vcr_config["match_on"]`): matcher names.
        overwrite: replace a replay cassette already there (else it is kept, and reported).

    Returns:
        One `Migrated` per file looked at, in path order.

    Raises:
        FileNotFoundError: there is no `root`.
        ConfigurationError: `match_on` names a matcher replay does not know.
    """
    from replay.matching import MatchIndex

    root = Path(root)
    if not root.exists():
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT).lower(), str(root))
    MatchIndex([], match_on=tuple(match_on))  # unknown names refused before any file is written
    return [_migrate_one(path, tuple(match_on), overwrite) for path in _candidates(root)]


def _migrate_one(source: Path, match_on: tuple[str, ...], overwrite: bool) -> Migrated:
    stem = _stem(source)
    if stem is None:  # named as no vcrpy cassette is (a replay cassette itself, a mark...)
        return Migrated(source, source, "skipped", note="not a vcrpy cassette")
    target = source.with_name(cassette_file_name(stem))
    try:
        if source.name.lower().removesuffix(".gz").endswith(".json"):
            found = read_cassette(source).source_format  # a replay JSON export is not migrated
            if "vcrpy" not in found:
                return Migrated(source, target, "skipped", note=f"a {found}, not vcrpy's")
        if target.exists() and not overwrite:
            return Migrated(source, target, "exists", note="kept (--force replaces it)")
        read = convert(source, target, overwrite=overwrite)
    except CassetteFormatError as error:
        status = "skipped" if _not_vcrpy(error.problem) else "failed"
        return Migrated(source, target, status, note=error.problem)
    except (ConfigurationError, OSError) as error:
        return Migrated(source, target, "failed", note=str(error))
    mark(target, match_on, source.name)
    return Migrated(source, target, "converted", len(read.interactions), read.source_format)
