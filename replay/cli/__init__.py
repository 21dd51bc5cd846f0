"""The `replay` command. Thin: parses arguments, calls the library, prints.

Errors (the library's, a missing file) become one line on stderr and exit status 1; usage
errors are one line too, naming the verb's `--help`, with exit status 2; `--debug` shows the
traceback instead. A closed stdout (`replay show C | head`) ends the command quietly. Each
family of verbs has its module here (`_record_run`, `_show_play`, `_convert`, `_report`,
`_check_diff_synth`, `_serve_proxy`, `_demo`): its parsers and its handlers; this one puts
them together and runs one.
"""

from __future__ import annotations

import argparse
import difflib
import os
import signal
import sys
from collections.abc import Mapping, Sequence
from typing import NoReturn

from replay import __version__
from replay.cli import (
    _check_diff_synth,
    _convert,
    _demo,
    _migrate,
    _record_run,
    _report,
    _serve_proxy,
    _show_play,
)
from replay.cli._args import Command, convert_hint, formatter, usage_error
from replay.errors import CassetteFormatError, ReplayError

__all__ = ["main"]

# (command, what it does): the descriptions are aligned in one column when shown.
_EXAMPLES = (
    ("replay demo", "see record and replay at work, offline"),
    ("replay record out.msgpack -- python app.py", "record every HTTP request of app.py"),
    ("replay run out.msgpack -- python app.py", "run app.py again, served from the cassette"),
    (
        'replay run out.msgpack --fault "cut(after_events=5)" -- python app.py',
        "the same, with the stream dropped mid-way",
    ),
    ("replay show out.msgpack --events", "what was recorded, event by event"),
    ("replay play out.msgpack -i 0 --speed 1", "watch a stream at its recorded pace"),
    ("replay convert out.msgpack out.yaml", "to vcrpy's format (and back)"),
    ("replay migrate tests/", "a pytest-recording suite's cassettes, all at once"),
    ("replay check cassettes/*.msgpack", "validate every stream against its dialect"),
    ("replay diff old.msgpack new.msgpack", "what changed: events, texts, timing"),
    ("replay report old.msgpack new.msgpack", "see the timing of both, drawn on one page"),
    ("replay synth chat out.msgpack --text Hi", "write a synthetic stream into a cassette"),
    ("replay serve out.msgpack --port 8080", "serve the cassette over HTTP to any client"),
    (
        "replay proxy --target https://api.openai.com -o out.msgpack --port 8080",
        "record any client through a local proxy",
    ),
)


def _epilog() -> str:
    """The examples, each command's description in one column (under it when too long)."""
    column = 2 + max(len(command) for command, _ in _EXAMPLES if len(command) <= 44) + 2
    lines = ["examples:"]
    for command, description in _EXAMPLES:
        shown = f"  {command}"
        if len(shown) + 2 > column:
            lines += [shown, " " * column + description]
        else:
            lines.append(shown.ljust(column) + description)
    return "\n".join(lines) + "\n"


# In the order of `replay --help`.
_FAMILIES = (
    _demo,
    _record_run,
    _show_play,
    _report,
    _convert,
    _migrate,
    _serve_proxy,
    _check_diff_synth,
)
_COMMANDS: dict[str, Command] = {
    name: command for family in _FAMILIES for name, command in family.COMMANDS.items()
}


class _Parser(argparse.ArgumentParser):
    """argparse, with its errors in replay's form: one line, then the usage to follow."""

    #: The verbs' parsers, by name (on the top-level parser).
    verbs: Mapping[str, argparse.ArgumentParser]

    def error(self, message: str) -> NoReturn:
        if "invalid choice" in message and "argument VERB" in message:
            typed = message.split("invalid choice: ", 1)[1].split(" ", 1)[0].strip("'")
            near = difflib.get_close_matches(typed, _COMMANDS, n=1)
            message = f"unknown verb {typed!r}" + (f": did you mean {near[0]!r}?" if near else "")
        usage_error(f"{message} (see {self.prog} --help)")


def _parser() -> _Parser:
    parser = _Parser(
        prog="replay",
        description="Record and replay streaming HTTP (Server-Sent Events, and WebSocket "
        "conversations frame by frame) with its timing: "
        "httpx, httpx2, aiohttp, requests, urllib3 and http.client clients (the openai, "
        "anthropic, google-genai and boto3 SDKs through them), and any client through "
        "replay proxy.",
        epilog=_epilog(),
        formatter_class=formatter,
    )
    parser.add_argument("--version", action="version", version=f"replay {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks of errors")
    verbs = parser.add_subparsers(dest="verb", metavar="VERB", required=True)
    for family in _FAMILIES:
        family.add_verbs(verbs)
    parser.verbs = verbs.choices
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
    args = _parse(own)
    if args.verb in ("record", "run"):
        args.command = [*args.command, *(command or [])]
    elif command is not None:  # "--" means to other verbs what it means to argparse
        args = _parse(arguments)
    try:
        return _COMMANDS[args.verb](args)
    except BrokenPipeError:
        return _quietly_closed()
    except (ReplayError, OSError) as error:
        if args.debug:
            raise
        print(f"replay: error: {_one_line(error, hint=args.verb != 'convert')}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


def _one_line(error: BaseException, *, hint: bool = True) -> str:
    """An error as the one line the command prints: a file's OSError as "PATH: what", a
    cassette of a text format with the command that converts it (if `hint`)."""
    if isinstance(error, OSError) and not isinstance(error, ReplayError) and error.filename:
        return f"{error.filename}: {(error.strerror or type(error).__name__).lower()}"
    message = str(error).splitlines()[0] if str(error) else type(error).__name__
    shown = not hint or "Convert it first" in message
    if isinstance(error, CassetteFormatError) and error.path is not None and not shown:
        message += convert_hint(error.path)
    return message


def _parse(arguments: list[str]) -> argparse.Namespace:
    """The parsed arguments; a mistyped option is reported with its verb's usage."""
    parser = _parser()
    args, unknown = parser.parse_known_args(arguments)
    if unknown:
        parser.verbs[args.verb].error(f"unrecognized arguments: {' '.join(unknown)}")
    return args


def _quietly_closed() -> int:
    """stdout was closed by its reader (`| head`): stop, as Unix tools do, without a word.

    What is still buffered goes nowhere (stdout is pointed at devnull), so that the flush at
    exit does not fail a second time.
    """
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return 128 + signal.SIGPIPE
