"""pytest plugin: the `use_cassette` marker, the `cassette` fixture, options and a summary.

Thin by design: every behaviour lives in the library (`use_cassette`, `block_network`,
`default_cassette_path`); this module reads options and markers and reports. It imports
nothing of the library until a test needs it, since every pytest run of a project that
installs replay loads it.

The three forms of a test's cassette (the marker, the `cassette` fixture, the library's
`@replay.use_cassette` or `with`) behave as one: the run imposes its settings on every
cassette session (`replay.session.imposed`), and each session is reported the same way. Precedence:

- record mode: the command line, then the marker's or call's keyword, then the ini file,
  then `once`. The command line binds everything, so `--record-mode=none` is always offline.
- speed: the marker's or call's keyword, then the command line, then the ini file, then
  `instant`. A test that asks for `speed="virtual"` or `speed=1` needs it to hold.
- matching: the marker's `match_on`, then the ini file's `replay_match_on` (the marker and
  the fixture; a library call takes its own or the library's default).

A module's or class's marks give a test's own mark defaults (merged, the closest winning per
key). Without pytest-recording, its surface (`@pytest.mark.vcr`, the `vcr` fixture...) is
served by `replay.plugin.vcr_compat`.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import pytest

if TYPE_CHECKING:
    from replay.session.lifecycle import CassetteSession
    from replay.store.cassette import Cassette

#: The record modes, and rewrite: delete the cassette and record it again.
RECORD_MODES = ("none", "once", "new_episodes", "all", "rewrite")


def _pytest_recording_comes(pluginmanager: Any) -> bool:
    """Whether pytest-recording will load after this plugin (it declares options we do)."""
    if pluginmanager.has_plugin("recording") or pluginmanager.is_blocked("recording"):
        return False  # loaded already (its options are declared), or never will be
    if os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD"):
        return False
    return importlib.util.find_spec("pytest_recording") is not None


def _add_shared(group: Any, name: str, **attrs: Any) -> None:
    """Declare an option pytest-recording declares too, unless it did already.

    pytest refuses one option declared twice, so when both plugins are installed they share
    `--record-mode` and `--block-network`: the one flag then drives both.
    """
    with contextlib.suppress(ValueError):  # declared by pytest-recording, loaded first
        group.addoption(name, **attrs)


def _library_not_rewritten(pluginmanager: Any) -> None:
    """Let the library import as any other: pytest marks every package of a distribution that
    ships a plugin for assertion rewriting, and so parses, rewrites and compiles each replay
    module a run imports itself, ignoring its bytecode (some 35 ms of the first cassette's
    import, every run, where bytecode is not written: `PYTHONDONTWRITEBYTECODE`, read-only
    site-packages). The library's asserts are not a test's. No public API undoes the marking;
    if pytest's private names change, modules are rewritten as before."""
    hook = getattr(pluginmanager, "rewrite_hook", None)
    marked, cache = (
        getattr(hook, "_must_rewrite", None),
        getattr(hook, "_marked_for_rewrite_cache", None),
    )
    if isinstance(marked, set) and isinstance(cache, dict) and "replay" in marked:
        marked.discard("replay")
        cache.clear()


def pytest_addoption(parser: pytest.Parser, pluginmanager: Any) -> None:
    """The command-line options (those pytest-recording shares left to it, when it comes)
    and the ini settings."""
    _library_not_rewritten(pluginmanager)
    group = parser.getgroup("replay", "replay: record and replay streaming HTTP")
    _add_options(group, declare_shared=not _pytest_recording_comes(pluginmanager))
    _add_ini(parser)


def _add_options(group: Any, *, declare_shared: bool) -> None:
    """The command-line options; `--record-mode` and `--block-network` only if
    `declare_shared` (else pytest-recording declares them, with the same meaning)."""
    if declare_shared:
        _add_shared(
            group,
            "--record-mode",
            choices=RECORD_MODES,
            default=None,
            help="none / once / new_episodes / all, or rewrite (delete and record again); "
            "default: ini replay_record_mode, else once",
        )
    group.addoption(
        "--replay-speed",
        default=None,
        help="replay speed of cassettes that choose none: instant, 1, 10x, virtual, or a "
        "policy such as ttft=recorded,rest=instant (default: ini replay_speed, else instant)",
    )
    group.addoption(
        "--cassette-dir",
        default=None,
        help="directory of default cassettes (default: cassettes/<module>/ beside each test file)",
    )
    if declare_shared:
        _add_shared(
            group,
            "--block-network",
            action="store_true",
            default=None,
            help="fail any request no cassette handles (loopback allowed: see "
            "replay_allowed_hosts)",
        )
    if declare_shared:
        _add_shared(
            group,
            "--disable-recording",
            action="store_true",
            default=None,
            help="pytest-recording's: tests marked vcr run without a cassette",
        )
    group.addoption(
        "--strict-cassettes",
        action="store_true",
        default=None,
        help="fail the run if a cassette has interactions no test played (default: list them)",
    )


