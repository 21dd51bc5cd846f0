"""The frames of a WebSocket conversation: who sent each, what kind, its bytes, and when.

A WebSocket conversation is one `Interaction`: its request is the upgrade request (a GET,
matched and redacted as any request), its response the server's answer to it (101
Switching Protocols, headers only), and `Interaction.frames` the messages both ways after
it, in the order they were sent or received. Each `Frame` says:

- `at`: seconds from sending the upgrade request to the frame (sent by the client, or
  received from the server), as the response's chunk times are;
- `sender`: "client" or "server";
- `kind`: "text", "binary", "ping", "pong" or "close" (RFC 6455's opcodes; a message sent
  in fragments is one frame, at the time of its last fragment);
- `data`: the payload, uncompressed: UTF-8 for text; for a close frame, the payload as on
  the wire (a 2-byte code, then the UTF-8 reason), read back as `code` and `reason`.

Frames are values only; what replays them is `replay.engine.conversation`, the file layout
`replay.store.frames`. Nothing here imports anything of replay's but `replay.model.chunks`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, Final

import attrs

from replay.model.chunks import seconds

__all__ = ["KINDS", "OPCODES", "SENDERS", "Frame", "frames_in_order"]

#: Who sends a frame.
SENDERS: Final = ("client", "server")

#: The kinds of frame, by RFC 6455 opcode (a continuation is folded into its message).
OPCODES: Final = {1: "text", 2: "binary", 8: "close", 9: "ping", 10: "pong"}

#: The kinds of frame.
KINDS: Final = tuple(OPCODES.values())

#: The opcode of each kind.
OPCODE_OF: Final = {kind: opcode for opcode, kind in OPCODES.items()}


@attrs.frozen
class Frame:
    """One WebSocket message of a conversation, as sent or received.

    Args:
        at: seconds from sending the upgrade request to this frame.
        sender: "client" or "server".
        kind: "text", "binary", "ping", "pong" or "close".
        data: the payload (text as UTF-8; a close frame's as on the wire: code, reason).
    """

    at: float = attrs.field(validator=seconds)
    sender: str = attrs.field(validator=attrs.validators.in_(SENDERS))
    kind: str = attrs.field(validator=attrs.validators.in_(KINDS))
    data: bytes = attrs.field(default=b"", validator=attrs.validators.instance_of(bytes))

    @classmethod
    def close(cls, at: float, sender: str, code: int | None = None, reason: str = "") -> Frame:
        """A close frame with `code` (None: no code, so no reason either) and `reason`."""
        if code is None:
            return cls(at, sender, "close")
        return cls(at, sender, "close", code.to_bytes(2, "big") + reason.encode())

    @property
    def opcode(self) -> int:
        """The frame's RFC 6455 opcode."""
        return OPCODE_OF[self.kind]

    @property
    def text(self) -> str:
        """The payload as text (UTF-8; a close frame's reason); undecodable bytes replaced."""
        if self.kind == "close":
            return self.reason
        return self.data.decode("utf-8", "replace")

    @property
    def code(self) -> int | None:
        """A close frame's code (None: no code given, or not a close frame)."""
        if self.kind != "close" or len(self.data) < 2:
            return None
        return int.from_bytes(self.data[:2], "big")

    @property
    def reason(self) -> str:
        """A close frame's reason ("" if none, or not a close frame)."""
        if self.kind != "close":
            return ""
        return self.data[2:].decode("utf-8", "replace")

    def json(self) -> Any:
        """The payload of a text frame parsed as JSON; None if it is not JSON (or not text)."""
        if self.kind != "text":
            return None
        try:
            return json.loads(self.data)
        except (ValueError, RecursionError):  # nested past the parser's stack: no event
            return None

    @property
    def event_type(self) -> str | None:
        """The `type` of a JSON object text frame (`response.create`, …), else None."""
        value = self.json()
        if isinstance(value, dict) and isinstance(value.get("type"), str):
            return str(value["type"])
        return None

    def __repr__(self) -> str:
        # The payload as its size: a frame may carry a key or a screenful of audio.
        what = f"code={self.code}" if self.kind == "close" else f"<{len(self.data)} bytes>"
        return f"Frame(at={self.at!r}, sender={self.sender!r}, kind={self.kind!r}, {what})"


def frames_in_order(frames: Iterable[Frame]) -> tuple[Frame, ...]:
    """`frames` as a tuple, checked: each a `Frame`, their times never going back.

    Raises:
        TypeError: an element is no `Frame`.
        ValueError: a frame is earlier than the one before it.
    """
    result = tuple(frames)
    last = 0.0
    for index, frame in enumerate(result):
        if not isinstance(frame, Frame):
            raise TypeError(f"frame {index} must be a Frame, not {type(frame).__name__}")
        if frame.at < last:
            raise ValueError(f"frame {index} at {frame.at} s comes before the one before it")
        last = frame.at
    return result
