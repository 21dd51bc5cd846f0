"""`replay record` and `replay run`: a Python program under a cassette, from the outside."""

from __future__ import annotations

import argparse
from pathlib import Path

from replay.cli._args import (
    CASSETTE_HELP,
    Command,
    Verbs,
    add_command_args,
    add_fault_option,
    add_ignore_options,
    command_of,
    verb,
)

__all__ = ["COMMANDS", "add_verbs"]


#: The client libraries whose requests a session serves (the README's "Which clients").
CLIENTS = (
    "httpx, httpx2, httpcore, aiohttp, requests, urllib3 or http.client (urllib.request; the "
    "openai, anthropic, google-genai and boto3 SDKs through these)"
)


def add_verbs(verbs: Verbs) -> None:
    """Add the parsers of `record` and `run`."""
    record = verb(
        verbs,
        "record",
        "run a Python program and record its HTTP traffic",
        "Run CMD (a Python program, unmodified) and record every request it makes through "
        f"{CLIENTS} into OUT, with each chunk's timing. Secrets are redacted. The program's exit "
        "status is passed through. What a killed run left beside OUT, the next record into "
        "OUT merges. With --block-network, every connection to a host but loopback (or the "
        "--allow-host ones) fails in the program with NetworkBlockedError, said on stderr.",
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
    _add_block_options(record, "loopback")
    add_command_args(record)

    run = verb(
        verbs,
        "run",
        "run a Python program with its traffic served from a cassette",
        f"Run CMD with every request it makes through {CLIENTS} answered "
        "from CASSETTE: offline regression from the command line. With --mode none "
        "(default) it never touches the network: a request the cassette cannot answer "
        "fails in the program, and any other connection (http.client's low-level calls, "
        "raw sockets, in CMD and in the Python processes it starts) fails with "
        "NetworkBlockedError, said on stderr as it happens; loopback too, unless "
        "--allow-host or --ignore-host/--ignore-localhost lets it through.",
        "replay run cassettes/app.msgpack --speed 10x -- python app.py",
    )
    run.add_argument("cassette", type=Path, metavar="CASSETTE", help=CASSETTE_HELP)
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
        "program's virtual clocks; or a policy: 'ttft=recorded,rest=instant' (with "
        "'virtual,' first: on virtual clocks)",
    )
    add_fault_option(run)
    add_ignore_options(run)
    _add_block_options(run, "loopback (with --mode none: no host)")
    add_command_args(run)


def _add_block_options(parser: argparse.ArgumentParser, default: str) -> None:
    """`--block-network` and `--allow-host HOST` (repeatable), as in pytest."""
    parser.add_argument(
        "--block-network",
        action="store_true",
        help="refuse every connection of the program and its Python processes to a host "
        "not allowed, with NetworkBlockedError (always on with run --mode none)",
    )
    parser.add_argument(
        "--allow-host",
        action="append",
        default=None,
        dest="allowed_hosts",
        metavar="HOST",
        help=f"a host the block lets through (repeatable; default: {default}; "
        "ignored hosts are let through too)",
    )


def _record(args: argparse.Namespace) -> int:
    from replay.run.child import record_command

    return record_command(
        args.out,
        command_of(args),
        mode=args.mode,
        ignore_hosts=args.ignore_hosts,
        ignore_localhost=args.ignore_localhost,
        block_network=args.block_network,
        allowed_hosts=args.allowed_hosts,
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
        block_network=args.block_network,
        allowed_hosts=args.allowed_hosts,
    )


COMMANDS: dict[str, Command] = {"record": _record, "run": _run}
