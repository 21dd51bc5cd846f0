"""The fault values of a WebSocket conversation: `close` and `delay` (what they do to the
frames is `replay.engine.frame_faults`, which re-exports them; specs name them:
`--fault "close(after_events=3, code=1011)"`, `--fault "delay(event=2, seconds=1.5)"`).
They leave an HTTP response as it is.
"""

from __future__ import annotations

import attrs

from replay.errors import ConfigurationError
from replay.faults.types import Fault, Outcome, count, positive
from replay.model.chunks import MAX_SECONDS

__all__ = ["Close", "Delay", "close", "delay"]


@attrs.frozen(kw_only=True, repr=False)
class Close(Fault):
    """The server closes a WebSocket conversation with `code` after `after_events` messages."""

    after_events: int
    code: int = 1011
    reason: str = ""

    def transform(self, outcome: Outcome, attempt: int) -> Outcome:
        return outcome  # (an HTTP response has no frames)

    def _what(self) -> str:
        return f"close the WebSocket with code {self.code} after {self.after_events} messages"

    def _arguments(self) -> tuple[list[object], dict[str, object]]:
        keywords: dict[str, object] = {"after_events": self.after_events, "code": self.code}
        return [], {**keywords, **({"reason": self.reason} if self.reason else {})}


@attrs.frozen(kw_only=True, repr=False)
class Delay(Fault):
    """The server's `event`th message (from 1) of a conversation comes `seconds` late."""

    event: int
    seconds: float

    def transform(self, outcome: Outcome, attempt: int) -> Outcome:
        return outcome

    def _what(self) -> str:
        return f"delay WebSocket message {self.event} by {self.seconds:g} s"

    def _arguments(self) -> tuple[list[object], dict[str, object]]:
        return [], {"event": self.event, "seconds": self.seconds}


def close(
    *, after_events: int, code: int = 1011, reason: str = "", index: int | None = None
) -> Close:
    """The server closes with `code` (and `reason`) after its `after_events`th message."""
    count(after_events, "after_events")
    if isinstance(code, bool) or not isinstance(code, int) or not 1000 <= code <= 4999:
        raise ConfigurationError(f"code must be a WebSocket close code (1000-4999), not {code!r}")
    if len(reason.encode()) > 123:
        raise ConfigurationError("reason must fit a close frame: at most 123 bytes of UTF-8")
    return Close(after_events=after_events, code=code, reason=reason, index=index)


def delay(*, event: int, seconds: float, index: int | None = None) -> Delay:
    """The server's `event`th message (from 1) comes `seconds` late."""
    if count(event, "event") < 1:
        raise ConfigurationError("event counts the server's messages from 1")
    seconds = positive(seconds, "seconds")
    if seconds > MAX_SECONDS:
        raise ConfigurationError(f"seconds must be at most {MAX_SECONDS:g}")
    return Delay(event=event, seconds=seconds, index=index)
