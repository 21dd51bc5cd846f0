"""`replay.model.TimedEvent`, in a module of its own: imported when first asked for."""

from __future__ import annotations

import attrs

__all__ = ["TimedEvent"]


@attrs.frozen(kw_only=True)
class TimedEvent:
    """A server-sent event and the time its completing chunk arrived."""

    at: float
    event: str
    data: str
    id: str = ""
    retry: int | None = None
