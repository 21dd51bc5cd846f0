"""The `replay` command. Thin: parses arguments, calls the library, prints.

Errors of the library become one line on stderr and exit status 1 (argparse's usage errors
exit 2); `--debug` shows the traceback instead. Each family of verbs has its module here
(`_record_run`, `_show_play`, `_convert`, `_check_diff_synth`, `_serve_proxy`, `_demo`):
its parsers and its handlers; this one puts them together and runs one.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from replay import __version__
from replay.cli import (
    _check_diff_synth,
    _convert,
    _demo,
    _record_run,
    _serve_proxy,
    _show_play,
)
from replay.cli._args import Command, formatter
from replay.errors import ReplayError

__all__ = ["main"]

_EPILOG = """examples:
  replay demo                                   see record and replay at work, offline
  replay record out.msgpack -- python app.py   record every httpx/httpx2 request of app.py
  replay run out.msgpack -- python app.py      run app.py again, served from the cassette
  replay run out.msgpack --fault "cut(after_events=5)" -- python app.py
                                                the same, with the stream dropped mid-way
  replay show out.msgpack --events             what was recorded, event by event
  replay play out.msgpack -i 0 --speed 1       watch a stream at its recorded pace
  replay convert out.msgpack out.yaml          to vcrpy's format (and back)
  replay check cassettes/*.msgpack             validate every stream against its dialect
  replay diff old.msgpack new.msgpack          what changed: events, texts, timing
  replay synth chat out.msgpack --text Hi      write a synthetic stream into a cassette
  replay serve out.msgpack --port 8080          serve the cassette over HTTP to any client
  replay proxy --target https://api.openai.com -o out.msgpack --port 8080
"""

# In the order of `replay --help`.
_FAMILIES = (_demo, _record_run, _show_play, _convert, _serve_proxy, _check_diff_synth)
_COMMANDS: dict[str, Command] = {
    name: command for family in _FAMILIES for name, command in family.COMMANDS.items()
}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="replay",
        description="Record and replay streaming HTTP (Server-Sent Events) with its timing.",
        epilog=_EPILOG,
        formatter_class=formatter,
    )
    parser.add_argument("--version", action="version", version=f"replay {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks of errors")
    verbs = parser.add_subparsers(dest="verb", metavar="VERB", required=True)
    for family in _FAMILIES:
        family.add_verbs(verbs)
    return parser


def _split_command(argv: Sequence[str]) -> tuple[list[str], list[str] | None]:
    """replay's own arguments, and the program's: what follows the first "--" (or None)."""
    arguments = list(argv)
    if "--" not in arguments:
        return arguments, None
    at = arguments.index("--")
    return arguments[:at], arguments[at + 1 :]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the `replay` command; returns the exit status."""
    arguments = sys.argv[1:] if argv is None else list(argv)
    own, command = _split_command(arguments)
    args = _parser().parse_args(own)
    if args.verb in ("record", "run"):
        args.command = [*args.command, *(command or [])]
    elif command is not None:  # "--" means to other verbs what it means to argparse
        args = _parser().parse_args(arguments)
    try:
        return _COMMANDS[args.verb](args)
    except (ReplayError, OSError) as error:
        if args.debug:
            raise
        message = str(error).splitlines()[0] if str(error) else type(error).__name__
        print(f"replay: error: {message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
