"""The engine on its own: pure objects, driven synchronously, with no I/O and no clock."""

from __future__ import annotations

import pickle
import threading
from pathlib import Path

import pytest

from replay import faults
from replay.clock import Schedule
from replay.engine import Data, End, Head, Player, Stepper, Tape, Wait, read_timeouts
from replay.engine.recorder import KEPT_IN_MEMORY
from replay.engine.stepper import STALL_TIMEOUT_MESSAGE
from replay.errors import CassetteMismatchError
from replay.model import Chunk, Interaction, Request, Response, StreamEnd
from replay.redact.redactor import Redactor
from replay.store.cassette import Cassette
from replay.store.file import dumps
from replay.store.spool import SPOOL_PIECE, Spool, SpooledPayloads

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


# -- the spool -------------------------------------------------------------------------------


def spooled_recording(tape: Tape, payloads: list[bytes]) -> Interaction:
    """What `tape` keeps of a response of `payloads`, a chunk a millisecond."""
    clock = Ticks()
    recording = tape.start(request(), clock, start=0.0)
    recording.got_headers(200, [("content-type", "application/octet-stream")])
    for index, payload in enumerate(payloads):
        clock.time = index / 1000
        recording.got_chunk(payload)
    recording.finish()
    return tape.cassette.interactions[-1]


def long_body() -> list[bytes]:
    # Past SPOOL_PIECE twice and a bit, in chunks of several sizes (an empty one among them).
    sizes = [0, 1, 7, 65536, 300_000, *[200_000] * 12]
    return [bytes([index % 251]) * size for index, size in enumerate(sizes)]


def test_a_long_recording_keeps_its_payloads_in_the_spool_and_reads_them_back(
    tmp_path: Path,
) -> None:
    payloads = long_body()
    assert sum(map(len, payloads)) > 2 * SPOOL_PIECE
    interaction = spooled_recording(Tape(Cassette(), spool=Spool(tmp_path)), payloads)
    chunks = interaction.response.chunks
    assert isinstance(chunks.payloads, SpooledPayloads)
    assert list(chunks.payloads) == payloads
    assert chunks.payloads[4] == payloads[4]
    assert list(chunks.payloads[3:5]) == payloads[3:5]
    assert [chunk.data for chunk in chunks] == payloads
    in_memory = spooled_recording(Tape(Cassette()), payloads)
    assert in_memory.response.chunks.payloads == tuple(payloads)
    assert interaction == in_memory  # compares, hashes and pickles as its payloads' tuple
    assert hash(interaction.response.chunks) == hash(in_memory.response.chunks)
    assert pickle.loads(pickle.dumps(interaction)) == in_memory
    assert dumps([interaction]) == dumps([in_memory])
    assert list(tmp_path.iterdir()) == []  # the spool has no name: nothing is left behind


def test_a_short_recording_stays_in_memory(tmp_path: Path) -> None:
    interaction = spooled_recording(Tape(Cassette(), spool=Spool(tmp_path)), [b"data: 1\n\n"])
    assert interaction.response.chunks.payloads == (b"data: 1\n\n",)


def test_a_spool_that_cannot_be_made_leaves_the_payloads_in_memory(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_bytes(b"")  # the spool's directory would be inside a file
    payloads = long_body()
    interaction = spooled_recording(Tape(Cassette(), spool=Spool(blocker / "d")), payloads)
    assert interaction.response.chunks.payloads == tuple(payloads)


def test_a_forked_tape_gets_a_spool_of_its_own(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    tape = Tape(Cassette(), spool=spool)
    tape.forget()
    assert tape.spool is not spool
    assert tape.spool is not None
    assert tape.spool.directory == tmp_path


def test_short_recordings_go_to_the_spool_once_the_tape_keeps_enough_in_memory(
    tmp_path: Path,
) -> None:
    tape = Tape(Cassette(), spool=Spool(tmp_path))
    body = [b"x" * 100_000] * 6  # 600 kB: short of SPOOL_PIECE
    kept = [spooled_recording(tape, body).response.chunks.payloads for _ in range(20)]
    in_memory = [payloads for payloads in kept if type(payloads) is tuple]
    assert len(in_memory) == KEPT_IN_MEMORY // 600_000
    assert kept[: len(in_memory)] == in_memory  # the first ones
    assert all(payloads == tuple(body) for payloads in kept)
    in_memory_tape = Tape(Cassette())
    for _ in range(20):
        spooled_recording(in_memory_tape, body)
    assert dumps(tape.cassette.interactions) == dumps(in_memory_tape.cassette.interactions)


def test_a_long_recording_of_short_chunks_is_spooled_and_read_back_whole(tmp_path: Path) -> None:
    # Some 10,000 payloads a piece: written by several `writev`s, each of at most 1,024.
    payloads = [b"data: %d\n\n" % i + b"x" * (i % 200) for i in range(20_000)]
    assert sum(map(len, payloads)) > SPOOL_PIECE
    interaction = spooled_recording(Tape(Cassette(), spool=Spool(tmp_path)), payloads)
    assert isinstance(interaction.response.chunks.payloads, SpooledPayloads)
    assert list(interaction.response.chunks.payloads) == payloads
