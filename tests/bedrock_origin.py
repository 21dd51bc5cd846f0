"""What the Bedrock tests share: fake AWS credentials, a loopback origin's script of a real
event-stream body (messages split at odd places, with gaps), clients pointed at it, and
the check that a replay at 1x kept the recorded pace."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterable, Iterator
from typing import Any

from pacing import EARLY, LATE

from replay.framing import eventstream
from replay.model import Interaction
from replay.testing import Script

KEY_ID = "AKIDEXAMPLE"
SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
TOKEN = "FwoGZXIvYXdzEXAMPLESESSIONTOKEN"
#: What must never be in a cassette recorded with those credentials.
SECRETS = (TOKEN, SECRET, "Signature=", KEY_ID)
GAP = 0.02  # seconds before each piece the origin sends


def odd_pieces(body: bytes) -> list[bytes]:
    """The body cut at odd places: inside preludes, headers, payloads and CRCs."""
    cuts = sorted({min(cut, len(body)) for cut in (0, 5, 13, 40, 41, 97, 150, 151, 152, 300)})
    cuts.append(len(body))
    return [body[a:b] for a, b in itertools.pairwise(cuts) if b > a]


def script(interaction: Interaction, gap: float = GAP) -> Script:
    """The origin's answer: `interaction`'s body as an event stream, cut oddly, with gaps."""
    body = b"".join(interaction.response.chunks.payloads)
    return Script(
        chunks=[(gap, piece) for piece in odd_pieces(body)],
        headers=[("content-type", eventstream.CONTENT_TYPE)],
    )


def credentials(signing: str = "") -> dict[str, str]:
    """boto3's keyword arguments for fake credentials (`signing` changes the signature)."""
    return {
        "region_name": "us-east-1",
        "aws_access_key_id": KEY_ID + signing,
        "aws_secret_access_key": SECRET,
        "aws_session_token": TOKEN,
    }


def since(start: float, items: Iterable[Any]) -> Iterator[tuple[float, Any]]:
    """Each item with the seconds since `start` (a `time.monotonic()` before the request)."""
    for item in items:
        yield time.monotonic() - start, item


def assert_at_recorded_times(arrived: list[tuple[float, Any]], times: list[float]) -> None:
    """Each event came no earlier than recorded (from a clock started before the request
    was sent), and no more than LATE after."""
    assert len(arrived) == len(times)
    for index, ((at, _), due) in enumerate(zip(arrived, times, strict=True)):
        assert -EARLY <= at - due <= LATE, f"event {index}: {at - due:+.3f} s off"
