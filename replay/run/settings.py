"""The settings of a cassette session, as environment variables, and carrying a session into
the processes it starts.

`replay record` / `replay run` start their program with these variables (`settings_environment`);
replay's start-up hook (`replay.run.site.sitecustomize`) starts a session from them. A
`use_cassette` session carries itself into the Python processes started inside it
(`carry_session`, through `replay.run.descendants`): the same variables, marked
`ENV_DESCENDANT`, and its options themselves for a `multiprocessing` worker when they pickle.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from replay.clock import SpeedLike, format_speed
from replay.engine.conversation import ALLOWED_LEFTOVERS
from replay.errors import ConfigurationError
from replay.matching import DEFAULT_MATCH_ON
from replay.run.descendants import Carrier, carry
from replay.session.args import session_speed
from replay.session.options import SessionOptions, redactor_for

__all__ = [
    "ARRIVE",
    "ENV_ALLOW_REPEATS",
    "ENV_CASSETTE",
    "ENV_DESCENDANT",
    "ENV_FAULTS",
    "ENV_IGNORE_HOSTS",
    "ENV_IGNORE_LOCALHOST",
    "ENV_MATCH_ON",
    "ENV_PARTS_DIR",
    "ENV_REACH_DIR",
    "ENV_RECORD_MODE",
    "ENV_REDACT_HEADERS",
    "ENV_REDACT_QUERY",
    "ENV_SPEED",
    "ENV_STATUS_FD",
    "ENV_UNCARRIED",
    "ENV_WEBSOCKET_ALLOW",
    "LIBRARY",
    "SESSION_NAMES",
    "carry_session",
    "options_from",
    "refusal",
    "settings_environment",
    "speed_text",
]

ENV_CASSETTE = "REPLAY_CASSETTE"
"""The cassette (an absolute path); without it the hook does nothing. With `ENV_PARTS_DIR`
the processes record into parts, and this is the file the parent merges them into."""
ENV_RECORD_MODE = "REPLAY_RECORD_MODE"
"""The record mode: none, once, new_episodes or all."""
ENV_SPEED = "REPLAY_SPEED"
"""The replay speed, as `use_cassette` reads it ("instant", "1", "10x", "virtual")."""
ENV_FAULTS = "REPLAY_FAULTS"
"""The faults to apply at replay: a JSON list of specs (`replay.faults.parse` reads each)."""
ENV_STATUS_FD = "REPLAY_STATUS_FD"
"""A writable file descriptor for progress lines (recording with a terminal only)."""
ENV_IGNORE_HOSTS = "REPLAY_IGNORE_HOSTS"
"""Hosts whose requests go live, unrecorded: a JSON list (`use_cassette`'s `ignore_hosts`)."""
ENV_IGNORE_LOCALHOST = "REPLAY_IGNORE_LOCALHOST"
""""1": loopback hosts go live, unrecorded, too."""
ENV_PARTS_DIR = "REPLAY_PARTS_DIR"
"""If set, each process records into a cassette of its own there (see `replay.run.site`)."""
ENV_REACH_DIR = "REPLAY_REACH_DIR"
"""If set, each process writes there, as it ends, how many requests went through its
session: the parent can then tell a program that never loaded replay (no file) from one
whose requests went elsewhere (zero) (`replay.run.report.Reach`)."""
ENV_DESCENDANT = "REPLAY_DESCENDANT"
""""1" (`LIBRARY`: of a `use_cassette` session): this process was started by one with a
session (a child): it keeps each recording in parts beside the cassette as it finishes,
and leaves them for its parent to merge."""
#: `ENV_DESCENDANT` of a child of a `use_cassette` session (its errors advise keywords).
LIBRARY = "library"
ENV_MATCH_ON = "REPLAY_MATCH_ON"
"""The matchers, a JSON list of names (default: `replay.matching.DEFAULT_MATCH_ON`)."""
ENV_REDACT_HEADERS = "REPLAY_REDACT_HEADERS"
"""Header names redacted besides the defaults: a JSON list."""
ENV_REDACT_QUERY = "REPLAY_REDACT_QUERY"
"""Query parameter (and body field) names redacted besides the defaults: a JSON list."""
ENV_ALLOW_REPEATS = "REPLAY_ALLOW_REPEATS"
""""1": one recorded interaction may answer several requests."""
ENV_WEBSOCKET_ALLOW = "REPLAY_WEBSOCKET_ALLOW"
"""What a WebSocket conversation may leave unconsumed (`websocket_allow`): a JSON list of
frame kinds and event types, when not the default."""
ENV_UNCARRIED = "REPLAY_UNCARRIED"
"""What of the parent's session could not be passed on by name (a `before_record` hook,
matchers that are callables): a JSON list. A child given only the names refuses to record
(a hook it cannot run would leave its recordings less redacted than the parent's)."""

#: The names a session's settings use (what a process with a session passes on).
SESSION_NAMES = (
    ENV_CASSETTE,
    ENV_RECORD_MODE,
    ENV_SPEED,
    ENV_FAULTS,
    ENV_IGNORE_HOSTS,
    ENV_IGNORE_LOCALHOST,
    ENV_PARTS_DIR,
    ENV_REACH_DIR,
    ENV_STATUS_FD,
    ENV_DESCENDANT,
    ENV_MATCH_ON,
    ENV_REDACT_HEADERS,
    ENV_REDACT_QUERY,
    ENV_ALLOW_REPEATS,
    ENV_WEBSOCKET_ALLOW,
    ENV_UNCARRIED,
)

#: The function that starts a carried session in a `multiprocessing` worker.
ARRIVE = "replay.run.site:arrive"


def speed_text(speed: SpeedLike) -> str:
    """A speed as `ENV_SPEED` holds it."""
    virtual, played = session_speed(speed)
    if virtual:  # as recorded, or a policy, on virtual time
        return "virtual" if played == 1.0 else f"virtual,{format_speed(played)}"
    return format_speed(played)


def settings_environment(
    cassette: Path,
    *,
    record_mode: str,
    speed: str,
    status_fd: int | None = None,
    parts_dir: Path | None = None,
    faults: Sequence[str] = (),
    ignore_hosts: Sequence[str] = (),
    ignore_localhost: bool = False,
    reach_dir: Path | None = None,
) -> Mapping[str, str]:
    """The `ENV_*` variables that make the hook start a session with these settings.

    `faults` are specs (`repr` of a `replay.faults` value), parsed again by the child.
    """
    settings = {
        ENV_CASSETTE: str(cassette.resolve()),
        ENV_RECORD_MODE: record_mode,
        ENV_SPEED: speed,
    }
    if faults:
        settings[ENV_FAULTS] = json.dumps(list(faults))
    if ignore_hosts:
        settings[ENV_IGNORE_HOSTS] = json.dumps(list(ignore_hosts))
    if ignore_localhost:
        settings[ENV_IGNORE_LOCALHOST] = "1"
    if status_fd is not None:
        settings[ENV_STATUS_FD] = str(status_fd)
    if parts_dir is not None:
        settings[ENV_PARTS_DIR] = str(parts_dir.resolve())
    if reach_dir is not None:
        settings[ENV_REACH_DIR] = str(reach_dir.resolve())
    return settings


def _option_settings(options: SessionOptions) -> dict[str, str]:
    """What of `options` the names carry (beyond the cassette, mode and speed)."""
    settings: dict[str, str] = {}
    uncarried = []
    names = [name for name in options.match_on if isinstance(name, str)]
    if len(names) < len(options.match_on):
        uncarried.append("match_on")
    if tuple(names) != DEFAULT_MATCH_ON:
        settings[ENV_MATCH_ON] = json.dumps(names)
    redactor = options.redactor
    if redactor.headers:
        settings[ENV_REDACT_HEADERS] = json.dumps(sorted(redactor.headers))
    if redactor.query_parameters:
        settings[ENV_REDACT_QUERY] = json.dumps(sorted(redactor.query_parameters))
    if redactor.hook is not None:
        uncarried.append("before_record")
    if uncarried:
        settings[ENV_UNCARRIED] = json.dumps(uncarried)
    specs = [repr(fault) for fault in options.faults if getattr(fault, "where", None) is None]
    if specs:
        settings[ENV_FAULTS] = json.dumps(specs)
    if options.ignore_hosts:
        settings[ENV_IGNORE_HOSTS] = json.dumps(sorted(options.ignore_hosts))
    if options.ignore_localhost:
        settings[ENV_IGNORE_LOCALHOST] = "1"
    if options.allow_playback_repeats:
        settings[ENV_ALLOW_REPEATS] = "1"
    if options.websocket_allow != ALLOWED_LEFTOVERS:
        settings[ENV_WEBSOCKET_ALLOW] = json.dumps(sorted(options.websocket_allow))
    return settings


def carry_session(
    path: Path,
    record_mode: str,
    speed: SpeedLike,
    options: SessionOptions,
    forked: Callable[[], None],
) -> Carrier:
    """Carry a `use_cassette` session into the processes started until the carrier ends:
    its settings by name, its `options` for `multiprocessing` workers (`forked`: what a
    forked child does with the session it has a copy of)."""
    settings = {
        ENV_CASSETTE: os.path.abspath(path),  # (not `resolve`: no system call per part)
        ENV_RECORD_MODE: record_mode,
        ENV_SPEED: speed_text(speed),
        ENV_DESCENDANT: LIBRARY,
        **_option_settings(options),
    }
    return carry(settings, arrive=ARRIVE, payload=options, forked=forked, yields_to=ENV_CASSETTE)


def options_from(environ: Mapping[str, str], given: object) -> SessionOptions:
    """The options of the session the environment asks for: `given` ones (a parent's),
    with the record mode and speed in force there, or made of the names."""
    mode = environ.get(ENV_RECORD_MODE) or "once"
    speed = environ.get(ENV_SPEED) or "instant"
    if isinstance(given, SessionOptions):
        return attrs.evolve(given, record_mode=mode, speed=speed)
    match_on = _strings(environ.get(ENV_MATCH_ON) or "[]", ENV_MATCH_ON, "matcher names")
    keywords: dict[str, Any] = {"match_on": tuple(match_on)} if match_on else {}
    if ENV_WEBSOCKET_ALLOW in environ:
        allowed = _strings(environ[ENV_WEBSOCKET_ALLOW], ENV_WEBSOCKET_ALLOW, "frame kinds")
        keywords["websocket_allow"] = frozenset(allowed)
    return SessionOptions(
        record_mode=mode,
        speed=speed,
        faults=_strings(environ.get(ENV_FAULTS) or "[]", ENV_FAULTS, "fault specs"),
        ignore_hosts=_strings(environ.get(ENV_IGNORE_HOSTS) or "[]", ENV_IGNORE_HOSTS, "hosts"),
        ignore_localhost=environ.get(ENV_IGNORE_LOCALHOST) == "1",
        allow_playback_repeats=environ.get(ENV_ALLOW_REPEATS) == "1",
        redactor=redactor_for(
            _strings(environ.get(ENV_REDACT_HEADERS) or "[]", ENV_REDACT_HEADERS, "headers"),
            _strings(environ.get(ENV_REDACT_QUERY) or "[]", ENV_REDACT_QUERY, "names"),
            None,
        ),
        **keywords,
    )


def refusal(environ: Mapping[str, str]) -> str | None:
    """Why a child that some of its parent session's options (a hook, matchers that are
    callables) could not reach records nothing (it replays by the named matchers), if so."""
    uncarried = _strings(environ.get(ENV_UNCARRIED) or "[]", ENV_UNCARRIED, "options")
    if not uncarried:
        return None
    what = " and ".join(uncarried)
    return (
        f"This child process cannot record: the session's {what} could not be passed "
        "to it (only a multiprocessing worker gets them, and only when they pickle: "
        "module-level functions), and recording without them would store less "
        "redacted interactions than the parent's, or match them otherwise. Record in "
        "the parent process, or use module-level functions and multiprocessing."
    )


def _strings(text: str, name: str, what: str) -> list[str]:
    try:
        items = json.loads(text)
    except ValueError:
        items = None
    if not isinstance(items, list) or not all(isinstance(item, str) for item in items):
        raise ConfigurationError(f"{name} must be a JSON list of {what}, not {text!r}")
    return items
