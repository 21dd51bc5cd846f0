"""The `replay` command. Thin: parses arguments, calls the library, prints.

Errors of the library become one line on stderr and exit status 1 (2 for usage errors);
`--debug` shows the traceback instead.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from replay import __version__
from replay.errors import ReplayError

__all__ = ["main"]

_EPILOG = """examples:
  replay demo                       record a local streaming call, replay it at 1x, 10x, instant
  replay demo --cassette demo.msgpack
"""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="replay",
        description="Record and replay streaming HTTP (Server-Sent Events) with its timing.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"replay {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks of errors")
    verbs = parser.add_subparsers(dest="verb", metavar="VERB", required=True)
    demo = verbs.add_parser(
        "demo",
        help="record a local Responses API stream and replay it (no network, no keys)",
        description=(
            "Start a local origin on 127.0.0.1 that streams OpenAI Responses API events, "
            "record one call through the real recording path, replay it at 1x, 10x and "
            "instant, and print each event's time in each run."
        ),
        epilog="example:\n  replay demo --cassette demo.msgpack",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    demo.add_argument(
        "--cassette", type=Path, help="keep the recorded cassette here (default: temporary)"
    )
    return parser


def _demo(args: argparse.Namespace) -> int:
    from replay.demo import format_report, run_demo

    runs = run_demo(args.cassette, progress=lambda message: print(message, file=sys.stderr))
    print(format_report(runs))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the `replay` command; returns the exit status."""
    args = _parser().parse_args(argv)
    commands = {"demo": _demo}
    try:
        return commands[args.verb](args)
    except (ReplayError, OSError) as error:
        if args.debug:
            raise
        print(f"replay: error: {error}".splitlines()[0], file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
