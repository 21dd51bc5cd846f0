"""`replay serve` and `replay proxy`: HTTP servers on 127.0.0.1 that replay or record."""

from __future__ import annotations

import argparse
from pathlib import Path

from replay.cli._args import CASSETTE_HELP, Command, Verbs, add_fault_option, verb
from replay.server.guard import REQUEST_TIMEOUT

__all__ = ["COMMANDS", "add_verbs"]


def add_verbs(verbs: Verbs) -> None:
    """Add the parsers of `serve` and `proxy`."""
    serve = verb(
        verbs,
        "serve",
        "serve a cassette over HTTP on 127.0.0.1, with its timing",
        "Run an HTTP server on 127.0.0.1 that answers each request from CASSETTE at its "
        "recorded pace, for clients in any language; a WebSocket conversation is answered "
        "frame by frame (its upgrade, then each turn the client's frames release).",
        "replay serve cassettes/app.msgpack --port 8080 --speed 1",
    )
    serve.add_argument("cassette", type=Path, metavar="CASSETTE", help=CASSETTE_HELP)
    serve.add_argument("--port", type=int, default=8080, help="port (default 8080; 0 = any)")
    serve.add_argument(
        "--speed", default="1", help="1 (default), 10x, instant, or a policy: 'max_gap=0.05'"
    )
    serve.add_argument("--repeat", action="store_true", help="let interactions play again")
    serve.add_argument(
        "--allow-host",
        action="append",
        default=[],
        dest="allow_hosts",
        metavar="HOST",
        help="a Host name to answer besides 127.0.0.1, localhost and [::1] (repeatable)",
    )
    add_fault_option(serve)
    _add_timeout_option(serve)

    proxy = verb(
        verbs,
        "proxy",
        "record any client through a local reverse proxy",
        "Run a reverse proxy on 127.0.0.1 that forwards to --target, streaming responses "
        "through as they arrive, and records them into -o OUT (saved in batches while it "
        "runs, at most every --save-interval seconds, and in full on exit: Ctrl-C or "
        "SIGTERM). The recording is the proxy's own: an existing OUT is refused unless "
        "--overwrite lets the recording replace it (it is never merged).",
        "replay proxy --target https://api.openai.com -o cassettes/node.msgpack --port 8080",
    )
    proxy.add_argument("--target", required=True, help="the upstream base URL")
    proxy.add_argument("-o", "--out", type=Path, required=True, help="the cassette to write")
    proxy.add_argument("--port", type=int, default=8080, help="port (default 8080; 0 = any)")
    proxy.add_argument(
        "--overwrite",
        action="store_true",
        help="let the recording replace an existing OUT (without it, an existing OUT is "
        "refused: the proxy never merges into it)",
    )
    proxy.add_argument(
        "--save-interval",
        type=float,
        default=0.5,
        metavar="SECONDS",
        help="while interactions keep finishing, save them together at most this often "
        "(default 0.5; a crash loses at most the last interval)",
    )
    _add_timeout_option(proxy)


def _add_timeout_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--request-timeout",
        type=float,
        default=REQUEST_TIMEOUT,
        metavar="SECONDS",
        help="close a connection whose request is not sent whole within this time "
        f"(default {REQUEST_TIMEOUT:g})",
    )


def _serve(args: argparse.Namespace) -> int:
    from replay.server.serve import serve

    serve(
        args.cassette,
        port=args.port,
        speed=args.speed,
        repeat=args.repeat,
        faults=args.faults,
        allow_hosts=args.allow_hosts,
        request_timeout=args.request_timeout,
    )
    return 0


def _proxy(args: argparse.Namespace) -> int:
    from replay.server.proxy import proxy

    proxy(
        args.target,
        args.out,
        port=args.port,
        save_interval=args.save_interval,
        request_timeout=args.request_timeout,
        overwrite=args.overwrite,
    )
    return 0


COMMANDS: dict[str, Command] = {"serve": _serve, "proxy": _proxy}
