"""`replay migrate`: every vcrpy cassette of a tree (a pytest-recording suite's) made replay's."""

from __future__ import annotations

import argparse
from pathlib import Path

from replay.cli._args import Command, Verbs, verb

__all__ = ["COMMANDS", "add_verbs"]


def add_verbs(verbs: Verbs) -> None:
    """Add the parser of `migrate`."""
    migrate = verb(
        verbs,
        "migrate",
        "convert a pytest-recording suite's vcrpy cassettes, every one in a tree",
        "Convert every vcrpy cassette under DIR (.yaml, .yml, vcrpy .json; gzip-compressed "
        "too) into a replay cassette beside it, named as replay names a test's cassette, and "
        "mark it with the matching it was recorded under (a NAME.match_on.json beside it), so "
        "that it replays as it did under pytest-recording; recording it again drops the mark "
        "(replay's default matching, the body included, from then on). The vcrpy files are "
        "kept. One line per file; exit status 1 if a cassette could not be read.",
        "replay migrate tests/",
    )
    migrate.add_argument("dir", type=Path, metavar="DIR", help="a directory (or one cassette)")
    migrate.add_argument(
        "--match-on",
        metavar="NAMES",
        default=None,
        help="what the suite's vcr_config matched on, comma-separated (default: vcrpy's: "
        "method,scheme,host,port,path,query)",
    )
    migrate.add_argument("--force", action="store_true", help="replace replay cassettes there")


def _migrate(args: argparse.Namespace) -> int:
    from replay.convert.migrate import VCRPY_MATCH_ON, migrate_tree

    match_on = VCRPY_MATCH_ON
    if args.match_on is not None:
        match_on = tuple(name.strip() for name in args.match_on.split(",") if name.strip())
    results = migrate_tree(args.dir, match_on=match_on, overwrite=args.force)
    counts: dict[str, int] = {}
    for result in results:
        counts[result.status] = counts.get(result.status, 0) + 1
        target = result.target.name
        if result.status == "converted":
            plural = "" if result.interactions == 1 else "s"
            print(
                f"{result.source} -> {target}: {result.interactions} interaction{plural}, "
                f"read {result.source_format}, matching on {', '.join(match_on)}"
            )
        elif result.status == "exists":
            print(f"{result.source}: {target} exists, kept (--force replaces it)")
        else:
            print(f"{result.source}: {result.status}: {result.note}")
    shown = ", ".join(f"{count} {status}" for status, count in sorted(counts.items()))
    print(f"replay migrate: {shown or 'no vcrpy cassette found'} under {args.dir}")
    return 1 if counts.get("failed") else 0


COMMANDS: dict[str, Command] = {"migrate": _migrate}
