"""Where a cassette's recorded times came from, as `replay show` says it (`Response.times`).

"network": each chunk's time is when its bytes arrived, read by the stamper process
(`replay.adapters.stamper`), which a client holding its GIL cannot delay. "reader": replay's
reader in the client's process took them (no stamper: another platform, another client library,
`REPLAY_STAMPER=off`), so a client that held the GIL delayed them. Cassettes recorded before
this was written down say neither, and nothing is shown for them.
"""

from __future__ import annotations

from collections.abc import Sequence

from replay.model import Interaction

__all__ = ["times_note"]


def times_note(interactions: Sequence[Interaction]) -> list[str]:
    """The note under `show`'s table on where the times came from (none when no
    interaction says)."""
    said = [(index, i.response.times) for index, i in enumerate(interactions) if i.response.times]
    if not said:
        return []
    readers = [f"#{index}" for index, source in said if source == "reader"]
    if not readers:
        return ["times: network arrivals (read by the stamper process)"]
    others = "the rest: network arrivals" if len(readers) < len(said) else "no network times"
    return [
        f"times: {', '.join(readers)} taken by replay's reader in the client's process "
        f"(a client holding the GIL delays them); {others}"
    ]