#: `replay.matching.DEFAULT_MATCH_ON`, spelled here: a run that uses no cassette loads none of
#: the library (a test holds the two equal).
MATCH_ON_SHOWN = ("method", "scheme", "host", "port", "path", "query", "body", "last_event_id")


def _add_ini(parser: pytest.Parser) -> None:
    """The ini settings: the defaults of the command-line options, and the hosts."""
    parser.addini("replay_record_mode", "default record mode", default="once")
    parser.addini(
        "replay_match_on",
        f"default matchers of a cassette that names none (default: {' '.join(MATCH_ON_SHOWN)})",
        type="args",
        default=[],
    )
    parser.addini("replay_speed", "default replay speed", default="instant")
    parser.addini("replay_cassette_dir", "directory of default cassettes", default="")
    parser.addini("replay_block_network", "block the network", type="bool", default=False)
    parser.addini(
        "replay_allowed_hosts",
        "hosts reachable with --block-network (default: loopback)",
        type="args",
        default=["127.0.0.1", "::1", "localhost"],
    )
    parser.addini(
        "replay_strict_cassettes", "unplayed interactions fail", type="bool", default=False
    )
    parser.addini(
        "replay_ignore_hosts",
        "hosts whose requests go live, unrecorded (a marker's ignore_hosts= overrides)",
        type="args",
        default=[],
    )
    parser.addini(
        "replay_ignore_localhost",
        "loopback requests go live, unrecorded",
        type="bool",
        default=False,
    )


_STARTED = pytest.StashKey[float]()
_BLOCK = pytest.StashKey[contextlib.ExitStack]()


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    config.stash[_STARTED] = time.time()
    config.addinivalue_line(
        "markers",
        "use_cassette(path=None, **options): record/replay this test's HTTP traffic through "
        "a cassette (default path: cassettes/<module>/<test>.msgpack)",
    )
    _check_settings(config)
    _block_network(config)
    # (Imported here, once `pytest_addoption` kept pytest from rewriting the library.)
    from replay.plugin.run import Run

    config.pluginmanager.register(Run(config), "replay-run")
    from replay.plugin.vcr_compat import serve

    serve(config, _session_for)


def _block_network(config: pytest.Config) -> None:
    """Block the network from now (the test modules' imports and collection included) to
    `pytest_unconfigure`, if `--block-network` or `replay_block_network` asks for it."""
    from replay.plugin.run import option

    if not option(config, "block_network", "replay_block_network"):
        return
    if getattr(config.option, "dist", "no") != "no" and not hasattr(config, "workerinput"):
        return  # pytest-xdist's controller runs no test: each worker blocks its own network
    from replay.adapters.network import block_network

    stack = contextlib.ExitStack()
    stack.enter_context(block_network(config.getini("replay_allowed_hosts")))
    config.stash[_BLOCK] = stack


def pytest_unconfigure(config: pytest.Config) -> None:
    """End the block `pytest_configure` started."""
    stack = config.stash.get(_BLOCK, None)
    if stack is not None:
        del config.stash[_BLOCK]
        stack.close()


def _check_settings(config: pytest.Config) -> None:
    """Refuse a bad record mode or speed now, as a usage error, not in every test."""
    mode = config.getini("replay_record_mode")
    if mode not in RECORD_MODES:
        raise pytest.UsageError(
            f"replay_record_mode: unknown record mode {mode!r}: use one of "
            f"{', '.join(RECORD_MODES)}"
        )
    for origin, speed in (
        ("--replay-speed", config.getoption("replay_speed")),
        ("replay_speed", config.getini("replay_speed")),
    ):
        if speed is not None and speed != "instant":
            _check_speed(origin, speed)


def _check_speed(origin: str, speed: str) -> None:
    from replay.errors import ConfigurationError
    from replay.session.args import session_speed

    try:
        session_speed(speed)
    except ConfigurationError as error:
        raise pytest.UsageError(f"{origin}: {error}") from None


