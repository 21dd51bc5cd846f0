"""Start-up hook of a program run by `replay record` / `replay run`; replay never imports it.

The parent puts this file's directory first on PYTHONPATH, so Python's `site` imports it,
as `sitecustomize`, before the program's first line. It:

1. takes its directory back off `sys.path` (the program sees the path it would have seen);
2. starts the process-wide cassette session the environment asks for
   (`replay._child.start_from_environment`);
3. imports the `sitecustomize` this one hides, if the environment has one, so that one
   still runs, after ours, and `import sitecustomize` still finds it.

If replay cannot be imported here (CMD is a Python without replay installed), a recording
goes on unrecorded, with a warning; a replay with record mode "none" stops with status 1
instead, because it promised never to touch the network. Any other failure to start the
session (a corrupt cassette) also stops the program with one line and status 1.

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


def _start_session() -> None:
    if not os.environ.get(_ENV_CASSETTE):
        return
    try:
        from replay._child import start_from_environment
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
_start_session()
_chain_hidden_sitecustomize()
