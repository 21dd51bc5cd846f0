"""`replay show` and `replay play`: what a cassette holds, as text or as a paced body."""

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
    usage_error,
    verb,
)

if TYPE_CHECKING:
    from replay.clock import Speed

__all__ = ["COMMANDS", "add_verbs"]


def add_verbs(verbs: Verbs) -> None:
    """Add the parsers of `show` and `play`."""
    show = verb(
        verbs,
        "show",
        "list a cassette's interactions (or events, raw bytes, JSON, a timeline)",
        "Print a table of the interactions in each CASSETTE: method, URL, status, chunks, "
        "bytes, time to first byte, duration, SSE events. The plain output is stable and "
        "diffs well (use it as a git textconv). With several, each comes after a line "
        "'==> CASSETTE <==', as head(1) does.",
        "replay show cassettes/app.msgpack --events",
    )
    show.add_argument("cassettes", type=Path, nargs="+", metavar="CASSETTE", help=CASSETTE_HELP)
    form = show.add_mutually_exclusive_group()
    form.add_argument(
        "--events",
        action="store_true",
        help="each SSE / NDJSON event (a WebSocket conversation's frames, both ways) with "
        "its time, a delta's text first",
    )
    form.add_argument("--raw", action="store_true", help="the bodies as text")
    form.add_argument("--json", action="store_true", help="a machine-readable dump")
    form.add_argument(
        "--timeline",
        action="store_true",
        help="a sparkline of each interaction's chunk arrivals, with TTFB, TTFT, duration",
    )
    show.add_argument(
        "--speed",
        default=None,
        metavar="SPEC",
        help="--timeline: also the times played at this speed or policy, before any run "
        "(e.g. 'ttft=recorded,rest=instant', '10x,max_gap=0.05'; 'virtual' plays as "
        "recorded; a WebSocket conversation's frames go by the policy's rest)",
    )
    add_fault_option(show, "--timeline: ")
    show.add_argument(
        "--width",
        type=_width,
        default=None,
        metavar="N",
        help="--events: cut each event's data at N characters (default 100; 0: never)",
    )

    play = verb(
        verbs,
        "play",
        "write an interaction's body to stdout at its recorded pace",
        "Write the body of one interaction of CASSETTE to stdout, chunk by chunk, at its "
        "recorded timing (or --speed times it).",
        "replay play cassettes/app.msgpack -i 0 --speed 2",
    )
    play.add_argument("cassette", type=Path, metavar="CASSETTE", help=CASSETTE_HELP)
    play.add_argument("-i", "--interaction", type=int, default=0, metavar="N", help="index (0)")
    play.add_argument(
        "--speed",
        default="1",
        help="1 (default), 10x, instant, or a policy: 'ttft=recorded,rest=10x'",
    )
    add_fault_option(play)


def _width(value: str) -> int:
    """A --width: a whole number of characters, at least 0."""
    try:
        width = int(value)
    except ValueError:
        width = -1
    if width < 0 or (0 < width < 4):
        raise argparse.ArgumentTypeError(f"{value!r} is not 0 or a width of 4 and more")
    return width


def _show(args: argparse.Namespace) -> int:
    if (args.speed is not None or args.faults) and not args.timeline:
        usage_error("--speed and --fault go with --timeline (see replay show --help)")
    several = len(args.cassettes) > 1
    for number, path in enumerate(args.cassettes):
        if several:
            sys.stdout.buffer.write(f"{chr(10) if number else ''}==> {path} <==\n".encode())
        _show_one(args, path)
    return 0


def _show_one(args: argparse.Namespace, path: Path) -> None:
    from replay.inspect import describe
    from replay.run.site.parts import left_behind
    from replay.store.cassette import Cassette

    extra, note = left_behind(path)  # what a killed session left beside it
    if extra:
        held = load_cassette(path).interactions if path.exists() else []
        cassette = Cassette([*held, *extra], path=path)
    else:
        cassette = load_cassette(path)
    if args.events:
        width = describe.DATA_WIDTH if args.width is None else args.width
        text = describe.events(cassette, width)
    elif args.raw:
        text = describe.raw(cassette)
    elif args.json:
        text = describe.to_json(cassette)
    elif args.timeline and (args.speed is not None or args.faults):
        from replay.inspect.played import played_timeline

        text = played_timeline(cassette, _played(args.speed or "1"), faults=args.faults)
    elif args.timeline:
        text = describe.timeline(cassette)
    else:
        text = describe.table(cassette)
    # UTF-8 whatever the locale: the output must be the same everywhere (git textconv).
    sys.stdout.buffer.write(text.encode("utf-8"))
    sys.stdout.flush()
    if note is not None:
        print(note, file=sys.stderr)


def _played(speed: str) -> Speed:
    """The speed a --speed plays at here: "virtual" (an item of it) is as recorded, since
    virtual time only changes what a client's own clocks read."""
    from replay.session.args import session_speed

    return session_speed(speed)[1]


def _play(args: argparse.Namespace) -> int:
    from replay.errors import ConfigurationError
    from replay.inspect import describe

    cassette = load_cassette(args.cassette)
    speed = _played(args.speed)
    index = args.interaction
    if 0 <= index < len(cassette.interactions) and cassette.interactions[index].frames:
        raise ConfigurationError(
            f"interaction {index} is a WebSocket conversation (no body to play): "
            f"replay show --events {args.cassette} shows its frames"
        )
    describe.play(cassette, index, speed, sys.stdout.buffer, faults=args.faults)
    return 0


COMMANDS: dict[str, Command] = {"show": _show, "play": _play}
