"""replay: record streaming HTTP responses (Server-Sent Events above all) with their timing,
and play them back through httpx and httpx2 at original, accelerated or instant speed.

    with replay.use_cassette("cassettes/hello.msgpack") as cassette:
        ...   # every httpx / httpx2 client in the process records to / replays from it
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from replay import faults
    from replay.adapters.network import block_network
    from replay.adapters.playback import AsyncReplayTransport, ReplayTransport
    from replay.adapters.record import AsyncRecordingTransport, RecordingTransport
    from replay.clock import INSTANT, MonotonicClock, VirtualClock, parse_speed
    from replay.clock.policy import SpeedPolicy
    from replay.clock.vtime import VirtualTime
    from replay.errors import (
        AmbiguousSessionError,
        CassetteFormatError,
        CassetteMismatchError,
        CassetteWriteError,
        ConfigurationError,
        DecodedTooLargeError,
        DecoderMissingError,
        DecodingError,
        FrameMismatchError,
        KeyInResponseWarning,
        NetworkBlockedError,
        ReplayError,
        UnplayedInteractionsWarning,
    )
    from replay.inspect import timing
    from replay.matching import DEFAULT_MATCH_ON
    from replay.model import (
        Chunk,
        Chunks,
        Interaction,
        Request,
        Response,
        StreamEnd,
        TimedEvent,
    )
    from replay.redact.redactor import Redactor
    from replay.session.lifecycle import VIRTUAL, CassetteSession, use_cassette
    from replay.store.cassette import Cassette

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_MATCH_ON",
    "INSTANT",
    "VIRTUAL",
    "AmbiguousSessionError",
    "AsyncRecordingTransport",
    "AsyncReplayTransport",
    "Cassette",
    "CassetteFormatError",
    "CassetteMismatchError",
    "CassetteSession",
    "CassetteWriteError",
    "Chunk",
    "Chunks",
    "ConfigurationError",
    "DecodedTooLargeError",
    "DecoderMissingError",
    "DecodingError",
    "FrameMismatchError",
    "Interaction",
    "KeyInResponseWarning",
    "MonotonicClock",
    "NetworkBlockedError",
    "RecordingTransport",
    "Redactor",
    "ReplayError",
    "ReplayTransport",
    "Request",
    "Response",
    "SpeedPolicy",
    "StreamEnd",
    "TimedEvent",
    "UnplayedInteractionsWarning",
    "VirtualClock",
    "VirtualTime",
    "__version__",
    "block_network",
    "faults",
    "parse_speed",
    "timing",
    "use_cassette",
]


#: Where each public name lives. They are imported on first use, not with the package: the
#: pytest plugin (`replay.plugin.hooks`) loads in every pytest run of a project that installs
#: replay, and must not pull the whole library (httpx, asyncio, ...) into runs that use none.
_LAZY: dict[str, str] = {
    "faults": "replay.faults",
    "timing": "replay.inspect.timing",
    "Cassette": "replay.store.cassette",
    "INSTANT": "replay.clock",
    "MonotonicClock": "replay.clock",
    "VirtualClock": "replay.clock",
    "parse_speed": "replay.clock",
    "SpeedPolicy": "replay.clock.policy",
    "AmbiguousSessionError": "replay.errors",
    "CassetteFormatError": "replay.errors",
    "CassetteMismatchError": "replay.errors",
    "FrameMismatchError": "replay.errors",
    "CassetteWriteError": "replay.errors",
    "ConfigurationError": "replay.errors",
    "DecodedTooLargeError": "replay.errors",
    "DecoderMissingError": "replay.errors",
    "DecodingError": "replay.errors",
    "KeyInResponseWarning": "replay.errors",
    "NetworkBlockedError": "replay.errors",
    "ReplayError": "replay.errors",
    "UnplayedInteractionsWarning": "replay.errors",
    "DEFAULT_MATCH_ON": "replay.matching",
    "Chunk": "replay.model",
    "Chunks": "replay.model",
    "Interaction": "replay.model",
    "Request": "replay.model",
    "Response": "replay.model",
    "StreamEnd": "replay.model",
    "TimedEvent": "replay.model",
    "block_network": "replay.adapters.network",
    "AsyncReplayTransport": "replay.adapters.playback",
    "ReplayTransport": "replay.adapters.playback",
    "AsyncRecordingTransport": "replay.adapters.record",
    "RecordingTransport": "replay.adapters.record",
    "Redactor": "replay.redact.redactor",
    "VIRTUAL": "replay.session.lifecycle",
    "CassetteSession": "replay.session.lifecycle",
    "use_cassette": "replay.session.lifecycle",
    "VirtualTime": "replay.clock.vtime",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'replay' has no attribute {name!r}")
    imported = importlib.import_module(module)
    value = imported if module.rpartition(".")[2] == name else getattr(imported, name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
