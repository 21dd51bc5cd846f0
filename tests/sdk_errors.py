"""What an SDK raises when the transport fails mid-stream, across the SDK's versions.

anthropic 0.x lets the transport's error through; anthropic 2.x wraps it, as openai does,
in `APIConnectionError` (a read timeout in `APITimeoutError`) chained from it. A test of a
cut or a stall asks for the transport's error, and accepts it either way.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import anthropic
import pytest

__all__ = ["raises_through_anthropic"]


@contextmanager
def raises_through_anthropic(transport_error: type[BaseException]) -> Iterator[None]:
    """Expect `transport_error`, raised bare or wrapped by the anthropic SDK (`from` it)."""
    with pytest.raises((transport_error, anthropic.APIConnectionError)) as caught:
        yield
    error = caught.value
    if isinstance(error, anthropic.APIConnectionError):
        assert isinstance(error.__cause__, transport_error), repr(error.__cause__)
