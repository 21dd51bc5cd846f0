"""How replay is installed: its distribution name, its command and its pytest plugin."""

from __future__ import annotations

import importlib.metadata

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
