"""`replay report`: a cassette's streams drawn on one HTML page (two cassettes compared)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from replay.cli._args import (
    CASSETTE_HELP,
    Command,
    Verbs,
    add_fault_option,
    load_cassette,
    verb,
)

if TYPE_CHECKING:
    from replay.store.cassette import Cassette

__all__ = ["COMMANDS", "add_verbs"]


def add_verbs(verbs: Verbs) -> None:
    """Add the parser of `report`."""
    report = verb(
        verbs,
        "report",
        "draw the timing of a cassette's streams (or two compared) on an HTML page",
        "Write one self-contained HTML page (inline SVG and CSS, nothing loaded from the "
        "network) showing, for each interaction of CASSETTE: its figures (TTFB, TTFT, "
        "duration, tokens/s, replay check findings), a timeline of its chunks and events, "
        "and its text as it grew. With CASSETTE_B, interactions are paired as replay diff "
        "pairs them, drawn on one time axis, with a table of the changes.",
        "replay report cassettes/old.msgpack cassettes/new.msgpack -o timing.html",
    )
    report.add_argument("cassette", type=Path, metavar="CASSETTE", help=CASSETTE_HELP)
    report.add_argument(
        "cassette_b", type=Path, nargs="?", metavar="CASSETTE_B", help="a cassette to compare"
    )
    report.add_argument(
        "-o",
        "--output",
        type=Path,
        default=Path("report.html"),
        metavar="FILE",
        help='where to write the page (default: report.html; "-": stdout)',
    )
    report.add_argument("--force", action="store_true", help="replace FILE if it exists")
    report.add_argument(
        "-i", "--interaction", type=int, default=None, metavar="N", help="only interaction N"
    )
    report.add_argument(
        "--speed",
        default=None,
        metavar="SPEC",
        help="compare CASSETTE with itself as played at this speed or policy (and --fault), "
        "before any run, e.g. 'ttft=recorded,rest=instant'",
    )
    add_fault_option(report)


def _report(args: argparse.Namespace) -> int:
    from replay.errors import ConfigurationError
    from replay.inspect.report import report

    if str(args.output) != "-" and args.output.exists() and not args.force:
        raise ConfigurationError(f"{args.output} already exists: add --force to replace it")
    a = load_cassette(args.cassette)
    b = None if args.cassette_b is None else load_cassette(args.cassette_b)
    names = [str(args.cassette)] + ([] if b is None else [str(args.cassette_b)])
    if args.speed is not None or args.faults:
        b, names = _played(args, a, b, names)
    page = report(a, b, names=names, interaction=args.interaction).encode("utf-8")
    if str(args.output) == "-":
        sys.stdout.buffer.write(page)
        sys.stdout.flush()
        return 0
    args.output.write_bytes(page)
    count = len(a.interactions) if args.interaction is None else 1
    plural = "" if count == 1 else "s"
    print(f"wrote {args.output}: {count} interaction{plural}, {len(page):,} bytes", file=sys.stderr)
    return 0


def _played(
    args: argparse.Namespace, a: Cassette, b: Cassette | None, names: list[str]
) -> tuple[Cassette, list[str]]:
    """CASSETTE as it will be played at --speed under --fault, as the second cassette."""
    from replay.clock import format_speed, speed_of
    from replay.errors import ConfigurationError
    from replay.inspect.played import played_cassette

    if b is not None:
        raise ConfigurationError(
            "--speed and --fault compare CASSETTE with itself as played: give one cassette"
        )
    speed = args.speed or "1"
    played = played_cassette(a, speed, faults=args.faults)
    faulted = " under faults" if args.faults else ""
    return played, [
        *names,
        f"{args.cassette} played at speed {format_speed(speed_of(speed))!r}{faulted}",
    ]


COMMANDS: dict[str, Command] = {"report": _report}
