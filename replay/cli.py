"""The `replay` command. Thin: parses arguments, calls the library, prints.

Errors of the library become one line on stderr and exit status 1 (argparse's usage errors
exit 2); `--debug` shows the traceback instead.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from replay import __version__
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

Command = Callable[[argparse.Namespace], int]


def _formatter(prog: str) -> argparse.HelpFormatter:
    return argparse.RawDescriptionHelpFormatter(prog, max_help_position=32)


def _verb(
    verbs: argparse._SubParsersAction[argparse.ArgumentParser],
    name: str,
    summary: str,
    description: str,
    example: str,
) -> argparse.ArgumentParser:
    return verbs.add_parser(
        name,
        help=summary,
        description=description,
        epilog=f"example:\n  {example}",
        formatter_class=_formatter,
    )


def _command_args(parser: argparse.ArgumentParser) -> None:
    # What follows "--" is split off in `main` before parsing: a REMAINDER positional after
    # OUT / CASSETTE would swallow the options given after it ("run c.msgpack --speed 1 --").
    parser.add_argument(
        "command", nargs="*", metavar="CMD", help="the program to run and its arguments, after --"
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="replay",
        description="Record and replay streaming HTTP (Server-Sent Events) with its timing.",
        epilog=_EPILOG,
        formatter_class=_formatter,
    )
    parser.add_argument("--version", action="version", version=f"replay {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks of errors")
    verbs = parser.add_subparsers(dest="verb", metavar="VERB", required=True)

    demo = _verb(
        verbs,
        "demo",
        "record a local Responses API stream and replay it (no network, no keys)",
        "Start a local origin on 127.0.0.1 that streams OpenAI Responses API events, record "
        "one call through the real recording path, replay it at 1x, 10x and instant, and "
        "print each event's time in each run.",
        "replay demo --cassette demo.msgpack",
    )
    demo.add_argument("--cassette", type=Path, help="keep the recording here (default: temporary)")

    record = _verb(
        verbs,
        "record",
        "run a Python program and record its httpx/httpx2 traffic",
        "Run CMD (a Python program, unmodified) and record every httpx and httpx2 request it "
        "makes into OUT, with each chunk's timing. Secrets are redacted. The program's exit "
        "status is passed through.",
        "replay record cassettes/app.msgpack -- python app.py --prompt hi",
    )
    record.add_argument("out", type=Path, metavar="OUT", help="the cassette to write")
    record.add_argument(
        "--mode",
        choices=("all", "new_episodes"),
        default="all",
        help="all: record everything again (default); new_episodes: keep what matches",
    )
    _command_args(record)

    run = _verb(
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
    _fault_option(run)
    _command_args(run)

    show = _verb(
        verbs,
        "show",
        "list a cassette's interactions (or events, raw bytes, JSON)",
        "Print a table of the interactions in CASSETTE: method, URL, status, chunks, bytes, "
        "time to first byte, duration, SSE events. The plain output is stable and diffs "
        "well (use it as a git textconv).",
        "replay show cassettes/app.msgpack --events",
    )
    show.add_argument("cassette", type=Path, metavar="CASSETTE")
    form = show.add_mutually_exclusive_group()
    form.add_argument("--events", action="store_true", help="each SSE event with its time")
    form.add_argument("--raw", action="store_true", help="the bodies as text")
    form.add_argument("--json", action="store_true", help="a machine-readable dump")

    play = _verb(
        verbs,
        "play",
        "write an interaction's body to stdout at its recorded pace",
        "Write the body of one interaction of CASSETTE to stdout, chunk by chunk, at its "
        "recorded timing (or --speed times it).",
        "replay play cassettes/app.msgpack -i 0 --speed 2",
    )
    play.add_argument("cassette", type=Path, metavar="CASSETTE")
    play.add_argument("-i", "--interaction", type=int, default=0, metavar="N", help="index (0)")
    play.add_argument("--speed", default="1", help="1 (default), 10x, instant")
    _fault_option(play)

    convert = _verb(
        verbs,
        "convert",
        "convert between replay's format, vcrpy YAML and JSON",
        "Convert SRC to DST, by their suffixes: .msgpack (replay), .yaml/.yml (vcrpy), "
        ".json (export). vcrpy cassettes carry no timing: they convert with every chunk at 0.",
        "replay convert cassettes/app.msgpack cassettes/app.yaml",
    )
    convert.add_argument("src", type=Path, metavar="SRC")
    convert.add_argument("dst", type=Path, metavar="DST")

    serve = _verb(
        verbs,
        "serve",
        "serve a cassette over HTTP on 127.0.0.1, with its timing",
        "Run an HTTP server on 127.0.0.1 that answers each request from CASSETTE at its "
        "recorded pace, for clients in any language.",
        "replay serve cassettes/app.msgpack --port 8080 --speed 1",
    )
    serve.add_argument("cassette", type=Path, metavar="CASSETTE")
    serve.add_argument("--port", type=int, default=8080, help="port (default 8080; 0 = any)")
    serve.add_argument("--speed", default="1", help="1 (default), 10x, instant")
    serve.add_argument("--repeat", action="store_true", help="let interactions play again")
    _fault_option(serve)

    proxy = _verb(
        verbs,
        "proxy",
        "record any client through a local reverse proxy",
        "Run a reverse proxy on 127.0.0.1 that forwards to --target, streaming responses "
        "through as they arrive, and records them into -o OUT (saved after each interaction "
        "and on exit: Ctrl-C or SIGTERM).",
        "replay proxy --target https://api.openai.com -o cassettes/node.msgpack --port 8080",
    )
    proxy.add_argument("--target", required=True, help="the upstream base URL")
    proxy.add_argument("-o", "--out", type=Path, required=True, help="the cassette to write")
    proxy.add_argument("--port", type=int, default=8080, help="port (default 8080; 0 = any)")
    _add_check_diff_synth(verbs)
    return parser


def _add_check_diff_synth(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    _add_check(verbs)
    _add_diff(verbs)
    _add_synth(verbs)


def _add_check(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    check = _verb(
        verbs,
        "check",
        "validate every stream in cassettes against its dialect's rules",
        "Validate each stream in each CASSETTE (responses that are text/event-stream or "
        "speak a known dialect) against the rules of its dialect: OpenAI Responses, Chat "
        "Completions, Anthropic Messages, and those of any stream (UTF-8, not truncated). "
        "Prints one line per violation, PATH #INTERACTION event INDEX RULE: message, then a "
        "summary. Exit status: 0 when every stream is valid, 1 otherwise.",
        "replay check cassettes/*.msgpack",
    )
    check.add_argument("cassettes", type=Path, nargs="+", metavar="CASSETTE")


def _add_diff(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    diff = _verb(
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
    diff.add_argument("a", type=Path, metavar="A")
    diff.add_argument("b", type=Path, metavar="B")
    diff.add_argument(
        "--exact", action="store_true", help="compare event data byte for byte, ids included"
    )


def _add_synth(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from replay.synth import DIALECTS, FAILURES

    failures = "; ".join(f"{name}: {', '.join(FAILURES[name])}" for name in DIALECTS)
    synth = _verb(
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


def _split_command(argv: Sequence[str]) -> tuple[list[str], list[str] | None]:
    """replay's own arguments, and the program's: what follows the first "--" (or None)."""
    arguments = list(argv)
    if "--" not in arguments:
        return arguments, None
    at = arguments.index("--")
    return arguments[:at], arguments[at + 1 :]


def _command(args: argparse.Namespace) -> list[str]:
    command = list(args.command)
    if not command:
        raise SystemExit(f"replay {args.verb}: error: no command given: add -- CMD [ARGS...]")
    return command


def _demo(args: argparse.Namespace) -> int:
    from replay.demo import format_report, run_demo

    runs = run_demo(args.cassette, progress=lambda message: print(message, file=sys.stderr))
    print(format_report(runs))
    return 0


def _record(args: argparse.Namespace) -> int:
    from replay.child import record_command

    return record_command(args.out, _command(args), mode=args.mode)


def _run(args: argparse.Namespace) -> int:
    from replay.child import replay_command

    return replay_command(
        args.cassette, _command(args), mode=args.mode, speed=args.speed, faults=args.faults
    )


def _show(args: argparse.Namespace) -> int:
    from replay import describe
    from replay.cassette import Cassette

    cassette = Cassette.load(args.cassette)
    if args.events:
        text = describe.events(cassette)
    elif args.raw:
        text = describe.raw(cassette)
    elif args.json:
        text = describe.to_json(cassette)
    else:
        text = describe.table(cassette)
    # UTF-8 whatever the locale: the output must be the same everywhere (git textconv).
    sys.stdout.buffer.write(text.encode("utf-8"))
    sys.stdout.flush()
    return 0


def _fault_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--fault",
        action="append",
        default=[],
        dest="faults",
        metavar="SPEC",
        help='a fault to inject at replay, e.g. "cut(after_events=5)", '
        '"status(429, times=1)", "stall(after_events=3, seconds=30)" (repeatable)',
    )


def _play(args: argparse.Namespace) -> int:
    from replay import describe
    from replay.cassette import Cassette

    cassette = Cassette.load(args.cassette)
    out = sys.stdout.buffer
    describe.play(cassette, args.interaction, args.speed, out, faults=args.faults)
    return 0


def _convert(args: argparse.Namespace) -> int:
    from replay.convert import convert

    count = convert(args.src, args.dst)
    plural = "" if count == 1 else "s"
    print(f"{args.src} -> {args.dst}: {count} interaction{plural}", file=sys.stderr)
    return 0


def _serve(args: argparse.Namespace) -> int:
    from replay.serve import serve

    serve(args.cassette, port=args.port, speed=args.speed, repeat=args.repeat, faults=args.faults)
    return 0


def _proxy(args: argparse.Namespace) -> int:
    from replay.proxy import proxy

    proxy(args.target, args.out, port=args.port)
    return 0


def _check(args: argparse.Namespace) -> int:
    from replay.check import check_files

    result = check_files(args.cassettes)
    sys.stdout.buffer.write(result.report().encode("utf-8"))
    sys.stdout.flush()
    return 0 if result.ok else 1


def _diff(args: argparse.Namespace) -> int:
    from replay.diff import VOLATILE_FIELDS, diff_files, format_diff

    result = diff_files(args.a, args.b, ignore_fields=() if args.exact else VOLATILE_FIELDS)
    sys.stdout.buffer.write(format_diff(result, str(args.a), str(args.b)).encode("utf-8"))
    sys.stdout.flush()
    return 1 if result.differs else 0


def _synth(args: argparse.Namespace) -> int:
    from replay import synth

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
    print(f"{args.out}: #{index}: {args.dialect} stream, {events} events", file=sys.stderr)
    return 0


_COMMANDS: dict[str, Command] = {
    "demo": _demo,
    "record": _record,
    "run": _run,
    "show": _show,
    "play": _play,
    "convert": _convert,
    "serve": _serve,
    "proxy": _proxy,
    "check": _check,
    "diff": _diff,
    "synth": _synth,
}


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


if __name__ == "__main__":
    sys.exit(main())
