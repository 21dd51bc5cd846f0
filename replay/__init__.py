"""replay: record streaming HTTP responses (Server-Sent Events above all) with their timing,
and play them back through httpx and httpx2 at original, accelerated or instant speed.

    with replay.use_cassette("cassettes/hello.msgpack") as cassette:
        ...   # every httpx / httpx2 client in the process records to / replays from it
"""

from __future__ import annotations

from replay import faults, timing
from replay.cassette import Cassette
from replay.clock import INSTANT, MonotonicClock, VirtualClock, parse_speed
from replay.errors import (
    AmbiguousSessionError,
    CassetteFormatError,
    CassetteMismatchError,
    ConfigurationError,
    DecodedTooLargeError,
    DecoderMissingError,
    DecodingError,
    NetworkBlockedError,
    ReplayError,
    UnplayedInteractionsWarning,
)
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
from replay.network import block_network
from replay.playback import AsyncReplayTransport, ReplayTransport
from replay.record import AsyncRecordingTransport, RecordingTransport
from replay.redact import Redactor
from replay.session import VIRTUAL, CassetteSession, use_cassette
from replay.vtime import VirtualTime

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
    "Chunk",
    "Chunks",
    "ConfigurationError",
    "DecodedTooLargeError",
    "DecoderMissingError",
    "DecodingError",
    "Interaction",
    "MonotonicClock",
    "NetworkBlockedError",
    "RecordingTransport",
    "Redactor",
    "ReplayError",
    "ReplayTransport",
    "Request",
    "Response",
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
