"""The engine on its own: pure objects, driven synchronously, with no I/O and no clock."""

from __future__ import annotations

import threading

import pytest

from replay import faults
from replay.cassette import Cassette
from replay.clock import Schedule
from replay.engine import Data, End, Head, Player, Stepper, Tape, Wait, read_timeouts
from replay.engine.stepper import STALL_TIMEOUT_MESSAGE
from replay.errors import CassetteMismatchError
from replay.model import Chunk, Interaction, Request, Response, StreamEnd
from replay.redact import Redactor

URL = "https://api.example.test/v1/stream"
RESPONSE = Response(
    status=200,
    headers_at=0.1,
    chunks=[Chunk(0.2, b"data: one\n\n"), Chunk(0.5, b"data: two\n\n")],
    end=StreamEnd(at=0.6, error="RemoteProtocolError", message="peer closed"),
)


def request(body: bytes = b"") -> Request:
    return Request(method="POST", url=URL, headers=[("authorization", "Bearer sk-x")], body=body)


# -- Stepper -------------------------------------------------------------------------------------


def test_at_instant_speed_every_step_is_due_at_once() -> None:
    stepper = Stepper(RESPONSE)
    steps = [stepper.next() for _ in range(4)]
    assert steps == [
        Head(),
        Data(b"data: one\n\n"),
        Data(b"data: two\n\n"),
        End("RemoteProtocolError", "peer closed"),
    ]
    assert stepper.finished
    assert stepper.next() == End()


@pytest.mark.parametrize(("speed", "start"), [(1.0, 0.0), (2.0, 100.0), (0.5, 7.0)])
def test_each_step_waits_for_its_absolute_deadline(speed: float, start: float) -> None:
    stepper = Stepper(RESPONSE, Schedule(start=start, speed=speed))
    now = start
    seen = []
    for at in (0.1, 0.2, 0.5, 0.6):
        wait = stepper.next(now)
        assert wait == Wait(pytest.approx(at / speed - (now - start)))
        now = start + at / speed
        seen.append(stepper.next(now))
    assert [type(step) for step in seen] == [Head, Data, Data, End]


def test_a_late_reader_gets_what_is_due_without_waiting() -> None:
    stepper = Stepper(RESPONSE, Schedule(start=0.0, speed=1.0))
    assert stepper.next(10.0) == Head()
    assert stepper.next(10.0) == Data(b"data: one\n\n")


def test_a_step_is_taken_once_waited_for_without_asking_the_clock_again() -> None:
    stepper = Stepper(RESPONSE, Schedule(start=0.0, speed=1.0))
    assert isinstance(stepper.next(0.0), Wait)
    assert stepper.next() == Head()


def test_a_read_timeout_replaces_the_step_after_a_long_silence() -> None:
    timeouts = read_timeouts(RESPONSE, stall_steps=(1,), read_timeout=0.1)
    assert timeouts == {1: pytest.approx(0.3)}
    stepper = Stepper(RESPONSE, Schedule(start=0.0, speed=1.0), timeouts=timeouts)
    assert stepper.next(0.1) == Head()
    assert stepper.next(0.2) == Data(b"data: one\n\n")
    assert stepper.next(0.2) == Wait(pytest.approx(0.1))
    assert stepper.next(0.31) == End("ReadTimeout", STALL_TIMEOUT_MESSAGE)
    assert stepper.finished


def test_no_read_timeout_when_the_silence_is_shorter() -> None:
    assert read_timeouts(RESPONSE, stall_steps=(1,), read_timeout=0.5) == {}
    assert read_timeouts(RESPONSE, stall_steps=(1,), read_timeout=None) == {}


def test_instant_replay_hands_out_the_payloads_at_once() -> None:
    stepper = Stepper(RESPONSE)
    assert stepper.next() == Head()
    assert stepper.rest_at_once() == (b"data: one\n\n", b"data: two\n\n")
    assert stepper.next() == End("RemoteProtocolError", "peer closed")


def test_a_scheduled_replay_never_hands_out_the_payloads_at_once() -> None:
    stepper = Stepper(RESPONSE, Schedule(start=0.0, speed=1.0))
    stepper.next(1.0)
    assert stepper.rest_at_once() is None


def test_a_closed_stepper_ends_cleanly() -> None:
    stepper = Stepper(RESPONSE)
    stepper.next()
    stepper.close()
    assert stepper.next() == End()


# -- Player --------------------------------------------------------------------------------------


def cassette(*bodies: bytes) -> Cassette:
    return Cassette([Interaction(request(body), RESPONSE) for body in bodies])


def test_the_player_finds_the_answer_and_counts_it_played() -> None:
    player = Player(cassette(b"a", b"b"))
    played = player.take(request(b"b"))
    assert played.index == 1
    assert played.response is RESPONSE
    assert player.cassette.play_counts == [0, 1]


