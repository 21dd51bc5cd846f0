"""Cassettes in other formats: vcrpy's YAML (both ways) and a JSON export (both ways).

vcrpy keeps no timing and no stream ends, so a vcrpy cassette becomes one chunk per
response at 0 s; a replay cassette loses its timing and stream errors on the way out.
The JSON export carries every byte and every time, so it converts back losslessly.

This module owns the files (read as UTF-8, written atomically) and picks a format by
suffix; the formats themselves, text to values and back, are `replay._vcrpy` (laid out
exactly as vcrpy's httpx stub records) and `replay._json_export` (bytes spelled as text).
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from replay._json_export import (
    JSON_FORMAT_NAME,
    JSON_FORMAT_VERSION,
    export_json,
    import_document,
    import_json,
    parse_json,
)
from replay._vcrpy import from_vcr_text, to_vcr_text
from replay.errors import CassetteFormatError, ConfigurationError
from replay.model import Interaction
from replay.store import load_interactions, save_interactions

__all__ = [
    "JSON_FORMAT_NAME",
    "JSON_FORMAT_VERSION",
    "convert",
    "export_json",
    "import_json",
    "load_vcr",
    "save_vcr",
]

Reader = Callable[[Path], list[Interaction]]
Writer = Callable[[Path, Sequence[Interaction]], None]
_T = TypeVar("_T")

_SUFFIXES = ".msgpack (replay), .yaml or .yml (vcrpy), .json (export)"


def convert(src: str | Path, dst: str | Path) -> int:
    """Convert the cassette `src` into `dst`, each format chosen by its file's suffix.

    Suffixes: `.msgpack` (replay's format), `.yaml` / `.yml` (vcrpy), `.json` (replay's
    JSON export; a vcrpy JSON cassette is also read). `dst` is replaced if it exists.

    Returns:
        The number of interactions converted.

    Raises:
        ConfigurationError: a suffix names no format.
        FileNotFoundError: there is no `src`.
        CassetteFormatError: `src` is not a cassette of the format its suffix names.
    """
    src, dst = Path(src), Path(dst)
    reader = _by_suffix(src, _READERS)
    writer = _by_suffix(dst, _WRITERS)
    interactions = reader(src)
    writer(dst, interactions)
    return len(interactions)


def _by_suffix(path: Path, table: dict[str, _T]) -> _T:
    try:
        return table[path.suffix.lower()]
    except KeyError:
        raise ConfigurationError(
            f"cannot tell the format of {str(path)!r} from its suffix "
            f"{path.suffix or '(none)'!r}: use {_SUFFIXES}"
        ) from None


# -- the formats -------------------------------------------------------------------------------


def _read_json(path: Path) -> list[Interaction]:
    text = _read_text(path)
    document = parse_json(text, path)
    if isinstance(document, dict) and "format" not in document and "interactions" in document:
        from vcr.serializers import jsonserializer

        return from_vcr_text(text, jsonserializer, path)  # a cassette of vcrpy's JSON serializer
    return import_document(document, path)


def _write_json(path: Path, interactions: Sequence[Interaction]) -> None:
    _write_atomically(path, export_json(interactions).encode("utf-8"))


def save_vcr(path: str | Path, interactions: Sequence[Interaction]) -> None:
    """Write the interactions as a vcrpy YAML cassette (atomically), with vcrpy's serializer.

    Each body is written whole, as recorded (compressed bodies stay compressed, with their
    `Content-Encoding` header); timing and stream errors have no place in vcrpy's format.
    """
    from vcr.serializers import yamlserializer

    text = to_vcr_text(interactions, yamlserializer)
    _write_atomically(Path(path), text.encode("utf-8"))


def load_vcr(path: str | Path) -> list[Interaction]:
    """Read a vcrpy YAML cassette, with vcrpy's own (safe) loader.

    Each response becomes one chunk at 0 s with its end at 0 s: vcrpy records no timing.

    Raises:
        FileNotFoundError: there is no such file.
        CassetteFormatError: the file is not a vcrpy cassette.
    """
    from vcr.serializers import yamlserializer

    path = Path(path)
    return from_vcr_text(_read_text(path), yamlserializer, path)


# -- files -------------------------------------------------------------------------------------


def _read_text(path: Path) -> str:
    data = path.read_bytes()
    if not data.strip():
        raise CassetteFormatError(path, "the file is empty")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CassetteFormatError(
            path, f"not UTF-8 text ({exc.reason} at byte {exc.start})"
        ) from exc


def _write_atomically(path: Path, data: bytes) -> None:
    """Write beside `path`, then rename over it: a failure never leaves half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    try:
        with open(temporary, "xb") as file:  # a new file: the umask applies
            file.write(data)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


_READERS: dict[str, Reader] = {
    ".msgpack": load_interactions,
    ".yaml": load_vcr,
    ".yml": load_vcr,
    ".json": _read_json,
}
_WRITERS: dict[str, Writer] = {
    ".msgpack": save_interactions,
    ".yaml": save_vcr,
    ".yml": save_vcr,
    ".json": _write_json,
}
