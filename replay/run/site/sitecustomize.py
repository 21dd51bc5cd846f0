"""Start-up hook of a program run by `replay record` / `replay run`; replay never imports it.

The parent puts this file's directory first on PYTHONPATH, so Python's `site` imports it,
as `sitecustomize`, before the program's first line. `replay.adapters.network.block_network` puts
it there too, for the Python processes started while the network is blocked. It:

1. takes its directory back off `sys.path` (the program sees the path it would have seen);
2. blocks the network if the environment says so (`replay.adapters.network.block_from_environment`);
3. starts the process-wide cassette session the environment asks for
   (`replay.run.site.start_from_environment`);
4. imports the `sitecustomize` this one hides, if the environment has one, so that one
   still runs, after ours, and `import sitecustomize` still finds it.

If replay cannot be imported here (CMD is a Python without replay installed), a recording
goes on unrecorded, with a warning; a replay with record mode "none" stops with status 1
instead, because it promised never to touch the network. Any other failure to start the
session (a corrupt cassette) also stops the program with one line and status 1. A blocked
network stays blocked without replay: a small guard of the standard library's own refuses
connections and datagrams to hosts not allowed (with a `ConnectionRefusedError`).

Python started with -S, -E or -I skips this hook (no site, or no PYTHONPATH): such a
program runs unrecorded.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
# Spelled out again here: this must work even when replay itself cannot be imported.
_ENV_RECORD_MODE = "REPLAY_RECORD_MODE"
_ENV_CASSETTE = "REPLAY_CASSETTE"
_ENV_BLOCK_NETWORK = "REPLAY_BLOCK_NETWORK"


def _is_here(entry: str) -> bool:
    if not entry:  # "" is the current directory, which the program may rely on
        return False
    try:
        return os.path.samefile(entry, _HERE)
    except OSError:
        return False


def _stop(message: str) -> None:
    sys.stderr.write(f"replay: error: {message}\n")
    sys.stderr.flush()
    os._exit(1)


def _multiprocessing_helper() -> bool:
    """Whether this is a `multiprocessing` spawn worker (its preparation data starts the
    session, with the parent's options: `replay.run.descendants`), forkserver (its
    workers get theirs the same way) or resource tracker (which makes no requests). The
    last two outlive the session that started them: they forget its settings."""
    argv = getattr(sys, "orig_argv", sys.argv)
    if "--multiprocessing-fork" in argv:
        return True
    code = argv[argv.index("-c") + 1] if "-c" in argv[:-1] else ""
    if not code.startswith("from multiprocessing."):
        return False
    for name in [name for name in os.environ if name.startswith("REPLAY_")]:
        if name != _ENV_BLOCK_NETWORK:  # (a block stays: see `replay.adapters.network`)
            del os.environ[name]
    return True


def _start_session() -> None:
    if not os.environ.get(_ENV_CASSETTE) or _multiprocessing_helper():
        return
    try:
        from replay.run.site import start_from_environment
    except ImportError as error:
        problem = f"{sys.executable} cannot import replay ({error})"
        if os.environ.get(_ENV_RECORD_MODE) == "none":
            _stop(f"{problem}; not running it unprotected with record mode 'none'")
        sys.stderr.write(f"replay: warning: {problem}; this program runs unrecorded\n")
        return
    try:
        start_from_environment()
    except Exception as error:  # one line, as the CLI prints errors; no half-recorded run
        lines = str(error).splitlines()
        _stop(lines[0] if lines else type(error).__name__)


def _block_network() -> None:
    if os.environ.get(_ENV_BLOCK_NETWORK) is None:
        return
    try:
        from replay.adapters.network import block_from_environment
    except ImportError:
        _block_without_replay(os.environ[_ENV_BLOCK_NETWORK])
        return
    try:
        block_from_environment()
    except Exception as error:  # a bad variable: never run with the network open
        lines = str(error).splitlines()
        _stop(lines[0] if lines else type(error).__name__)


def _block_without_replay(text: str) -> None:
    """The socket layer of `replay.adapters.network`, in the standard library alone."""
    import ipaddress
    import json
    import socket

    try:
        allowed = {str(host).strip("[]").lower() for host in json.loads(text)}
    except (ValueError, TypeError):
        _stop(f"{_ENV_BLOCK_NETWORK} must be a JSON list of hosts, not {text!r}")
        return
    loopback = "127.0.0.1" in allowed or "::1" in allowed
    events = ("socket.connect", "socket.sendto", "socket.sendmsg")

    def is_allowed(host: str) -> bool:
        host = host.strip("[]").lower()
        try:
            return host in allowed or (loopback and ipaddress.ip_address(host).is_loopback)
        except ValueError:
            return False

    def refuse(event: str, args: tuple) -> None:  # type: ignore[type-arg]
        if event in events and isinstance(args[1], tuple) and args[1]:
            family = getattr(args[0], "family", None)
            host = str(args[1][0])
            if family in (socket.AF_INET, socket.AF_INET6) and not is_allowed(host):
                raise ConnectionRefusedError(
                    f"{host} was refused: the network is blocked (replay; "
                    f"{sys.executable} cannot import replay)"
                )

    sys.addaudithook(refuse)


def _chain_hidden_sitecustomize() -> None:
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", sys.path)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    ours = sys.modules.get("sitecustomize")
    sys.modules["sitecustomize"] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        # As a failed import would: `site` then prints "Error in sitecustomize" as usual.
        if ours is None:
            del sys.modules["sitecustomize"]
        else:
            sys.modules["sitecustomize"] = ours
        raise


sys.path[:] = [entry for entry in sys.path if not _is_here(entry)]
_block_network()
_start_session()
_chain_hidden_sitecustomize()