def test_a_miss_raises_and_is_remembered_without_the_secret() -> None:
    player = Player(cassette(b"a"), record_mode="once")
    with pytest.raises(CassetteMismatchError) as caught:
        player.take(request(b"zzz"), reason="Why it did not record.")
    assert player.mismatches == [caught.value]
    assert "sk-x" not in str(caught.value)
    assert "Why it did not record." in str(caught.value)
    assert player.find(request(b"zzz")) is None


def test_only_the_replayable_interactions_answer() -> None:
    player = Player(cassette(b"a", b"a"), replayable=1)
    assert player.take(request(b"a")).index == 0
    assert player.find(request(b"a")) is None


def test_a_status_fault_answers_without_using_the_interaction_up() -> None:
    player = Player(cassette(b"a"), faults=[faults.status(429, times=1)])
    first = player.take(request(b"a"))
    assert first.response.status == 429
    assert player.cassette.play_counts == [0]
    second = player.take(request(b"a"))
    assert second.response is RESPONSE
    player.settle()
    assert player.cassette.play_counts == [1]


def test_a_stall_fault_names_its_steps() -> None:
    player = Player(cassette(b"a"), faults=[faults.stall(after_events=1, seconds=5)])
    played = player.take(request(b"a"))
    assert played.stall_steps == (1,)
    assert played.response.chunks[1].at == pytest.approx(5.5)


def test_concurrent_takes_each_get_their_own_interaction() -> None:
    player = Player(cassette(*([b"x"] * 200)))
    taken: list[int] = []
    lock = threading.Lock()

    def take() -> None:
        for _ in range(50):
            index = player.take(request(b"x")).index
            with lock:
                taken.append(index)

    threads = [threading.Thread(target=take) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(taken) == list(range(200))


# -- Tape and Recording --------------------------------------------------------------------------


class Ticks:
    """A clock that reads what it is told."""

    def __init__(self) -> None:
        self.time = 0.0

    def now(self) -> float:
        return self.time

    def sleep(self, seconds: float) -> None:
        raise AssertionError("a recording never waits")

    async def asleep(self, seconds: float) -> None:
        raise AssertionError("a recording never waits")


def test_a_recording_collects_its_timeline_into_a_redacted_interaction() -> None:
    clock, tape = Ticks(), Tape(Cassette())
    recording = tape.start(request(), clock, start=0.0)
    assert tape.open == 1
    clock.time = 0.1
    recording.got_headers(200, [("x-api-key", "sk-secret")])
    clock.time = 0.25
    recording.got_chunk(b"data: one\n\n")
    recording.got_chunk(b"data: two\n\n", at=0.3)
    clock.time = 0.4
    recording.finish()
    recording.finish(stopped_by="client")  # the first finish wins
    [interaction] = tape.cassette.interactions
    response = interaction.response
    assert (response.headers_at, response.chunks.times) == (0.1, (0.25, 0.3))
    assert response.end == StreamEnd(at=0.4)
    assert response.header("x-api-key") == "REDACTED"
    assert interaction.request.header("authorization") == "REDACTED"
    assert tape.open == 0


def test_a_request_without_headers_leaves_nothing_on_the_tape() -> None:
    tape = Tape(Cassette())
    tape.start(request(), Ticks(), start=0.0).finish(error=ConnectionError("refused"))
    assert tape.cassette.interactions == []
    assert tape.open == 0


def test_finishing_the_tape_ends_what_is_still_open_as_stopped_by_the_session() -> None:
    clock, tape = Ticks(), Tape(Cassette())
    recording = tape.start(request(), clock, start=0.0)
    recording.got_headers(200, [])
    recording.got_chunk(b"data: one\n\n")
    tape.finish(timeout=0.0)
    [interaction] = tape.cassette.interactions
    assert interaction.response.end.stopped_by == "session"
    assert interaction.response.end.truncated


def test_finishing_the_tape_waits_for_a_recording_ending_meanwhile() -> None:
    tape = Tape(Cassette())
    recording = tape.start(request(), Ticks(), start=0.0)
    recording.got_headers(200, [])
    ender = threading.Timer(0.05, recording.finish)
    ender.start()
    tape.finish(timeout=5.0)
    ender.join()
    [interaction] = tape.cassette.interactions
    assert interaction.response.end == StreamEnd(at=0.0)


def test_the_before_record_hook_may_drop_an_interaction() -> None:
    tape = Tape(Cassette(), Redactor(hook=lambda interaction: None))
    recording = tape.start(request(), Ticks(), start=0.0)
    recording.got_headers(200, [])
    recording.finish()
    assert tape.cassette.interactions == []
    assert tape.open == 0
