"""One wording for a stream the client closed after its last event: the openai SDK closes a
Chat Completions stream right after `data: [DONE]`, and that stream is complete — `closed
after end` in `show`, `--timeline` and the report, "complete, closed by the client after its
end" in `--events`, the report's tooltip and `check`. A stream the client closed before its
end is still `truncated`. Recorded through the real SDK from a local origin; the verbs run
as subprocesses."""

from __future__ import annotations

from pathlib import Path

import openai
import pytest
from commands import replay_text

import replay
from replay.dialects import closed_after_end
from replay.engine.ends import CLOSED_AFTER_END, CLOSED_AFTER_END_TEXT
from replay.testing import Origin

BODY = {"model": "gpt-4.1", "messages": [{"role": "user", "content": "Hello"}]}


def record(path: Path, *, whole: bool) -> None:
    """One Chat Completions stream, read to `[DONE]` (`whole`) or closed after a chunk."""
    with Origin() as origin, replay.use_cassette(path, record_mode="all"):
        client = openai.OpenAI(api_key="sk-test", base_url=f"{origin.url}/v1", max_retries=0)
        with client.chat.completions.create(**BODY, stream=True) as stream:  # type: ignore[call-overload]
            for _ in stream:
                if not whole:
                    break


@pytest.fixture(scope="module")
def chat(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("closed") / "chat.msgpack"
    record(path, whole=True)
    return path


def test_the_sdk_closes_after_done_and_the_stream_is_complete(chat: Path) -> None:
    interaction = replay.Cassette.load(chat).interactions[0]

    assert interaction.response.end.truncated  # (the SDK closed it: the recording says so)
    assert interaction.response.end.stopped_by == "client"
    assert closed_after_end(interaction)


def test_show_and_the_timeline_say_closed_after_end(chat: Path) -> None:
    for args in (["show"], ["show", "--timeline"]):
        shown = replay_text(*args, str(chat))
        assert shown.returncode == 0, shown.stderr
        assert CLOSED_AFTER_END in shown.stdout
        assert "truncated" not in shown.stdout


def test_events_and_check_say_complete(chat: Path) -> None:
    events = replay_text("show", "--events", str(chat))
    checked = replay_text("check", str(chat))

    assert events.stdout.splitlines()[-1].endswith(f"(end: {CLOSED_AFTER_END_TEXT})")
    assert checked.returncode == 0
    assert checked.stdout == (
        f"checked 1 stream in 1 cassette: no violations (1 {CLOSED_AFTER_END_TEXT})\n"
    )


def test_the_report_says_closed_after_end(chat: Path, tmp_path: Path) -> None:
    page = tmp_path / "report.html"

    done = replay_text("report", str(chat), "-o", str(page))

    assert done.returncode == 0, done.stderr
    html = page.read_text()
    assert CLOSED_AFTER_END in html
    assert CLOSED_AFTER_END_TEXT in html
    assert "client stop" not in html


def test_a_stream_closed_before_its_end_is_still_truncated(tmp_path: Path) -> None:
    path = tmp_path / "cut.msgpack"
    record(path, whole=False)

    shown = replay_text("show", str(path))
    events = replay_text("show", "--events", str(path))
    checked = replay_text("check", str(path))

    assert not closed_after_end(replay.Cassette.load(path).interactions[0])
    assert "truncated" in shown.stdout
    assert CLOSED_AFTER_END not in shown.stdout
    assert events.stdout.splitlines()[-1].endswith("(end: truncated by the client)")
    assert "stream.truncated" in checked.stdout
    assert checked.returncode == 1
