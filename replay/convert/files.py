"""Cassettes in other formats: vcrpy's YAML and JSON (both ways) and a JSON export (both ways).

vcrpy keeps no timing and no stream ends, so a vcrpy cassette becomes one chunk per
response at 0 s; a replay cassette loses its timing and stream errors on the way out.
The JSON export carries every byte and every time, so it converts back losslessly.

This module owns the files (read as UTF-8, gzip-compressed when named `.gz` or when the
bytes say so, written atomically) and picks a format by suffix; the formats themselves,
text to values and back, are `replay.convert.vcrpy_yaml` (laid out exactly as vcrpy's httpx stub
records, and read as vcrpy or pydantic-ai's serializer wrote them) and
`replay.convert.json_export` (bytes spelled as text). What was read is named, so that a user
sees which variant a file turned out to be.
"""

from __future__ import annotations

import gzip
import io
import zlib
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import attrs

from replay.convert.json_export import (
    JSON_FORMAT_NAME,
    JSON_FORMAT_VERSION,
    export_json,
    import_document,
    import_json,
    parse_json,
)
from replay.convert.safe_yaml import load_yaml
from replay.convert.vcrpy_yaml import from_vcr_document, to_vcr_text
from replay.errors import CassetteFormatError, ConfigurationError
from replay.model import Interaction
from replay.redact.redactor import Redactor
from replay.store.atomic import write_atomically
from replay.store.file import load_interactions, save_interactions

__all__ = [
    "JSON_FORMAT_NAME",
    "JSON_FORMAT_VERSION",
    "MAX_INFLATED_BYTES",
    "SourceCassette",
    "convert",
    "export_json",
    "import_json",
    "load_vcr",
    "read_cassette",
    "save_vcr",
    "with_convert_hint",
]

MAX_INFLATED_BYTES = 128 * 2**20
"""A gzip-compressed cassette that inflates past this is refused (a bomb, not a cassette)."""

_GZIP_MAGIC = b"\x1f\x8b"
_SUFFIXES = (
    ".msgpack (replay), .yaml or .yml (vcrpy), .json (export or vcrpy), "
    "each but .msgpack also gzip-compressed as .yaml.gz, .yml.gz or .json.gz"
)

TextReader = Callable[[str, Path], tuple[list[Interaction], str]]


def _interaction_tuple(interactions: Iterable[Interaction]) -> tuple[Interaction, ...]:
    return tuple(interactions)


@attrs.frozen
class SourceCassette:
    """A cassette file as read: its interactions, and which format the file turned out to be.

    Attributes:
        interactions: what the file holds, in order.
        source_format: the variant read, for people: "vcrpy YAML", "vcrpy YAML (pydantic-ai
            serializer)", "gzip-compressed vcrpy JSON", "replay JSON export", "replay msgpack".
    """

    interactions: tuple[Interaction, ...] = attrs.field(converter=_interaction_tuple)
    source_format: str


def convert(src: str | Path, dst: str | Path, *, overwrite: bool = False) -> SourceCassette:
    """Convert the cassette `src` into `dst`, each format chosen by its file's suffix.

    Suffixes: `.msgpack` (replay's format), `.yaml` / `.yml` (vcrpy, or pydantic-ai's
    serializer), `.json` (replay's JSON export, or a vcrpy JSON cassette); the text formats
    may be gzip-compressed, named `.yaml.gz` and so on. What is written is redacted as
    replay redacts what it records (a vcrpy cassette may hold credentials).

    Args:
        overwrite: replace `dst` if it exists. Off by default: a converted cassette may hold
            less than the one it would replace (a vcrpy cassette has no timing).

    Returns:
        The source as read (see `read_cassette`): its interactions and the variant it was.

    Raises:
        ConfigurationError: a suffix names no format.
        FileNotFoundError: there is no `src`.
        FileExistsError: `dst` exists, and `overwrite` is not set.
        CassetteFormatError: `src` is not a cassette of the format its suffix names.
    """
    src, dst = Path(src), Path(dst)
    suffix, compressed = _format_of(dst)  # before reading: a bad destination wastes nothing
    if dst.exists() and not overwrite:
        raise FileExistsError(f"{dst} already exists: pass overwrite=True to replace it")
    source = read_cassette(src)
    # A cassette recorded by another tool may hold credentials: what is written is redacted
    # as replay redacts what it records.
    redactor = Redactor()
    interactions = [
        redactor.interaction(interaction) or interaction for interaction in source.interactions
    ]
    if suffix == ".msgpack":
        save_interactions(dst, interactions)
    else:
        data = _TEXT_WRITERS[suffix](interactions).encode("utf-8")
        write_atomically(dst, gzip.compress(data, mtime=0) if compressed else data)
    return source


def read_cassette(
    path: str | Path, *, max_inflated_bytes: int = MAX_INFLATED_BYTES
) -> SourceCassette:
    """Read a cassette of any format `convert` reads, by its suffix, and say which it was.

    Args:
        path: the file.
        max_inflated_bytes: a gzip-compressed file that inflates past this is refused.

    Raises:
        ConfigurationError: the suffix names no format.
        FileNotFoundError: there is no such file.
        CassetteFormatError: the file is not a cassette of the format its suffix names (or
            gzip data that is damaged, or inflates past `max_inflated_bytes`).
    """
    path = Path(path)
    suffix, compressed = _format_of(path)
    if suffix == ".msgpack":
        return SourceCassette(load_interactions(path), "replay msgpack")
    text, gzipped = _read_text(path, compressed, max_inflated_bytes)
    interactions, name = _TEXT_READERS[suffix](text, path)
    return SourceCassette(interactions, f"gzip-compressed {name}" if gzipped else name)


