"""The engine: all the logic of record and replay, pure, with no I/O and no clock of its own.

    exchange  route → LIVE | Exchange; decide → Replay | Record (a request's life, once)
    Player    redact → match → faults → what plays (one lock, one play bookkeeping)
    Playing   the replayed body: its chunks when due (sync, async, instant), its end raised
    Stepper   next(now) → Wait(seconds) | Head | Data(bytes) | End(error)
    Tape      Recording: chunk(at, bytes) … end → Interaction, redacted, onto a cassette
    ends      what a recorded end means: clean | timeout | cut | stopped by the client, session
    feed      a recording reader's items (chunks, END, Failed) → SyncFeed | AsyncFeed
    Conversation  a WebSocket conversation replayed: client frames matched, turns released
              (`conversation`); faults on its frames (`frame_faults`)

The shells (the httpx/httpx2 transports, the session's adapters, `replay serve`, `replay
play` and `replay proxy`) convert their library's request in and the engine's steps out,
and do the I/O and the waiting, each its own way.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from replay.engine.ends import (
        CUT_NAME,
        END_NAMES,
        TIMEOUT_NAME,
        EndKind,
        end_kind,
        error_kind,
        recorded_error,
        stored_name,
    )
    from replay.engine.exchange import LIVE, Exchange, Record, Replay, route
    from replay.engine.player import Played, Player
    from replay.engine.playing import Playing
    from replay.engine.recorder import Recording, Tape
    from replay.engine.stepper import (
        Data,
        End,
        Head,
        Step,
        Stepper,
        Wait,
        read_timeouts,
        step_async,
        step_sync,
    )

__all__ = [
    "CUT_NAME",
    "END_NAMES",
    "LIVE",
    "TIMEOUT_NAME",
    "Data",
    "End",
    "EndKind",
    "Exchange",
    "Head",
    "Played",
    "Player",
    "Playing",
    "Record",
    "Recording",
    "Replay",
    "Step",
    "Stepper",
    "Tape",
    "Wait",
    "end_kind",
    "error_kind",
    "read_timeouts",
    "recorded_error",
    "route",
    "step_async",
    "step_sync",
    "stored_name",
]


# Each name is imported on first use: a session that only replays never loads the recorder.
_LAZY = {
    **dict.fromkeys(
        (
            "CUT_NAME",
            "END_NAMES",
            "TIMEOUT_NAME",
            "EndKind",
            "end_kind",
            "error_kind",
            "recorded_error",
            "stored_name",
        ),
        "ends",
    ),
    **dict.fromkeys(("LIVE", "Exchange", "Record", "Replay", "route"), "exchange"),
    "Playing": "playing",
    "Played": "player",
    "Player": "player",
    "Recording": "recorder",
    "Tape": "recorder",
    **dict.fromkeys(
        (
            "Data",
            "End",
            "Head",
            "Step",
            "Stepper",
            "Wait",
            "read_timeouts",
            "step_async",
            "step_sync",
        ),
        "stepper",
    ),
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'replay.engine' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"replay.engine.{module}"), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
