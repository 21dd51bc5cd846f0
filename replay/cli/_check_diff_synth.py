"""`replay check`, `replay diff` and `replay synth`: streams validated, compared, made up."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from replay.cli._args import CASSETTE_HELP, Command, Verbs, convert_hint, verb

__all__ = ["COMMANDS", "add_verbs"]


def add_verbs(verbs: Verbs) -> None:
    """Add the parsers of `check`, `diff` and `synth`."""
    _add_check(verbs)
    _add_diff(verbs)
    _add_synth(verbs)


def _add_check(verbs: Verbs) -> None:
    check = verb(
        verbs,
        "check",
        "validate every stream in cassettes against its dialect's rules",
        "Validate each stream in each CASSETTE (responses that are text/event-stream or "
        "speak a known dialect) against the rules of its dialect: OpenAI Responses, Chat "
        "Completions, Anthropic Messages, and those of any stream (UTF-8, not truncated). "
        "What providers document (an Azure content-filter preamble, re-encrypted reasoning, "
        "streams older than sequence_number) breaks no rule. Prints one line per rule a "
        "stream breaks, PATH #INTERACTION event INDEX RULE: SEVERITY: message (N times), "
        "naming its first occurrence (--verbose lists them all); error: the official SDK "
        "fails or mis-assembles the stream; warning: it breaks the dialect's contract; note: "
        "bookkeeping such as token totals. A cassette that cannot be read is one line, PATH: "
        "cannot read: why, and the others are still checked. Then a summary. Exit status: 0 "
        "when every cassette was read and nothing worse than a note was found, 1 otherwise.",
        "replay check cassettes/*.msgpack",
    )
    check.add_argument("cassettes", type=Path, nargs="+", metavar="CASSETTE", help=CASSETTE_HELP)
    check.add_argument(
        "-v", "--verbose", action="store_true", help="list every occurrence of each finding"
    )


def _add_diff(verbs: Verbs) -> None:
    diff = verb(
        verbs,
        "diff",
        "compare two cassettes' streams: events, texts, timing",
        "Compare A and B interaction by interaction: the events that were changed, removed "
        "or added, the texts (message, reasoning, tool calls) when they differ, the request, "
        "status and end of the stream; and the timing of each (first event, total, median "
        "and largest gap). Ids, timestamps and signatures in event data are not compared "
        "(they differ in every recording) unless --exact; headers are not compared. Exit "
        "status: 0 when only the timing differs (or nothing), 1 when anything else does.",
        "replay diff cassettes/old.msgpack cassettes/new.msgpack",
    )
    diff.add_argument("a", type=Path, metavar="A", help="the cassette before")
    diff.add_argument("b", type=Path, metavar="B", help="the cassette after")
    diff.add_argument(
        "--exact", action="store_true", help="compare event data byte for byte, ids included"
    )


def _add_synth(verbs: Verbs) -> None:
    from replay.dialects.synth import DIALECTS, FAILURES

    failures = "; ".join(f"{name}: {', '.join(FAILURES[name])}" for name in DIALECTS)
    synth = verb(
        verbs,
        "synth",
        "write a synthetic LLM stream into a cassette",
        f"Build a synthetic stream of DIALECT ({', '.join(DIALECTS)}) with realistic timing "
        "and append it to OUT (created if missing, saved atomically, secrets redacted). "
        "Every stream it builds passes `replay check`, except those --failure cut leaves "
        f"truncated. Failures: {failures}.",
        'replay synth responses out.msgpack --text "Hi!" --tool-call get_weather '
        '\'{"city": "Paris"}\'',
    )
    synth.add_argument("dialect", choices=DIALECTS, metavar="DIALECT", help=", ".join(DIALECTS))
    synth.add_argument("out", type=Path, metavar="OUT", help="the cassette to append to")
    synth.add_argument("--text", default="", help="what the assistant says")
    synth.add_argument("--reasoning", help="reasoning before the text (anthropic: thinking)")
    synth.add_argument(
        "--tool-call",
        nargs=2,
        action="append",
        default=[],
        metavar=("NAME", "ARGS_JSON"),
        help="a tool call after the text (repeatable in chat)",
    )
    synth.add_argument("--usage", action="store_true", help="chat: add the usage chunk")
    synth.add_argument("--failure", help="how the stream fails (see above)")
    synth.add_argument("--ttft", type=float, default=0.3, help="seconds to the first event")
    synth.add_argument(
        "--tokens-per-second", type=float, default=40.0, help="the pace of deltas (40)"
    )
    synth.add_argument("--model", help="the model named (default: a current one)")
    synth.add_argument("--prompt", help="the user's message in the request")


def _check(args: argparse.Namespace) -> int:
    import attrs

    from replay.inspect.check import Unreadable, check_files

    result = check_files(args.cassettes)
    hinted = [
        Unreadable(u.cassette, u.problem + convert_hint(Path(u.cassette)))
        for u in result.unreadable
    ]
    result = attrs.evolve(result, unreadable=hinted)
    sys.stdout.buffer.write(result.report(verbose=args.verbose).encode("utf-8"))
    sys.stdout.flush()
    return 0 if result.ok else 1


def _diff(args: argparse.Namespace) -> int:
    from replay.inspect.diff import VOLATILE_FIELDS, diff_files, format_diff

    result = diff_files(args.a, args.b, ignore_fields=() if args.exact else VOLATILE_FIELDS)
    sys.stdout.buffer.write(format_diff(result, str(args.a), str(args.b)).encode("utf-8"))
    sys.stdout.flush()
    return 1 if result.differs else 0


def _synth(args: argparse.Namespace) -> int:
    from replay.dialects import synth

    interaction = synth.synthesize(
        args.dialect,
        args.text,
        reasoning=args.reasoning,
        tool_calls=[synth.tool_call(name, arguments) for name, arguments in args.tool_call],
        usage=args.usage,
        failure=args.failure,
        ttft=args.ttft,
        tokens_per_second=args.tokens_per_second,
        model=args.model,
        prompt=args.prompt,
    )
    index = synth.append(args.out, interaction)
    events = len(interaction.response.events())
    print(
        f"{args.out}: #{index}: {args.dialect} stream, {events} event{'' if events == 1 else 's'}",
        file=sys.stderr,
    )
    return 0


COMMANDS: dict[str, Command] = {"check": _check, "diff": _diff, "synth": _synth}
