"""A WebSocket conversation in the model and the file: frames both ways, their checks, old
cassettes unchanged, tools that do not know frames unbroken."""

from __future__ import annotations

from pathlib import Path

import msgpack
import pytest
from commands import replay_text

from replay.convert.json_export import export_json, import_json
from replay.errors import CassetteFormatError
from replay.model import Interaction, Request, Response
from replay.model.frames import Frame
from replay.store.cassette import Cassette
from replay.store.file import MAPPED_FROM, dumps, load_interactions, save_interactions

FRAMES = (
    Frame(0.01, "server", "text", b'{"type":"session.created","event_id":"e1"}'),
    Frame(0.02, "client", "text", b'{"type":"response.create","event_id":"c1"}'),
    Frame(0.05, "server", "binary", b"\x00\xff"),
    Frame(0.06, "server", "ping", b"hi"),
    Frame(0.061, "client", "pong", b"hi"),
    Frame.close(0.1, "client", 1000, "bye"),
    Frame.close(0.11, "server", 1000, "bye"),
)


def _conversation(frames: tuple[Frame, ...] = FRAMES) -> Interaction:
    return Interaction(
        Request(
            method="GET", url="wss://api.example/v1/realtime", headers=[("Upgrade", "websocket")]
        ),
        Response(status=101, headers=[("Upgrade", "websocket")], headers_at=0.004),
        frames=frames,
    )


def _http() -> Interaction:
    return Interaction(Request(method="GET", url="https://api.example/"), Response(status=200))


def test_frames_round_trip_through_the_file(tmp_path: Path) -> None:
    path = tmp_path / "ws.msgpack"
    save_interactions(path, [_http(), _conversation()])
    http, conversation = load_interactions(path)
    assert http.frames is None
    assert conversation == _conversation()
    close = conversation.frames[-1] if conversation.frames else None
    assert close is not None
    assert (close.kind, close.code, close.reason) == ("close", 1000, "bye")


def test_a_long_conversation_is_read_by_the_walker_alike(tmp_path: Path) -> None:
    many = tuple(Frame(i / 1000, "server", "text", b"x" * 100) for i in range(2000))
    path = tmp_path / "long.msgpack"
    save_interactions(path, [_conversation(many)])
    assert path.stat().st_size > 64 * 1024
    [loaded] = load_interactions(path)
    assert loaded.frames == many


def test_a_file_without_frames_loads_as_before(tmp_path: Path) -> None:
    path = tmp_path / "old.msgpack"
    path.write_bytes(dumps([_http()]))
    assert b"frames" not in path.read_bytes()
    assert load_interactions(path)[0].frames is None


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"op": [1, 1, 2, 9, 10, 8, 7]}, "frames[6].op: not an opcode"),
        ({"at": [0.2, 0.1, 0.3, 0.4, 0.5, 0.6, 0.7]}, "frames[1].at"),
        ({"client": [1, 0, 0, 0, 1, 1, 0]}, "frames[0].client: expected bool"),
        ({"data": [b""] * 6}, "the columns differ in length"),
    ],
)
def test_a_damaged_frame_is_one_format_error_naming_it(
    tmp_path: Path, change: dict[str, object], problem: str
) -> None:
    document = msgpack.unpackb(dumps([_conversation()]))
    document["interactions"][0]["frames"].update(change)
    path = tmp_path / "bad.msgpack"
    path.write_bytes(msgpack.packb(document, use_bin_type=True))
    with pytest.raises(CassetteFormatError, match=r"interactions\[0\]\.frames"):
        load_interactions(path)
    with pytest.raises(CassetteFormatError) as raised:
        load_interactions(path)
    assert problem in str(raised.value)


def test_json_export_keeps_the_frames() -> None:
    text = export_json([_conversation(), _http()])
    assert '"from": "client"' in text
    assert import_json(text) == [_conversation(), _http()]


def test_the_frame_repr_shows_no_payload() -> None:
    secret = Frame(0.0, "client", "text", b'{"api_key": "sk-proj-abcdefghijklmnopqrstuvwxyz01"}')
    assert "sk-proj" not in repr(secret)
    assert "sk-proj" not in repr(_conversation((secret,)))


def test_show_and_check_read_a_conversation_cassette(tmp_path: Path) -> None:
    path = tmp_path / "ws.msgpack"
    Cassette([_conversation()]).save(path)
    shown = replay_text("show", str(path))
    assert shown.returncode == 0, shown.stderr
    assert "wss://api.example/v1/realtime" in shown.stdout
    assert "101" in shown.stdout
    checked = replay_text("check", str(path))
    assert "Traceback" not in checked.stderr
    assert checked.returncode in (0, 1), checked.stderr  # (1: a finding, not a crash)


def test_a_conversation_in_a_file_past_the_mapped_size_is_saved_again(tmp_path: Path) -> None:
    # A long Realtime audio session: a file read piece by piece (`store.MAPPED_FROM`), whose
    # response payloads are spooled, is written again (convert, new episodes) as it was.
    frames = tuple(Frame(0.001 * n, "server", "binary", bytes(1024)) for n in range(17_500))
    path, again = tmp_path / "long.msgpack", tmp_path / "again.msgpack"
    save_interactions(path, [_conversation(frames)])
    assert path.stat().st_size > MAPPED_FROM
    [loaded] = load_interactions(path)
    save_interactions(again, [loaded])
    assert again.read_bytes() == path.read_bytes()
