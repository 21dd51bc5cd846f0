"""Settings that reach every Python process started while they are active, however it starts.

A carrier (`carry`) holds settings — environment-style names and values (the `REPLAY_*`
variables of a cassette session, of a network block) — from its start to its `end`. While
any is active, each Python process this one starts gets them all, before its first line:

- an exec'd process (`subprocess`, asyncio's subprocesses, `os.system`...) through its
  environment: the settings and replay's start-up hook directory (first on PYTHONPATH) are
  in `os.environ`, and a `subprocess.Popen` given an environment of its own (`env={...}`)
  has them merged into that one (`Popen._execute_child` is wrapped), as have `os.execve`,
  `os.posix_spawn` and `os.posix_spawnp` (and so `os.execle`, `os.spawnve`...); the hook
  (`replay.run.site.sitecustomize`) acts on them at start-up;
- a `multiprocessing` worker started by `spawn` or `forkserver` (a forkserver started
  before the carrier too) through its preparation data: `spawn.get_preparation_data` adds
  an object whose unpickling in the worker applies the settings. The worker
  (`multiprocessing.spawn._main`, which a forkserver's fork runs too) unpickles the
  preparation data before it prepares `__main__` and before it unpickles the process object,
  so the settings are in force before any of the program's code runs there;
- a forked process (`os.fork`, `multiprocessing`'s fork) through an at-fork handler: each
  carrier's `forked` callback runs in the child (it already has the settings in memory).

Each carrier names the function that applies its settings in a new process (`arrive`, as
"module:function": resolved there, by name, as pickle resolves a class), called with its
settings and its payload (an object pickled for a `multiprocessing` worker, when it pickles;
None otherwise, and for exec'd processes, which read the environment instead).

What is not reached: programs that are not Python (they get the environment, and do what
they like with it; a Python they start is reached if they pass it on), Python started with
-S, -E or -I (no start-up hook), and processes started by C code (`_posixsubprocess` used
directly, extensions).
"""

from __future__ import annotations

import functools
import importlib
import inspect
import os
import pickle
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

__all__ = ["HOOK_DIRECTORY", "Carrier", "active_settings", "carry", "with_hook"]

#: The directory of replay's `sitecustomize`, put first on the PYTHONPATH of children.
HOOK_DIRECTORY = str(Path(__file__).resolve().parent / "site")

#: The key of the preparation data of a `multiprocessing` worker that carries the settings.
_PREPARATION_KEY = "replay_descendants"

_lock = threading.RLock()
_active: list[Carrier] = []
#: Names this module set in `os.environ`: what each held before, and what was set.
_managed: dict[str, tuple[str | None, str]] = {}
_installed = False


class Carrier:
    """Settings carried into the processes started until `end` (made by `carry`)."""

    def __init__(
        self,
        settings: Mapping[str, str],
        arrive: str,
        payload: object,
        forked: Callable[[], None] | None,
        yields_to: str | None,
    ) -> None:
        self.settings = dict(settings)
        self.arrive = arrive
        self.payload = payload
        self.forked = forked
        self.yields_to = yields_to

    def end(self) -> None:
        """Carry these settings no further (the environment is put back as it was)."""
        with _lock:
            if self in _active:
                _active.remove(self)
                _sync_environ()


def carry(
    settings: Mapping[str, str],
    *,
    arrive: str,
    payload: object = None,
    forked: Callable[[], None] | None = None,
    yields_to: str | None = None,
) -> Carrier:
    """Carry `settings` into every Python process started from now until `Carrier.end`.

    Args:
        settings: environment variables (names and values).
        arrive: "module:function" that applies the settings in a `multiprocessing` worker,
            called there as `function(settings, payload)`; it must not mind being called in
            a process whose start-up hook applied them already.
        payload: what `function` gets in a worker, if it pickles (else None).
        forked: called in a forked child of this process while the carrier is active.
        yields_to: one of the settings' names, which says whose they are: a later carrier
            of the same name replaces these wholly while it is active (an inner session,
            the outer one), and a Popen given an environment of its own that sets it to
            another value gets none of these settings (it asks for other ones, as `replay
            record` run inside a session does for its program).
    """
    carrier = Carrier(settings, arrive, payload, forked, yields_to)
    with _lock:
        _install()
        _active.append(carrier)
        _sync_environ()
    return carrier


def _in_force() -> list[Carrier]:
    """The active carriers, less those a later one of the same `yields_to` replaces."""
    carriers = list(_active)
    latest = {c.yields_to: c for c in carriers if c.yields_to is not None}
    return [c for c in carriers if c.yields_to is None or latest[c.yields_to] is c]


def active_settings() -> dict[str, str]:
    """The settings in force (a later carrier's value wins), without the hook."""
    merged: dict[str, str] = {}
    for carrier in _in_force():
        merged.update(carrier.settings)
    return merged


def with_hook(python_path: str | None) -> str:
    """A PYTHONPATH value with replay's hook directory first (and only there)."""
    entries = [e for e in (python_path or "").split(os.pathsep) if e and e != HOOK_DIRECTORY]
    return os.pathsep.join([HOOK_DIRECTORY, *entries])


def _sync_environ() -> None:
    """Make `os.environ` hold the active settings; put back what the inactive ones changed
    (a variable changed by someone else since stays as it is now)."""
    wanted = active_settings()
    if wanted:
        wanted["PYTHONPATH"] = with_hook(os.environ.get("PYTHONPATH"))
    for name in [name for name in _managed if name not in wanted]:
        before, set_to = _managed.pop(name)
        if os.environ.get(name) != set_to:
            continue
        if before is None:
            del os.environ[name]
        else:
            os.environ[name] = before
    for name, value in wanted.items():
        before = _managed[name][0] if name in _managed else os.environ.get(name)
        _managed[name] = (before, value)
        if os.environ.get(name) != value:
            os.environ[name] = value


