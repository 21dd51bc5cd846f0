"""The `replay` command, run as a user runs it: a subprocess of this Python."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

__all__ = ["read_pty", "replay_bytes", "replay_text"]


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


def read_pty(fd: int, deadline: float) -> str:
    """Everything written to a pty until its last writer closes it."""
    data = b""
    try:
        while time.monotonic() < deadline:
            try:
                piece = os.read(fd, 4096)
            except OSError:  # EIO: every writer is gone (Linux)
                break
            if not piece:
                break
            data += piece
    finally:
        os.close(fd)
    return data.decode(errors="replace")
