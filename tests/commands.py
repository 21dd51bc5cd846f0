"""The `replay` command, run as a user runs it: a subprocess of this Python."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

__all__ = ["replay_bytes", "replay_text"]


def replay_text(
    *args: str, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run `replay ARGS...` (in `cwd`, with environment `env`); its output as text."""
    return subprocess.run(
        [sys.executable, "-m", "replay.cli", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=cwd,
        env=env,
    )


def replay_bytes(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[bytes]:
    """Run `replay ARGS...`; its output as bytes."""
    return subprocess.run(
        [sys.executable, "-m", "replay.cli", *args],
        capture_output=True,
        timeout=60,
        check=False,
        cwd=cwd,
    )
