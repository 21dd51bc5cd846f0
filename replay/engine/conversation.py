"""A recorded WebSocket conversation replayed as a conversation: pure, no I/O, no clock.

The recording is cut into turns: the server frames before the client's first data frame
(text or binary) are the opening turn; each recorded client data frame owns the server frames
that follow it, up to the next one. On replay:

- the opening turn is released when the upgrade request is sent (`Conversation(start=...)`);
- a client frame sent (`sent`) is matched against the recorded client frames not yet sent
  (`replay.matching.frames`: JSON-aware, `event_id` and timestamps ignored): the first
  with its key, in order, wherever it stands (a second `response.create` unlike the first
  gets its own answer). Its turn is then released; nothing matching raises
  `FrameMismatchError` naming the nearest recorded frame, at once: never a hang;
- each released server frame is due at `t + (frame.at - anchor.at) / speed`, `t` the
  moment its turn was released and `anchor` the recorded frame that released it: the
  recorded gap, scaled by the speed (absolute deadlines: no drift); at instant speed at once;
- `next(now)` says what the peer does: send the frame at a position, wait (seconds), or
  nothing for now (`None`: it waits for the client);
- `leftovers()` says what the conversation did not consume: server frames the client's code
  never read (`read`: the shell's hook on the library's receive), client frames never sent,
  but for the kinds (or JSON event types) of `allowed`.

Pings, pongs and closes of the client are not matched (keepalives come when they come): the
peer answers a ping itself and a close with a close. Faults (`faults`) change the frames
the server sends (`replay.engine.frame_faults`).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from typing import Final

from replay.errors import FrameMismatchError
from replay.matching.frames import (
    IGNORED_KEYS,
    differences,
    frame_key,
    nearest,
    positions,
    shown,
)
from replay.model.frames import Frame

__all__ = ["ALLOWED_LEFTOVERS", "Conversation", "Leftovers"]

#: What may be left unconsumed without being reported: frame kinds, or the `type` of JSON
#: events (e.g. "rate_limits.updated"). By default the control frames a keepalive or a
#: closing handshake leaves behind.
ALLOWED_LEFTOVERS: Final = frozenset({"ping", "pong", "close"})


#: Seconds to wait below which a frame is due (a clock's resolution: virtual time's is 1 ns).
_RESOLUTION = 1e-6


class Leftovers:
    """What a replayed conversation did not consume.

    Attributes:
        server: the recorded server frames never delivered to the client.
        client: the recorded client frames the client never sent.
    """

    __slots__ = ("client", "server")

    def __init__(self, server: tuple[Frame, ...], client: tuple[Frame, ...]) -> None:
        self.server = server
        self.client = client

    def __bool__(self) -> bool:
        return bool(self.server or self.client)

    def describe(self) -> str:
        """One line: how many frames of each side were left, and the first of them."""
        parts = []
        for side, frames, what in (
            ("server", self.server, "never read"),
            ("client", self.client, "never sent"),
        ):
            if frames:
                first = frames[0].event_type or frames[0].kind
                plural = "" if len(frames) == 1 else "s"
                parts.append(f"{len(frames)} {side} frame{plural} {what} (first: {first})")
        return "WebSocket: " + ", ".join(parts)


class Conversation:
    """The replay of one recorded conversation (see the module's docstring).

    Args:
        frames: the recorded frames, both ways.
        speed: the speed factor (`math.inf`: instant).
        start: the clock reading when the upgrade request was sent.
        url: the upgrade URL (redacted), for messages.
        cassette_path: the cassette, for messages.
        allowed: kinds or JSON event types that may be left unconsumed.
        ignored: JSON fields client frames are matched without.
        drop: the position after which the connection drops (None: it does not).
    """

    def __init__(
        self,
        frames: Sequence[Frame],
        *,
        speed: float,
        start: float,
        url: str = "",
        cassette_path: object = None,
        allowed: frozenset[str] = ALLOWED_LEFTOVERS,
        ignored: frozenset[str] = IGNORED_KEYS,
        drop: int | None = None,
    ) -> None:
        self.frames = tuple(frames)
        #: The position after which the connection drops (a `cut` fault); past the end: never.
        self.drop = len(self.frames) if drop is None else drop
        self.speed = speed
        self.start = start
        self.url = url
        self.cassette_path = cassette_path
        self.allowed = allowed
        self.ignored = ignored
        self._client = positions(self.frames)
        self._keys = {
            i: frame_key(self.frames[i].kind, self.frames[i].data, ignored) for i in self._client
        }
        self._matched: set[int] = set()
        self._due: list[tuple[float, int]] = []  # (deadline, position): a heap
        self._delivered: set[int] = set()
        self._unread: list[int] = []  # delivered data frames the client's code has not read
        self.closed = False  #: the client sent a close, or the peer ended
        self._release(-1, 0.0, start)

    # -- the client's side ---------------------------------------------------------------------

    def sent(self, kind: str, data: bytes, now: float) -> None:
        """The client sent a frame at clock reading `now`: match it and release its turn.

        Raises:
            FrameMismatchError: a data frame no recorded client frame not yet sent matches.
        """
        if kind not in ("text", "binary"):
            if kind == "close":
                self.closed = True
            return
        key = frame_key(kind, data, self.ignored)
        for position in self._client:
            if position not in self._matched and self._keys[position] == key:
                self._matched.add(position)
                self._release(position, self.frames[position].at, now)
                return
        raise self._mismatch(Frame(0.0, "client", kind, data))

    def _mismatch(self, frame: Frame) -> FrameMismatchError:
        left = [(i, self.frames[i]) for i in self._client if i not in self._matched]
        found = nearest(frame, left)
        if found is None:
            return FrameMismatchError(url=self.url, frame=shown(frame), cassette_path=_path(self))
        position, recorded = found
        return FrameMismatchError(
            url=self.url,
            frame=shown(frame),
            cassette_path=_path(self),
            nearest=f"#{position} at {recorded.at:.3f} s: {shown(recorded)}",
            differences=differences(frame, recorded, self.ignored),
        )

    def _release(self, anchor: int, anchor_at: float, now: float) -> None:
        """Schedule the server frames of the turn that the frame at `anchor` opens."""
        for position in range(anchor + 1, len(self.frames)):
            frame = self.frames[position]
            if frame.sender == "client":
                if frame.kind in ("text", "binary", "close"):  # (after a close: its echo,
                    break  # which the peer makes itself)
                continue
            if math.isinf(self.speed):
                deadline = now
            else:
                deadline = now + max(0.0, frame.at - anchor_at) / self.speed
            heapq.heappush(self._due, (deadline, position))

    # -- the peer's side -----------------------------------------------------------------------

    def next(self, now: float) -> int | float | None:
        """What is due at clock reading `now`: the position of a server frame to send now
        (an int), seconds to wait first (a float), or None (nothing released: wait for the
        client)."""
        if not self._due:
            return None
        deadline, position = self._due[0]
        if deadline - now > _RESOLUTION:
            return float(deadline - now)
        heapq.heappop(self._due)
        return position

    def delivered(self, position: int) -> None:
        """The server frame at `position` went to the client."""
        self._delivered.add(position)
        if self.frames[position].kind in ("text", "binary"):
            self._unread.append(position)

    def read(self) -> None:
        """The client's code read a message (the oldest delivered, unread)."""
        if self._unread:
            self._unread.pop(0)

    @property
    def unread(self) -> int:
        """How many messages were delivered that the client's code has not read yet."""
        return len(self._unread)

    def leftovers(self) -> Leftovers:
        """The frames not consumed, but for those `allowed`."""
        closing = self._closing()
        server = tuple(
            frame
            for i, frame in enumerate(self.frames)
            if frame.sender == "server"
            and i < closing
            and (i not in self._delivered or i in self._unread)
            and self._counts(frame)
        )
        client = tuple(
            self.frames[i]
            for i in self._client
            if i not in self._matched and self._counts(self.frames[i])
        )
        return Leftovers(server, client)

    def _closing(self) -> int:
        """The position of the client's close frame (what follows it is the closing
        handshake, which the peer makes itself); past the end if there is none."""
        return next(
            (i for i, f in enumerate(self.frames) if f.sender == "client" and f.kind == "close"),
            len(self.frames),
        )

    def _counts(self, frame: Frame) -> bool:
        if frame.kind in self.allowed:
            return False
        return frame.event_type not in self.allowed if frame.kind == "text" else True


def _path(conversation: Conversation) -> str | None:
    path = conversation.cassette_path
    return None if path is None else str(path)
