"""`building()`: the garbage collector held off while a reader makes a million small objects.

Reading a long stream makes one tuple, one string and one event per event: a million of
each for a million-event stream. None of them is garbage, none is part of a cycle, yet
every 700 allocations the collector walks the youngest, and every so often all of them:
a third to a half of the whole read, measured. Held off while the values are made, it walks
them once, when it next runs on its own.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

__all__ = ["building"]


@contextlib.contextmanager
def building() -> Iterator[None]:
    """Hold off automatic collection inside the block (a process that turned it off itself,
    or a block inside another, leaves it as it was)."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
