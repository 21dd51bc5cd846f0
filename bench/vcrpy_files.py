"""vcrpy cassettes written the way vcrpy writes them (benchmarks 2, 3 and 9).

vcrpy's own persister and YAML serializer, given the dict its httpx stub records: the
cassette a `vcr.use_cassette` recording of the same interactions would have left.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

import replay


def vcr_request(request: replay.Request) -> Any:
    from vcr.request import Request as VcrRequest

    return VcrRequest(request.method, request.url, request.body, dict(request.headers))


def vcr_response(response: replay.Response) -> dict[str, Any]:
    """The response as vcrpy's httpx stub records it: status, headers, the body joined."""
    from vcr.stubs.httpx_stubs import _serialize_response

    live = httpx.Response(response.status, headers=list(response.headers))
    serialized: dict[str, Any] = _serialize_response(live, response.body)
    return serialized


def save_vcr_cassette(path: Path, interactions: Sequence[replay.Interaction]) -> None:
    """Write `interactions` as a vcrpy YAML cassette, with vcrpy's own persister."""
    from vcr.persisters.filesystem import FilesystemPersister
    from vcr.serializers import yamlserializer

    cassette = {
        "requests": [vcr_request(i.request) for i in interactions],
        "responses": [vcr_response(i.response) for i in interactions],
    }
    FilesystemPersister.save_cassette(path, cassette, yamlserializer)
