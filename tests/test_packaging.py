"""How replay is installed: its distribution name, its command and its pytest plugin."""

from __future__ import annotations

import importlib.metadata

import pytest

import replay
from replay.errors import DISTRIBUTION, install_hint


def test_the_distribution_is_replay_http_and_provides_the_command_and_plugin() -> None:
    # `replay` on the package index is an unrelated project: installing by that name would
    # install it. The distribution is replay-http; the import name and command stay replay.
    distribution = importlib.metadata.distribution(DISTRIBUTION)
    assert DISTRIBUTION == "replay-http"
    points = {(point.group, point.name): point.value for point in distribution.entry_points}
    assert points[("console_scripts", "replay")] == "replay.cli:main"
    assert points[("pytest11", "replay")] == "replay.plugin.hooks"
    assert distribution.version == replay.__version__


def test_install_hints_name_the_distribution() -> None:
    assert install_hint("serve") == "pip install 'replay-http[serve]'"


def test_every_public_name_resolves() -> None:
    # The package imports its names on first use (see replay/__init__.py): each must resolve,
    # and each lazily imported name must be public. (ruff's RUF022 keeps __all__ sorted.)
    assert set(replay.__all__) == set(replay._LAZY) | {"__version__"}
    for name in replay.__all__:
        assert getattr(replay, name) is not None, name
    assert set(replay.__all__) <= set(dir(replay))


def test_the_test_extra_leaves_pytest_recording_out() -> None:
    # pytest-recording's `--block-network` blocks loopback, and it loads in every run of the
    # environment it is installed in: it has an extra of its own, for the tests of the two
    # plugins side by side (CI installs it; .ci/run).
    requires = importlib.metadata.distribution(DISTRIBUTION).requires or []
    by_extra = {
        requirement.split(";")[0].strip(): requirement.partition("extra == ")[2].strip("'\" ")
        for requirement in requires
    }
    assert by_extra["pytest-recording>=0.13"] == "coexist"
    assert any(extra == "test" for extra in by_extra.values())


def test_this_suite_never_loads_pytest_recording_itself(pytestconfig: pytest.Config) -> None:
    assert not pytestconfig.pluginmanager.has_plugin("recording")
    assert pytestconfig.pluginmanager.is_blocked("recording")
