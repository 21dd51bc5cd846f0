"""pytest plugin: the `use_cassette` marker, the `cassette` fixture, options and a summary.

Thin by design: every behaviour lives in the library (`use_cassette`, `block_network`,
`default_cassette_path`); this module reads options and markers and reports.

Precedence of settings: command line, then the marker's keywords, then the ini file, then
the defaults (record mode `once`, speed `instant`).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from replay.cassette import Cassette
from replay.errors import ConfigurationError, UnplayedInteractionsWarning
from replay.naming import default_cassette_path, resolve_cassette_path
from replay.network import LOOPBACK, block_network
from replay.report import SessionLog, SessionRecord
from replay.session import CassetteSession, forced_record_mode, use_cassette

_RECORD_MODES = ("none", "once", "new_episodes", "all", "rewrite")


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


def pytest_addoption(parser: pytest.Parser, pluginmanager: Any) -> None:
    group = parser.getgroup("replay", "replay: record and replay streaming HTTP")
    declare_shared = not _pytest_recording_comes(pluginmanager)
    if declare_shared:
        _add_shared(
            group,
            "--record-mode",
            choices=_RECORD_MODES,
            default=None,
            help="none / once / new_episodes / all, or rewrite (delete and record again); "
            "default: ini replay_record_mode, else once",
        )
    group.addoption(
        "--replay-speed",
        default=None,
        help="replay speed: instant, 1, 10x, ... (default: ini replay_speed, else instant)",
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
    group.addoption(
        "--strict-cassettes",
        action="store_true",
        default=None,
        help="fail a test whose cassette has unplayed interactions (default: warn)",
    )
    parser.addini("replay_record_mode", "default record mode", default="once")
    parser.addini("replay_speed", "default replay speed", default="instant")
    parser.addini("replay_cassette_dir", "directory of default cassettes", default="")
    parser.addini("replay_block_network", "block the network", type="bool", default=False)
    parser.addini(
        "replay_allowed_hosts",
        "hosts reachable with --block-network (default: loopback)",
        type="args",
        default=sorted(LOOPBACK),
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


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_STARTED] = time.time()
    config.addinivalue_line(
        "markers",
        "use_cassette(path=None, **options): record/replay this test's httpx and httpx2 "
        "traffic through a cassette (default path: cassettes/<module>/<test>.msgpack)",
    )
    config.pluginmanager.register(_Summary(), "replay-summary")


def _option(config: pytest.Config, name: str, ini: str) -> Any:
    # None is "not given"; so is pytest-recording's False default of a shared flag.
    value = config.getoption(name)
    return config.getini(ini) if value is None or value is False else value


@pytest.fixture(scope="session", autouse=True)
def _replay_block_network(pytestconfig: pytest.Config) -> Iterator[None]:
    with contextlib.ExitStack() as stack:
        mode = pytestconfig.getoption("record_mode")
        if mode:  # the command line binds every session: decorators and library calls too
            stack.enter_context(forced_record_mode("all" if mode == "rewrite" else mode))
        if _option(pytestconfig, "block_network", "replay_block_network"):
            stack.enter_context(block_network(pytestconfig.getini("replay_allowed_hosts")))
        yield


def _session_for(request: pytest.FixtureRequest, marker: pytest.Mark | None) -> CassetteSession:
    config = request.config
    options = dict(marker.kwargs) if marker else {}
    args = marker.args if marker else ()
    if len(args) > 1:
        raise ConfigurationError("use_cassette takes at most one positional argument, the path")
    directory = config.getoption("cassette_dir") or config.getini("replay_cassette_dir") or None
    test_path = Path(str(request.node.path))
    named = options.pop("path", None) or (args[0] if args else None)
    if named is not None:
        path = resolve_cassette_path(named, test_path, directory)
    else:
        path = default_cassette_path(test_path, request.node.nodeid, directory, config.rootpath)
    mode = config.getoption("record_mode") or options.pop("record_mode", None)
    options.pop("record_mode", None)
    mode = mode or config.getini("replay_record_mode")
    speed = config.getoption("replay_speed") or options.pop("speed", None)
    options.pop("speed", None)
    speed = speed or config.getini("replay_speed")
    if mode == "rewrite":
        # Delete what earlier runs wrote, not what this run (or another xdist worker of it,
        # started at the same time) has just recorded into a cassette that tests share.
        started: float = config.stash[_STARTED]
        if path.exists() and path.stat().st_mtime < started:
            path.unlink()
        mode = "all"
    options.setdefault("ignore_hosts", config.getini("replay_ignore_hosts"))
    options.setdefault("ignore_localhost", config.getini("replay_ignore_localhost"))
    return use_cassette(path, record_mode=mode, speed=speed, **options)


@pytest.fixture
def cassette(request: pytest.FixtureRequest) -> Iterator[Cassette]:
    """The active cassette: the marker's, or else this test's default cassette."""
    __tracebackhide__ = True
    active: Cassette | None = getattr(request.node, "_replay_cassette", None)
    if active is not None:
        yield active
        return
    yield from _activate(request, None)


@pytest.fixture(autouse=True)
def _replay_marker(request: pytest.FixtureRequest) -> Iterator[None]:
    marker = request.node.get_closest_marker("use_cassette")
    if marker is None:
        yield
        return
    for active in _activate(request, marker):
        request.node._replay_cassette = active
        yield


def _activate(request: pytest.FixtureRequest, marker: pytest.Mark | None) -> Iterator[Cassette]:
    __tracebackhide__ = True
    session = _session_for(request, marker)
    with session as active:
        request.node._replay_session = session
        yield active
    unplayed = active.unplayed
    record = SessionRecord(
        path=_display(session.path, request.config.rootpath),
        replayed=active.play_count,
        recorded=len(active.recorded),
        saved=session.saved,
        unplayed=[f"{i.request.method} {i.request.url}" for i in unplayed],
    )
    # Carried on the reports, so that xdist workers' sessions reach the summary too.
    request.node.user_properties.append(("replay", record.to_dict()))
    if unplayed and not session.mismatches:
        strict = _option(request.config, "strict_cassettes", "replay_strict_cassettes")
        message = UnplayedInteractionsWarning.describe(session.path, unplayed)
        if strict:
            pytest.fail(message, pytrace=False)
        warnings.warn(UnplayedInteractionsWarning(message), stacklevel=1)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    session: CassetteSession | None = getattr(item, "_replay_session", None)
    if session is not None and session.faults and report.failed:
        report.sections.append(("replay: faults injected", "\n".join(session.injector.report())))
    if session is not None and session.mismatches and report.failed:
        nodeid = item.nodeid
        lines = [str(error) for error in session.mismatches]
        lines.append(f"To record it: pytest --record-mode=new_episodes '{nodeid}'")
        report.sections.append(("replay: unmatched requests", "\n\n".join(lines)))
    return report


def _display(path: Path, rootpath: Path) -> str:
    try:
        return str(path.relative_to(rootpath))
    except ValueError:
        return str(path)


class _Summary:
    """Collects every session's record from the test reports (also xdist workers') and
    prints the summary at the end."""

    def __init__(self) -> None:
        self.log = SessionLog()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "teardown":
            return
        for name, value in report.user_properties:
            if name == "replay" and isinstance(value, dict):
                self.log.add(SessionRecord.from_dict(value))

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        lines = self.log.summary_lines()
        if lines:
            terminalreporter.write_sep("-", "replay")
            for line in lines:
                terminalreporter.write_line(line)
