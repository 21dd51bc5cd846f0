"""Write `v1.msgpack`, the golden cassette of format version 1. Run once; commit both files.

    python tests/golden/make_v1.py

The document is spelled out field by field with plain msgpack, not through `replay.store.file`,
so that the golden bytes pin the format itself: `tests/test_store.py` checks that replay
still reads this file to the exact interactions below and writes them back byte for byte.
Never regenerate it for a new format version: add `make_v2.py` and `v2.msgpack` beside it.
"""

from __future__ import annotations

from pathlib import Path

import msgpack

DOCUMENT = {
    "format": "replay-cassette",
    "version": 1,
    "interactions": [
        {  # a clean SSE stream: duplicate headers, an event cut mid-line and mid-character
            "request": {
                "method": "POST",
                "url": "https://api.example.com/v1/chat/completions",
                "headers": [
                    ["Host", "api.example.com"],
                    ["Content-Type", "application/json"],
                    ["Authorization", "REDACTED"],
                    ["Accept", "text/event-stream"],
                ],
                "body": b'{"model":"m","stream":true}',
            },
            "response": {
                "status": 200,
                "headers": [
                    ["content-type", "text/event-stream; charset=utf-8"],
                    ["set-cookie", "a=1"],
                    ["Set-Cookie", "b=2"],
                ],
                "headers_at": 0.125,
                "chunks": {
                    "at": [0.25, 0.5, 0.75],
                    "data": [b'data: {"delta":"h\xc3', b'\xa9"}\n\n', b"data: [DONE]\n\n"],
                },
                "end": {"at": 0.75, "error": None, "message": "", "truncated": False},
            },
        },
        {  # the server dropped the connection mid-stream, after a non-UTF-8 chunk
            "request": {
                "method": "GET",
                "url": "http://127.0.0.1:8080/stream?n=2",
                "headers": [],
                "body": b"",
            },
            "response": {
                "status": 200,
                "headers": [["content-type", "application/octet-stream"]],
                "headers_at": 0.0,
                "chunks": {"at": [1.0], "data": [b"\xff\xfe\x00raw"]},
                "end": {
                    "at": 1.5,
                    "error": "RemoteProtocolError",
                    "message": "peer closed connection without sending complete message body",
                    "truncated": False,
                },
            },
        },
        {  # an error status with no body, which the client closed early
            "request": {
                "method": "DELETE",
                "url": "https://api.example.com/v1/items/1",
                "headers": [["X-Trace", "1"], ["x-trace", "2"]],
                "body": b"",
            },
            "response": {
                "status": 404,
                "headers": [],
                "headers_at": 2.0,
                "chunks": {"at": [], "data": []},
                "end": {"at": 2.0, "error": None, "message": "", "truncated": True},
            },
        },
    ],
}


def main() -> None:
    target = Path(__file__).with_name("v1.msgpack")
    target.write_bytes(msgpack.packb(DOCUMENT, use_bin_type=True))
    print(f"wrote {target}")


if __name__ == "__main__":
    main()
