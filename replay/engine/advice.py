"""`Advice`: how a mismatch's advice is worded where its error is read.

Apart from `replay.errors`, which imports nothing of replay's: an `Advice` is a `Frozen`
value (it crosses into a `replay run` child with the imposed options).
"""

from __future__ import annotations

from replay.clock.frozen import Frozen
from replay.errors import LibraryAdvice

__all__ = ["COMMAND_ADVICE", "Advice"]


class Advice(Frozen):
    """How a mismatch's advice is worded where its error is read: the library's keywords by
    default (`replay.errors.LibraryAdvice`); `replay run` words it in its own flags (see
    `COMMAND_ADVICE`). An `replay.errors.AdviceWording`.

    Attributes:
        record: how to record the request that had no match.
        repeat: how to let an interaction answer again.
        ignore_host: how to let a host's requests go live (`{host}` is filled in).
        rewrite: how to record again a request whose recording is stale (its body changed).
    """

    # (A plain immutable class, not a dataclass: see `replay.clock.frozen`.)
    __slots__ = ("ignore_host", "record", "repeat", "rewrite")
    FIELDS = ("record", "repeat", "ignore_host", "rewrite")

    record: str
    repeat: str
    ignore_host: str
    rewrite: str

    def __init__(
        self,
        record: str = LibraryAdvice.record,
        repeat: str = LibraryAdvice.repeat,
        ignore_host: str = LibraryAdvice.ignore_host,
        rewrite: str = LibraryAdvice.rewrite,
    ) -> None:
        set_field = object.__setattr__
        set_field(self, "record", record)
        set_field(self, "repeat", repeat)
        set_field(self, "ignore_host", ignore_host)
        set_field(self, "rewrite", rewrite)


#: The advice of `replay run` and `replay record`: their flags, not keyword arguments.
COMMAND_ADVICE = Advice(
    record="run again with --mode new_episodes (or record it all again with replay record)",
    repeat="a cassette answers each request once: record it again for each time it is made",
    ignore_host="--ignore-host {host}",
    rewrite="record it all again with replay record (--mode new_episodes would keep the stale "
    "recording beside the new one, unplayed)",
)
