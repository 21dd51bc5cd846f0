"""What the verbs of the `replay` command share: how a verb's parser is made, the options
several verbs take (`--fault`, the program after `--`), and the type of a verb's handler."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn, TypeAlias

if TYPE_CHECKING:
    from replay.store.cassette import Cassette

__all__ = [
    "Command",
    "Verbs",
    "add_command_args",
    "add_fault_option",
    "command_of",
    "convert_hint",
    "formatter",
    "load_cassette",
    "usage_error",
    "verb",
]

#: The help of a CASSETTE argument.
CASSETTE_HELP = "a replay cassette (.msgpack; a vcrpy YAML or JSON one: replay convert it first)"

Command: TypeAlias = Callable[[argparse.Namespace], int]
# A string: argparse's action class cannot be subscripted at run time.
Verbs: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def formatter(prog: str) -> argparse.HelpFormatter:
    """The help layout of `replay` and its verbs: descriptions and examples as written."""
    return argparse.RawDescriptionHelpFormatter(prog, max_help_position=32)


def verb(
    verbs: Verbs,
    name: str,
    summary: str,
    description: str,
    example: str,
) -> argparse.ArgumentParser:
    """Add the parser of the verb `name`, with its one-line summary, description and example."""
    return verbs.add_parser(
        name,
        help=summary,
        description=description,
        epilog=f"example:\n  {example}",
        formatter_class=formatter,
    )


def add_command_args(parser: argparse.ArgumentParser) -> None:
    """The program to run (`record`, `run`): CMD and its arguments, after `--`."""
    # What follows "--" is split off in `main` before parsing: a REMAINDER positional after
    # OUT / CASSETTE would swallow the options given after it ("run c.msgpack --speed 1 --").
    parser.add_argument(
        "command", nargs="*", metavar="CMD", help="the program to run and its arguments, after --"
    )


def command_of(args: argparse.Namespace) -> list[str]:
    """The program to run, as given after `--`; exits with a usage error when there is none."""
    command = list(args.command)
    if not command:
        usage_error(f"{args.verb}: no command given: add -- CMD [ARGS...]")
    return command


def usage_error(message: str) -> NoReturn:
    """Exit on a usage error, as every verb does: one line on stderr, exit status 2."""
    sys.stderr.write(f"replay: error: {message}\n")
    sys.exit(2)


def convert_hint(path: Path) -> str:
    """For a file of a text format (vcrpy YAML, JSON, gzipped or not), "; ...Convert it
    first: replay convert PATH PATH.msgpack"; else ""."""
    plain = path.name.lower().removesuffix(".gz")
    if not plain.endswith((".yaml", ".yml", ".json")):
        return ""
    target = Path(str(path)[: -len(".gz")] if path.name.endswith(".gz") else path)
    return (
        "; a vcrpy or JSON cassette? Convert it first: "
        f"replay convert {path} {target.with_suffix('.msgpack')}"
    )


def add_fault_option(parser: argparse.ArgumentParser, when: str = "") -> None:
    """`--fault SPEC` (repeatable), for the verbs that replay; `when` prefixes its help
    (the option it goes with: "--timeline: ")."""
    parser.add_argument(
        "--fault",
        action="append",
        default=[],
        dest="faults",
        metavar="SPEC",
        help=f'{when}a fault to inject at replay, e.g. "cut(after_events=5)", '
        '"status(429, times=1)", "stall(after_events=3, seconds=30)" (repeatable)',
    )


def add_ignore_options(parser: argparse.ArgumentParser) -> None:
    """`--ignore-host HOST` (repeatable) and `--ignore-localhost`, for the verbs that run a
    program under a cassette."""
    parser.add_argument(
        "--ignore-host",
        action="append",
        default=[],
        dest="ignore_hosts",
        metavar="HOST",
        help="let requests to HOST go live, unrecorded: telemetry, a model-cost map… (repeatable)",
    )
    parser.add_argument(
        "--ignore-localhost",
        action="store_true",
        help="let requests to loopback hosts go live, unrecorded",
    )


def load_cassette(path: Path) -> Cassette:
    """`Cassette.load(path)`; a file of a text format gets the command that converts it.

    Raises:
        CassetteFormatError: `path` is not a replay cassette.
    """
    from replay.errors import CassetteFormatError
    from replay.store.cassette import Cassette

    try:
        return Cassette.load(path)
    except CassetteFormatError as error:
        hint = convert_hint(path)
        if not hint:
            raise
        raise CassetteFormatError(path, error.problem + hint) from None
