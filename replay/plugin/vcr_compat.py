"""pytest-recording's surface, served by replay when pytest-recording is not active.

A suite written for pytest-recording runs as it is: `@pytest.mark.vcr` (on the test, its
class or its module: the marks' keywords merge, the closest winning per key, on the
`vcr_config` fixture's), the `vcr` fixture (a `VcrCassette`: `requests`, `responses`,
`play_count(s)`, `all_played`, `record_mode`), the `vcr_config`, `vcr_cassette_dir`,
`default_cassette_name`, `record_mode` and `disable_recording` fixtures, the
`default_cassette` mark, and the `pytest_recording_configure(config, vcr)` hook (called once
a run, with a `VcrRegistry`). What the options become is `replay.convert.vcrpy_options`'s.

A test's cassette is `<vcr_cassette_dir>/<its replay name>.msgpack` (`replay migrate` names
them so), else the `.msgpack` named after pytest-recording's name for it. A cassette
`replay migrate` marked replays under the matching it was recorded under, unless the marks
or `vcr_config` name one; recording it again (`all`, `rewrite`) drops the mark, and the
summary says so. The record mode: `--record-mode`, else the marks' or `vcr_config`'s, else
the ini file's `replay_record_mode` if it sets one, else pytest-recording's default, `none`.

`replay.plugin.hooks` registers this module as a plugin (`serve`) only when pytest-recording
is neither loaded nor about to be: with it active, replay changes nothing of its surface.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, cast

import pytest

if TYPE_CHECKING:
    from replay.convert.vcrpy_options import VcrCassette, VcrRegistry
    from replay.session.lifecycle import CassetteSession

#: `replay.plugin.hooks`' maker of a test's session of a `use_cassette` mark.
SessionFor = Callable[[pytest.FixtureRequest, "pytest.Mark | None"], "CassetteSession"]

__all__ = ["add_hookspec", "merge_marks", "merged_use", "recording_plugin_active", "serve"]

_NAME = "replay-vcr"
_FORBIDDEN = r"<>?%*:|\"'/\\"  # what pytest-recording replaces with "-" in a cassette name


class _Spec:
    """The hook pytest-recording declares, declared by replay in its absence."""

    @staticmethod
    def pytest_recording_configure(config: pytest.Config, vcr: Any) -> None:
        """Configure the `vcr` object (register matchers, serializers) before cassettes."""


def recording_plugin_active(pluginmanager: Any) -> bool:
    """Whether pytest-recording is loaded (by entry point, or by `-p pytest_recording.plugin`)."""
    if pluginmanager.has_plugin("recording"):
        return True
    return any(
        getattr(plugin, "__name__", "") == "pytest_recording.plugin"
        for plugin in pluginmanager.get_plugins()
    )


def add_hookspec(pluginmanager: Any) -> None:
    """Declare `pytest_recording_configure`, unless pytest-recording did: a conftest that
    implements it then loads (its implementation is checked as the spec is added)."""
    caller = getattr(pluginmanager.hook, "pytest_recording_configure", None)
    if caller is None or not caller.has_spec():
        pluginmanager.add_hookspecs(_Spec)


def serve(config: pytest.Config, session_for: SessionFor) -> None:
    """Serve pytest-recording's surface in this run, unless pytest-recording is active.

    Args:
        session_for: how the plugin makes a test's session of a `use_cassette` mark
            (`replay.plugin.hooks`'): each `vcr` cassette is made as one.
    """
    manager = config.pluginmanager
    if recording_plugin_active(manager) or manager.has_plugin(_NAME) or manager.has_plugin("vcr"):
        return  # (pytest-vcr, "vcr", serves a `vcr` mark and fixture of its own)
    import sys

    for line in (
        "vcr: pytest-recording's mark, served by replay: record/replay this test's HTTP",
        "default_cassette(name): pytest-recording's: this test's cassette name",
        "block_network: pytest-recording's (not honoured by replay: use --block-network)",
        "allowed_hosts: pytest-recording's (not honoured by replay)",
    ):
        config.addinivalue_line("markers", line)
    # (Declared now, every plugin loaded: at `pytest_addhooks` time a pytest-recording given
    # by `-p` after replay is still to come, and would declare the hook a second time.)
    add_hookspec(manager)
    notes = config.stash[_NOTES] = _Notes(session_for)
    manager.register(sys.modules[__name__], _NAME)
    manager.register(notes, f"{_NAME}-notes")


class _Notes:
    """What the run tells at its end (a plugin of its own): what was not honoured, what moved
    to replay's matching; gathered from the test reports, xdist workers' included."""

    def __init__(self, session_for: SessionFor) -> None:
        self.session_for = session_for
        self.unhonoured: set[str] = set()
        self.rerecorded: list[tuple[str, tuple[str, ...]]] = []
        self.registry: VcrRegistry | None = None

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Gather what a test noted (`_tell`), in this process or an xdist worker."""
        if report.when != "teardown":
            return
        for name, value in report.user_properties:
            if name == _NAME and isinstance(value, dict):
                self.unhonoured.update(value.get("unhonoured", ()))
                if "rerecorded" in value:
                    path, *under = value["rerecorded"]
                    self.rerecorded.append((path, tuple(under)))

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        """Say what moved to replay's matching, and (in one warning) what was not honoured."""
        from replay.matching import DEFAULT_MATCH_ON

        if not (self.rerecorded or self.unhonoured):
            return
        terminalreporter.write_sep("-", "replay: pytest-recording suite")
        for path, under in self.rerecorded:
            terminalreporter.write_line(
                f"replay: {path} recorded again: it now matches on replay's default "
                f"({', '.join(DEFAULT_MATCH_ON)}), no longer on what vcrpy recorded it under "
                f"({', '.join(under)})"
            )
        if self.unhonoured:
            terminalreporter.write_line(
                "replay: warning: not honoured by replay (pytest-recording is not active): "
                + ", ".join(sorted(self.unhonoured)),
                yellow=True,
            )


_NOTES = pytest.StashKey[_Notes]()


def _registry(config: pytest.Config) -> VcrRegistry:
    """The run's `VcrRegistry`, made (and handed to `pytest_recording_configure`) once."""
    notes = config.stash[_NOTES]
    if notes.registry is None:
        from replay.convert.vcrpy_options import VcrRegistry

        notes.registry = VcrRegistry()
        config.hook.pytest_recording_configure(config=config, vcr=notes.registry)
    return notes.registry


def _explicit_ini_mode(config: pytest.Config) -> str | None:
    """The ini file's `replay_record_mode`, if it sets one (its default is replay's, `once`)."""
    # pytest 9 keeps the file's values in `_inicfg` (`inicfg`, deprecated, warns); pytest 8
    # in `inicfg`.
    given = getattr(config, "_inicfg", None)
    if given is None:
        given = config.inicfg
    if "replay_record_mode" not in given:
        return None
    mode: str = config.getini("replay_record_mode")
    return mode


@pytest.fixture(scope="session")
def record_mode(request: pytest.FixtureRequest) -> str:
    """pytest-recording's: `--record-mode`, else the ini file's, else "none"."""
    mode: str | None = request.config.getoption("record_mode", None)
    return mode or _explicit_ini_mode(request.config) or "none"


@pytest.fixture(scope="session")
def disable_recording(request: pytest.FixtureRequest) -> bool:
    """pytest-recording's: `--disable-recording` turns the `vcr` marks off."""
    return bool(request.config.getoption("disable_recording", False))


@pytest.fixture
def vcr_config() -> dict[str, Any]:
    """pytest-recording's: the options every `vcr` cassette takes (override it)."""
    return {}


@pytest.fixture(scope="module")
def vcr_cassette_dir(request: pytest.FixtureRequest) -> str:
    """pytest-recording's: `cassettes/<module>/` beside the test module."""
    module = Path(request.node.path)
    return os.path.join(module.parent, "cassettes", module.stem)


def _pytest_recording_name(name: str) -> str:
    for character in _FORBIDDEN:
        name = name.replace(character, "-")
    return name


def _test_name(request: pytest.FixtureRequest) -> str:
    node_name: str = request.node.name
    return f"{request.cls.__name__}.{node_name}" if request.cls else node_name


@pytest.fixture
def default_cassette_name(request: pytest.FixtureRequest) -> str:
    """pytest-recording's: the `default_cassette` mark's name, else `[Class.]test[id]`."""
    marker = request.node.get_closest_marker("default_cassette")
    if marker is not None and marker.args:
        return str(marker.args[0])
    return _pytest_recording_name(_test_name(request))


@pytest.fixture
def vcr_markers(request: pytest.FixtureRequest) -> list[pytest.Mark]:
    """pytest-recording's: the test's `vcr` marks, the closest first."""
    return list(request.node.iter_markers(name="vcr"))


def _cassette_path(request: pytest.FixtureRequest, directory: Path, name: str) -> Path:
    """The test's cassette: under replay's name for it, else under pytest-recording's."""
    from replay.session.naming import cassette_file_name

    test_name = _test_name(request)
    own = test_name if name == _pytest_recording_name(test_name) else name
    path = directory / cassette_file_name(own)
    if own != name and not path.exists():
        theirs = directory / cassette_file_name(name)
        if theirs.exists():
            return theirs
    return path


def merge_marks(base: dict[str, Any], markers: list[pytest.Mark]) -> dict[str, Any]:
    """`base` (a copy) updated by the marks' keywords, the farthest first: the test's own mark
    wins, key by key, over its class's, which wins over its module's."""
    merged = copy.deepcopy(base)
    for marker in reversed(markers):
        merged.update(marker.kwargs)
    return merged


def merged_use(markers: list[pytest.Mark]) -> pytest.Mark | None:
    """A test's `use_cassette` marks (the closest first) as one: keywords merged
    (`merge_marks`), the path the closest mark that names one."""
    if len(markers) < 2:
        return markers[0] if markers else None
    path = next((marker.args for marker in markers if marker.args), ())
    return cast(pytest.Mark, _Use(path, merge_marks({}, markers)))


class _Use(NamedTuple):
    """What `replay.plugin.hooks` reads of a `use_cassette` mark."""

    args: tuple[Any, ...]
    kwargs: dict[str, Any]


@pytest.fixture(autouse=True)
def vcr(request: pytest.FixtureRequest) -> Iterator[VcrCassette | None]:
    """pytest-recording's: the cassette of a test marked `vcr` (None for other tests)."""
    # (The other fixtures are asked for only by a marked test: a test without the mark
    # pays for none of them.)
    if request.node.get_closest_marker("vcr") is None or request.getfixturevalue(
        "disable_recording"
    ):
        yield None
        return
    __tracebackhide__ = True
    yield from _use(
        request,
        request.getfixturevalue("vcr_markers"),
        Path(request.getfixturevalue("vcr_cassette_dir")),
        request.getfixturevalue("record_mode"),
    )


def _use(
    request: pytest.FixtureRequest, markers: list[pytest.Mark], directory: Path, mode: str
) -> Iterator[VcrCassette]:
    from replay.convert.migrate import recorded_under, unmark
    from replay.convert.vcrpy_options import VcrCassette, matchers, session_kwargs

    __tracebackhide__ = True
    config = request.config
    notes = config.stash[_NOTES]
    registry = _registry(config)  # (the hook is called by the first vcr test)
    defaults = {**registry.defaults, **request.getfixturevalue("vcr_config")}
    merged = merge_marks(defaults, markers)
    translated = session_kwargs(merged)
    unhonoured = [*registry.unhonoured, *translated.unhonoured]
    if any(marker.args for marker in markers):
        unhonoured.append("the vcr mark's extra cassettes")
    if request.node.get_closest_marker("block_network") is not None:
        unhonoured.append("the block_network mark")
    _tell(request.node, "unhonoured", sorted(set(unhonoured)))
    kwargs = translated.kwargs
    name = request.getfixturevalue("default_cassette_name")
    path = _cassette_path(request, directory, name)
    chosen = config.getoption("record_mode", None) or kwargs.pop("record_mode", None) or mode
    kwargs["record_mode"] = chosen
    if chosen not in ("all", "rewrite"):
        _refuse_unmigrated(path, directory / f"{name}.{merged.get('serializer', 'yaml')}")
    under = None if translated.match_on is not None else recorded_under(path)
    again = chosen in ("all", "rewrite")
    match_on = translated.match_on or (under if under is not None and not again else None)
    if match_on is not None:
        kwargs["match_on"] = matchers(match_on, registry.matchers, translated.dropped_query)
    session = notes.session_for(request, cast(pytest.Mark, _Use((str(path),), kwargs)))
    with session as cassette:
        yield VcrCassette(cassette, chosen)
    if under is not None and again and session.saved and unmark(path):
        _tell(request.node, "rerecorded", [_shown(path, config), *under])


def _tell(item: pytest.Item, what: str, value: list[str]) -> None:
    """Note on the test's report what the summary says (so xdist workers' reach it too)."""
    if value:
        item.user_properties.append((_NAME, {what: value}))


def _refuse_unmigrated(path: Path, theirs: Path) -> None:
    """Refuse to replay or record past a vcrpy cassette `replay migrate` has not converted:
    under `none` the test would fail on a missing file, under `once` go to the network."""
    if path.exists() or not theirs.exists():
        return
    from replay.errors import CassetteFormatError

    raise CassetteFormatError(
        theirs,
        f"pytest-recording's cassette, not migrated (no {path.name} beside it): convert the "
        f"suite's first with `replay migrate {theirs.parent}`, or run with -p recording",
    )


def _shown(path: Path, config: pytest.Config) -> str:
    try:
        return str(path.relative_to(config.rootpath))
    except ValueError:
        return str(path)
