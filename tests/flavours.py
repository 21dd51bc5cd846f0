"""The client flavours the transport tests run through: each library, each way of running."""

from __future__ import annotations

from types import ModuleType

import httpx
import httpx2
import pytest

__all__ = ["ABANDONED_HTTPX_GENERATORS", "FLAVOURS", "HTTPX_FLAVOURS", "LIBRARIES", "RUNNERS"]

LIBRARIES: dict[str, ModuleType] = {"httpx": httpx, "httpx2": httpx2}
RUNNERS = ("sync", "asyncio", "trio")
FLAVOURS = [
    pytest.param((library, runner), id=f"{library}-{runner}")
    for library in LIBRARIES
    for runner in RUNNERS
]
HTTPX_FLAVOURS = [pytest.param(("httpx", runner), id=f"httpx-{runner}") for runner in RUNNERS]

#: Breaking out of `aiter_raw` abandons httpx's own async generators, which trio reports.
ABANDONED_HTTPX_GENERATORS = pytest.mark.filterwarnings(
    "ignore:Async generator 'httpx:ResourceWarning"
)