def _format_of(path: Path) -> tuple[str, bool]:
    """The format suffix of `path` (`.yaml`...) and whether it names gzip (`.yaml.gz`)."""
    name = path.name.lower()
    compressed = name.endswith(".gz")
    suffix = Path(name[: -len(".gz")]).suffix if compressed else path.suffix.lower()
    known = set(_TEXT_READERS) if compressed else {".msgpack", *_TEXT_READERS}
    if suffix not in known:
        shown = suffix + ".gz" if compressed else suffix
        raise ConfigurationError(
            f"cannot tell the format of {str(path)!r} from its suffix "
            f"{shown or '(none)'!r}: use {_SUFFIXES}"
        )
    return suffix, compressed


# -- the formats -------------------------------------------------------------------------------


def _from_yaml(text: str, path: Path) -> tuple[list[Interaction], str]:
    interactions, writer = from_vcr_document(load_yaml(text, path), path)
    return interactions, "vcrpy YAML" + (f" ({writer})" if writer else "")


def _from_json(text: str, path: Path) -> tuple[list[Interaction], str]:
    document = parse_json(text, path)
    if isinstance(document, dict) and "format" in document:
        return import_document(document, path), "replay JSON export"
    if isinstance(document, list) or (
        isinstance(document, dict) and {"interactions", "http_interactions"} & set(document)
    ):
        interactions, writer = from_vcr_document(document, path)
        return interactions, "vcrpy JSON" + (f" ({writer})" if writer else "")
    raise CassetteFormatError(
        path,
        "neither a replay JSON export (no 'format') nor a vcrpy cassette (no 'interactions')",
    )


def _to_yaml(interactions: Sequence[Interaction]) -> str:
    from vcr.serializers import yamlserializer

    return to_vcr_text(interactions, yamlserializer)


def save_vcr(path: str | Path, interactions: Sequence[Interaction]) -> None:
    """Write the interactions as a vcrpy YAML cassette (atomically), with vcrpy's serializer.

    Each body is written whole, as recorded (compressed bodies stay compressed, with their
    `Content-Encoding` header); timing and stream errors have no place in vcrpy's format.
    """
    write_atomically(Path(path), _to_yaml(interactions).encode("utf-8"))


def load_vcr(path: str | Path) -> list[Interaction]:
    """Read a vcrpy YAML cassette (gzip-compressed too), with a safe loader
    (`replay.convert.safe_yaml`).

    Each response becomes one chunk at 0 s with its end at 0 s: vcrpy records no timing. A
    cassette of pydantic-ai's serializer is read as pydantic-ai reads it.

    Raises:
        FileNotFoundError: there is no such file.
        CassetteFormatError: the file is not a vcrpy cassette.
    """
    path = Path(path)
    text, _gzipped = _read_text(path, path.name.lower().endswith(".gz"), MAX_INFLATED_BYTES)
    return _from_yaml(text, path)[0]


def with_convert_hint(path: Path, error: CassetteFormatError) -> CassetteFormatError:
    """`error` (reading `path` as a replay cassette) with the command that converts it, when
    `path` is named as a vcrpy or JSON cassette; else `error` itself."""
    plain = path.name.lower().removesuffix(".gz")
    if not plain.endswith((".yaml", ".yml", ".json")):
        return error
    target = Path(str(path)[: -len(".gz")] if path.name.endswith(".gz") else path)
    return CassetteFormatError(
        path,
        f"{error.problem}; a vcrpy or JSON cassette? Convert it first: "
        f"replay convert {path} {target.with_suffix('.msgpack')} (a pytest-recording suite's, "
        f"all at once: replay migrate {path.parent})",
    )


# -- files -------------------------------------------------------------------------------------


def _read_text(path: Path, compressed: bool, limit: int) -> tuple[str, bool]:
    """The file's text, inflated first if it is gzip data; and whether it was."""
    data = path.read_bytes()
    gzipped = data.startswith(_GZIP_MAGIC)
    if compressed and not gzipped and data.strip():
        raise CassetteFormatError(path, "named .gz, but not gzip-compressed data")
    if gzipped:
        data = _gunzip(data, path, limit)
    if not data.strip():
        raise CassetteFormatError(path, "the file is empty")
    try:
        return data.decode("utf-8"), gzipped
    except UnicodeDecodeError as exc:
        raise CassetteFormatError(
            path, f"not UTF-8 text ({exc.reason} at byte {exc.start})"
        ) from exc


def _gunzip(data: bytes, path: Path, limit: int) -> bytes:
    """Inflate gzip `data`, every member, refusing what inflates past `limit` bytes."""
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(data)) as file:
            inflated = file.read(limit + 1)  # bounded: a bomb stops here
    except EOFError as exc:
        raise CassetteFormatError(path, "the gzip data ends too early (truncated?)") from exc
    except (OSError, zlib.error) as exc:  # gzip.BadGzipFile is an OSError
        raise CassetteFormatError(path, f"damaged gzip data ({exc})") from exc
    if len(inflated) > limit:
        raise CassetteFormatError(
            path, f"the gzip data inflates past {limit:,} bytes (a gzip bomb?): not read"
        )
    return inflated


_TEXT_READERS: dict[str, TextReader] = {
    ".yaml": _from_yaml,
    ".yml": _from_yaml,
    ".json": _from_json,
}
_TEXT_WRITERS: dict[str, Callable[[Sequence[Interaction]], str]] = {
    ".yaml": _to_yaml,
    ".yml": _to_yaml,
    ".json": export_json,
}
