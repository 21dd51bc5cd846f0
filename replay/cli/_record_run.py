"""`replay record` and `replay run`: a Python program under a cassette, from the outside."""

from __future__ import annotations

import argparse
from pathlib import Path

from replay.cli._args import (
    Command,
    Verbs,
    add_command_args,
    add_fault_option,
    add_ignore_options,
    command_of,
    verb,
)

__all__ = ["COMMANDS", "add_verbs"]


def add_verbs(verbs: Verbs) -> None:
    """Add the parsers of `record` and `run`."""
    record = verb(
        verbs,
        "record",
        "run a Python program and record its httpx/httpx2 traffic",
        "Run CMD (a Python program, unmodified) and record every httpx and httpx2 request it "
        "makes into OUT, with each chunk's timing. Secrets are redacted. The program's exit "
        "status is passed through. What a killed run left beside OUT, the next record into "
        "OUT merges.",
        "replay record cassettes/app.msgpack -- python app.py --prompt hi",
    )
    record.add_argument("out", type=Path, metavar="OUT", help="the cassette to write")
    record.add_argument(
        "--mode",
        choices=("all", "new_episodes"),
        default="all",
        help="all: record everything again (default); new_episodes: keep what matches",
    )
    add_ignore_options(record)
    add_command_args(record)

    run = verb(
        verbs,
        "run",
        "run a Python program with its traffic served from a cassette",
        "Run CMD with every httpx and httpx2 request answered from CASSETTE: offline "
        "regression from the command line. With --mode none it never touches the network.",
        "replay run cassettes/app.msgpack --speed 10x -- python app.py",
    )
    run.add_argument("cassette", type=Path, metavar="CASSETTE")
    run.add_argument(
        "--mode",
        choices=("none", "once", "new_episodes"),
        default="none",
        help="none: replay only (default); new_episodes: record what is missing",
    )
    run.add_argument(
        "--speed",
        default="instant",
        help="1, 10x, instant (default), or virtual: as recorded, without waiting, on the "
        "program's virtual clocks",
    )
    add_fault_option(run)
    add_ignore_options(run)
    add_command_args(run)


def _record(args: argparse.Namespace) -> int:
    from replay.run.child import record_command

    return record_command(
        args.out,
        command_of(args),
        mode=args.mode,
        ignore_hosts=args.ignore_hosts,
        ignore_localhost=args.ignore_localhost,
    )


def _run(args: argparse.Namespace) -> int:
    from replay.run.child import replay_command

    return replay_command(
        args.cassette,
        command_of(args),
        mode=args.mode,
        speed=args.speed,
        faults=args.faults,
        ignore_hosts=args.ignore_hosts,
        ignore_localhost=args.ignore_localhost,
    )


COMMANDS: dict[str, Command] = {"record": _record, "run": _run}
