"""`replay convert`: a cassette into another format (replay, vcrpy YAML, JSON), by suffix."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from replay.cli._args import Command, Verbs, verb

__all__ = ["COMMANDS", "add_verbs"]


def add_verbs(verbs: Verbs) -> None:
    """Add the parser of `convert`."""
    convert = verb(
        verbs,
        "convert",
        "convert between replay's format, vcrpy YAML and JSON",
        "Convert SRC to DST, by their suffixes: .msgpack (replay), .yaml/.yml (vcrpy, "
        "pydantic-ai's serializer too), .json (export, or vcrpy JSON); the text formats may be "
        "gzip-compressed (.yaml.gz, .json.gz). Says which variant SRC was. vcrpy cassettes "
        "carry no timing: they convert with every chunk at 0.",
        "replay convert cassettes/app.msgpack cassettes/app.yaml",
    )
    convert.add_argument("src", type=Path, metavar="SRC")
    convert.add_argument("dst", type=Path, metavar="DST")
    convert.add_argument("--force", action="store_true", help="replace DST if it exists")


def _convert(args: argparse.Namespace) -> int:
    from replay.convert.files import convert
    from replay.errors import ConfigurationError

    try:
        source = convert(args.src, args.dst, overwrite=args.force)
    except FileExistsError:
        raise ConfigurationError(f"{args.dst} already exists: add --force to replace it") from None
    count = len(source.interactions)
    plural = "" if count == 1 else "s"
    print(
        f"{args.src} -> {args.dst}: {count} interaction{plural}, read {source.source_format}",
        file=sys.stderr,
    )
    return 0


COMMANDS: dict[str, Command] = {"convert": _convert}
