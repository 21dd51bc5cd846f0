"""`replay demo`: record a local stream and replay it at several speeds (no network)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from replay.cli._args import Command, Verbs, verb

__all__ = ["COMMANDS", "add_verbs"]


def add_verbs(verbs: Verbs) -> None:
    """Add the parser of `demo`."""
    demo = verb(
        verbs,
        "demo",
        "record a local Responses API stream and replay it (no network, no keys)",
        "Start a local origin on 127.0.0.1 that streams OpenAI Responses API events, record "
        "one call through the real recording path, replay it at 1x, 10x and instant, and "
        "print each event's time in each run.",
        "replay demo --cassette demo.msgpack",
    )
    demo.add_argument("--cassette", type=Path, help="keep the recording here (default: temporary)")


def _demo(args: argparse.Namespace) -> int:
    from replay.testing.demo import format_report, run_demo

    runs = run_demo(args.cassette, progress=lambda message: print(message, file=sys.stderr))
    print(format_report(runs))
    return 0


COMMANDS: dict[str, Command] = {"demo": _demo}
