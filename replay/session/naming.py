"""Where a test's cassette lives: `<test dir>/cassettes/<module>/<test name>.msgpack`.

Test names carry classes and parametrize ids, which may hold any character; the file name
keeps the readable ones, replaces the rest, and adds a short hash whenever it had to change
or shorten the name, so two different tests never share a file by accident. A key in an id
(`test_x[sk-proj-…]`) becomes a short hash of it (`test_x[REDACTED-1f0c…]`): the file is
found again in the next run, and its name tells nothing of the key.
"""

from __future__ import annotations

import functools
import hashlib
import re
from pathlib import Path

from replay.redact.shapes import hash_shapes

__all__ = ["cassette_file_name", "default_cassette_path", "resolve_cassette_path"]

SUFFIX = ".msgpack"
_MAX_STEM = 120
_UNSAFE = re.compile(r"[^A-Za-z0-9._\-\[\]=,+@]")


def cassette_file_name(test_name: str) -> str:
    """A portable file name for the cassette of `test_name` (e.g. `TestA.test_b[x-1]`)."""
    shown = hash_shapes(test_name)  # (a name without a key is left as it was, and its file)
    stem = _UNSAFE.sub("_", shown).strip(". ") or "cassette"
    if stem != shown or len(stem) > _MAX_STEM:
        digest = hashlib.sha1(shown.encode()).hexdigest()[:10]
        stem = f"{stem[: _MAX_STEM - 11]}-{digest}"
    return stem + SUFFIX


def _base(test_file: Path, directory: str | Path | None, rootpath: Path | None) -> Path:
    if directory is None:
        return test_file.parent / "cassettes"
    directory = Path(directory)
    if not directory.is_absolute() and rootpath is not None:
        directory = rootpath / directory
    return directory


def default_cassette_path(
    test_file: Path,
    nodeid: str,
    directory: str | Path | None = None,
    rootpath: Path | None = None,
) -> Path:
    """The default cassette of the test `nodeid` defined in `test_file`.

    Args:
        test_file: the test module's path.
        nodeid: pytest's node id (`tests/test_x.py::TestA::test_b[param]`).
        directory: the cassette directory instead of `cassettes/` beside the test file
            (relative to `rootpath`).
    """
    test_name = ".".join(nodeid.split("::")[1:]) or test_file.stem
    return _folder(test_file, directory, rootpath) / cassette_file_name(test_name)


@functools.lru_cache(maxsize=64)
def _folder(test_file: Path, directory: str | Path | None, rootpath: Path | None) -> Path:
    # The same for every test of a module: worked out once (a suite asks for each test).
    return _base(test_file, directory, rootpath) / test_file.stem


def resolve_cassette_path(
    value: str | Path,
    test_file: Path,
    directory: str | Path | None = None,
    rootpath: Path | None = None,
) -> Path:
    """The cassette a test names, in any form (the marker, the library's decorator or `with`,
    inside a test): a bare name goes beside the defaults, a relative path is relative to the
    test file, an absolute path stays."""
    path = Path(value)
    if path.is_absolute():
        return path
    if len(path.parts) == 1:
        name = path.name if path.suffix else path.name + SUFFIX
        return _base(test_file, directory, rootpath) / test_file.stem / name
    return test_file.parent / path