def _merged_env(env: Any) -> Any:
    """`env` (a Popen's own environment) with the active settings and the hook merged in
    (None, which means `os.environ`, stays: that has them)."""
    if env is None:
        return None
    merged = dict(env)
    text = {os.fsdecode(name): os.fsdecode(value) for name, value in merged.items()}
    settings: dict[str, str] = {}
    for carrier in _in_force():
        name = carrier.yields_to
        if name is None or text.get(name) in (None, carrier.settings.get(name)):
            settings.update(carrier.settings)
    if not settings:
        return env
    if any(isinstance(name, bytes) for name in merged):
        for name, value in settings.items():
            merged[os.fsencode(name)] = os.fsencode(value)
        path = merged.get(b"PYTHONPATH")
        merged[b"PYTHONPATH"] = os.fsencode(with_hook(None if path is None else os.fsdecode(path)))
        return merged
    merged.update(settings)
    merged["PYTHONPATH"] = with_hook(merged.get("PYTHONPATH"))
    return merged


def _install() -> None:
    """Wrap `Popen._execute_child` and `get_preparation_data`, and register the at-fork
    handler: once, and idle while no carrier is active."""
    global _installed
    if _installed:
        return
    _installed = True
    original = subprocess.Popen._execute_child  # type: ignore[attr-defined]
    at = list(inspect.signature(original).parameters).index("env") - 1  # (after self)

    def _execute_child(self: subprocess.Popen[Any], *args: Any, **kwargs: Any) -> Any:
        if _active:
            if "env" in kwargs and kwargs["env"] is not None:
                kwargs["env"] = _merged_env(kwargs["env"])
            elif len(args) > at and args[at] is not None:
                args = (*args[:at], _merged_env(args[at]), *args[at + 1 :])
        return original(self, *args, **kwargs)

    subprocess.Popen._execute_child = _execute_child  # type: ignore[attr-defined]
    for name in ("execve", "posix_spawn", "posix_spawnp"):  # (the `os.exec*e`, `os.spawn*e`)
        if hasattr(os, name):
            setattr(os, name, _with_env_merged(getattr(os, name)))
    from multiprocessing import spawn

    prepared = spawn.get_preparation_data

    def get_preparation_data(name: str) -> dict[str, Any]:
        data: dict[str, Any] = prepared(name)
        if _active:
            data[_PREPARATION_KEY] = _Carried(_in_force())
        return data

    spawn.get_preparation_data = get_preparation_data
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_after_fork)


def _with_env_merged(function: Callable[..., Any]) -> Callable[..., Any]:
    """`function(path, argv, env, ...)` with the active settings merged into `env`."""

    @functools.wraps(function)
    def merged(path: Any, argv: Any, env: Any, *args: Any, **kwargs: Any) -> Any:
        return function(path, argv, _merged_env(env) if _active else env, *args, **kwargs)

    return merged


def _after_fork() -> None:
    global _lock
    _lock = threading.RLock()  # (held, perhaps, by a thread of the parent's that is gone)
    for carrier in list(_active):
        if carrier.forked is not None:
            carrier.forked()


class _Carried:
    """The settings in a `multiprocessing` worker's preparation data: unpickled, it applies
    them (`_arrive`)."""

    def __init__(self, carriers: list[Carrier]) -> None:
        self.carriers = carriers

    def __reduce__(self) -> tuple[Any, ...]:
        entries = [(c.arrive, c.settings, _pickled(c.payload)) for c in self.carriers]
        return (_arrive, (entries, list(sys.path)))


def _pickled(payload: object) -> bytes | None:
    if payload is None:
        return None
    try:
        return pickle.dumps(payload)
    except Exception:  # a lambda, a lock...: the worker goes by the named settings
        return None


def _arrive(entries: list[tuple[str, dict[str, str], bytes | None]], path: list[str]) -> None:
    """In a `multiprocessing` worker, as its preparation data is unpickled: put the settings
    in the environment (for its own children), then let each carrier apply its own (with
    the parent's `sys.path`, which the worker is about to take anyway, to find what the
    payloads name)."""
    sys.path.extend(entry for entry in path if entry not in sys.path)
    settings: dict[str, str] = {}
    for _, carried, _ in entries:
        settings.update(carried)
    os.environ.update(settings)
    os.environ["PYTHONPATH"] = with_hook(os.environ.get("PYTHONPATH"))
    late = []
    for arrive, carried, blob in entries:
        module, _, name = arrive.partition(":")
        function = getattr(importlib.import_module(module), name)
        payload = _unpickled(blob)
        if payload is None and blob is not None:
            late.append((function, carried, blob))
        function(carried, payload)
    if late:
        _after_prepare(late)


def _unpickled(blob: bytes | None) -> object:
    if blob is None:
        return None
    try:
        return pickle.loads(blob)
    except Exception:  # (not here: by the names, then)
        return None


def _after_prepare(late: list[tuple[Callable[[Any, Any], None], dict[str, str], bytes]]) -> None:
    """Try the payloads that could not be unpickled yet once more when the worker has
    imported `__main__` (a hook defined in the main script is found only then): before the
    process object is unpickled, and so before the worker's code runs."""
    from multiprocessing import spawn

    prepare = spawn.prepare

    def prepared(data: Mapping[str, Any]) -> None:
        spawn.prepare = prepare
        prepare(data)
        for function, carried, blob in late:
            payload = _unpickled(blob)
            if payload is not None:
                function(carried, payload)

    spawn.prepare = prepared