@pytest.hookimpl(tryfirst=True)
def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Cassettes are never tests: pytest does not offer them to the collectors (each file
    cost pytest some 300k instructions, about 75 µs, where a suite keeps one per test)."""
    return True if collection_path.suffix == ".msgpack" else None


@pytest.fixture(scope="session", autouse=True)
def _replay_run(pytestconfig: pytest.Config) -> Iterator[None]:
    """The run's settings, imposed on every cassette session (all three forms)."""
    from replay.session.imposed import Imposed, imposed

    run = pytestconfig.pluginmanager.get_plugin("replay-run")
    mode = pytestconfig.getoption("record_mode")
    settings = Imposed(
        record_mode="all" if mode == "rewrite" else mode,
        default_record_mode=_ini_mode(pytestconfig),
        default_speed=pytestconfig.getoption("replay_speed") or pytestconfig.getini("replay_speed"),
        watcher=run,
        resolve=None if run is None else run.resolve,
    )
    with imposed(settings):
        yield


def _ini_mode(config: pytest.Config) -> str:
    mode: str = config.getini("replay_record_mode")
    return "all" if mode == "rewrite" else mode


class _Settings(NamedTuple):
    """What every test's cassette takes from the run's options and ini file, read once."""

    directory: str | None
    record_mode: str | None  # --record-mode
    ini_record_mode: str
    ignore_hosts: list[str]
    ignore_localhost: bool
    match_on: list[str]


_SETTINGS = pytest.StashKey[_Settings]()


def _settings(config: pytest.Config) -> _Settings:
    settings = config.stash.get(_SETTINGS, None)
    if settings is None:
        settings = config.stash[_SETTINGS] = _Settings(
            directory=config.getoption("cassette_dir")
            or config.getini("replay_cassette_dir")
            or None,
            record_mode=config.getoption("record_mode"),
            ini_record_mode=config.getini("replay_record_mode"),
            ignore_hosts=config.getini("replay_ignore_hosts"),
            ignore_localhost=config.getini("replay_ignore_localhost"),
            match_on=config.getini("replay_match_on"),
        )
    return settings


def _session_for(request: pytest.FixtureRequest, marker: pytest.Mark | None) -> CassetteSession:
    from replay.errors import ConfigurationError
    from replay.session.lifecycle import use_cassette
    from replay.session.naming import default_cassette_path, resolve_cassette_path

    config = request.config
    settings = _settings(config)
    options = dict(marker.kwargs) if marker else {}
    args = marker.args if marker else ()
    if len(args) > 1:
        raise ConfigurationError("use_cassette takes at most one positional argument, the path")
    directory = settings.directory
    test_path: Path = request.node.path
    named = options.pop("path", None) or (args[0] if args else None)
    if named is not None:
        path = resolve_cassette_path(named, test_path, directory)
    else:
        path = default_cassette_path(test_path, request.node.nodeid, directory, config.rootpath)
    chosen = options.pop("record_mode", None)
    mode = settings.record_mode or chosen or settings.ini_record_mode
    if mode == "rewrite":
        # Delete what earlier runs wrote, not what this run (or another xdist worker of it,
        # started at the same time) has just recorded into a cassette that tests share.
        started: float = config.stash[_STARTED]
        if path.exists() and path.stat().st_mtime < started:
            path.unlink()
    if chosen is not None:  # the run's mode, imposed on every session, may still override it
        options["record_mode"] = "all" if chosen == "rewrite" else chosen
    if settings.match_on:
        options.setdefault("match_on", settings.match_on)
    options.setdefault("ignore_hosts", settings.ignore_hosts)
    options.setdefault("ignore_localhost", settings.ignore_localhost)
    return use_cassette(path, **options)


@pytest.fixture
def cassette(request: pytest.FixtureRequest) -> Iterator[Cassette]:
    """The active cassette: the marker's, or else this test's default cassette."""
    __tracebackhide__ = True
    active: Cassette | None = getattr(request.node, "_replay_cassette", None)
    if active is not None:
        yield active
        return
    with _session_for(request, None) as active:
        yield active


@pytest.fixture(autouse=True)
def _replay_marker(request: pytest.FixtureRequest) -> Iterator[None]:
    marker = request.node.get_closest_marker("use_cassette")
    if marker is not None:  # the module's and class's marks give the test's mark defaults
        from replay.plugin.vcr_compat import merged_use

        marker = merged_use(list(request.node.iter_markers("use_cassette")))
    if marker is None:
        yield
        return
    __tracebackhide__ = True
    node = request.node
    try:
        with _session_for(request, marker) as active:
            node._replay_cassette = active
            yield
    finally:
        # (What the test loaded is garbage once it ends: not kept alive by its item.)
        with contextlib.suppress(AttributeError):
            del node._replay_cassette
