"""The run's summary of cassette sessions: what no session played, judged per file."""

from __future__ import annotations

from replay.plugin.summary import SessionLog, SessionRecord


def _log(*records: SessionRecord) -> SessionLog:
    log = SessionLog()
    for record in records:
        log.add(record)
    return log


def test_a_file_is_judged_on_what_all_its_sessions_played() -> None:
    log = _log(
        # shared.msgpack: the first test plays 0, the second plays 1 and 2: nothing left.
        SessionRecord(
            "shared.msgpack", "t::a", replayed=1, loaded=3, unplayed=((1, "B"), (2, "C"))
        ),
        SessionRecord("shared.msgpack", "t::b", replayed=2, loaded=3, unplayed=((0, "A"),)),
        # half.msgpack: both tests leave 1; one of them also leaves 0, which the other plays.
        SessionRecord("half.msgpack", "t::c", replayed=1, loaded=2, unplayed=((1, "GET /b"),)),
        SessionRecord("half.msgpack", "t::d", loaded=2, unplayed=((0, "GET /a"), (1, "GET /b"))),
        # all.msgpack: played in full.
        SessionRecord("all.msgpack", "t::e", replayed=1, loaded=1),
    )
    assert log.unplayed() == {"half.msgpack": ["#1 GET /b"]}
    assert log.users("half.msgpack") == ["t::c", "t::d"]


def test_a_file_with_a_mismatch_is_not_judged() -> None:
    log = _log(
        SessionRecord("m.msgpack", "t::a", loaded=2, unplayed=((0, "GET /a"), (1, "GET /b"))),
        SessionRecord(
            "m.msgpack", "t::b", replayed=1, loaded=2, unplayed=((1, "GET /b"),), judged=False
        ),
    )
    assert log.unplayed() == {}


def test_summary_lines_count_cassettes_plays_files_and_what_is_left() -> None:
    log = _log(
        SessionRecord("a.msgpack", "t::a", replayed=2, loaded=3, unplayed=((2, "POST /x"),)),
        SessionRecord("b.msgpack", "t::b", recorded=1, saved=True),
    )
    assert log.summary_lines() == [
        "cassettes used: 2; interactions replayed: 2, recorded: 1",
        "files written: 1",
        "  b.msgpack",
        "unplayed interactions: 1",
        "  a.msgpack #2 POST /x",
    ]


def test_a_record_survives_the_trip_through_plain_data() -> None:
    record = SessionRecord(
        "a.msgpack", "t::a", 1, 2, True, 3, ((0, "GET /", "k0"),), False, ("k1",)
    )
    data = record.to_dict()
    assert data == {
        "path": "a.msgpack",
        "test": "t::a",
        "replayed": 1,
        "recorded": 2,
        "saved": True,
        "loaded": 3,
        "unplayed": ((0, "GET /", "k0"),),
        "judged": False,
        "fresh": ("k1",),
    }
    plain = {**data, "unplayed": [[0, "GET /", "k0"]], "fresh": ["k1"]}  # (as xdist gives it)
    assert SessionRecord.from_dict(plain) == record


def test_what_the_run_recorded_is_not_unplayed() -> None:
    # Six tests share a cassette that the run records: each loads what the ones before it
    # recorded, plays none of it, and records its own.
    records = [
        SessionRecord(
            "shared.msgpack",
            f"t::a[{n}]",
            recorded=1,
            loaded=n,
            unplayed=tuple((i, f"POST /x {{'n': {i}}}", f"k{i}") for i in range(n)),
            fresh=(f"k{n}",),
        )
        for n in range(6)
    ]
    assert _log(*records).unplayed() == {}
    # A stale interaction no test recorded again is still listed, with its index and body.
    stale = SessionRecord("shared.msgpack", "t::b", loaded=7, unplayed=((6, "POST /x {}", "old"),))
    assert _log(*records, stale).unplayed() == {"shared.msgpack": ["#6 POST /x {}"]}
