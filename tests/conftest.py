"""Shared fixtures: a real streaming origin on 127.0.0.1, and cassette paths in tmp_path."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from replay.testing import Origin

# CI runs the same examples every time (a property failure is then reproducible, not a
# coin toss), and a loaded 2-core machine does not trip per-example deadlines.
settings.register_profile("replay", derandomize=True, deadline=None)
settings.load_profile("replay")


@pytest.fixture
def origin() -> Iterator[Origin]:
    """A real HTTP server on 127.0.0.1 streaming the default LLM routes with real delays."""
    with Origin() as server:
        yield server


@pytest.fixture
def cassette_path(tmp_path: Path) -> Path:
    """Where a test's cassette goes (it does not exist yet)."""
    return tmp_path / "cassettes" / "test.msgpack"
