"""replay's errors as values: they cross processes whole."""

from __future__ import annotations

import multiprocessing
import pickle

import pytest

import replay
from replay.errors import COMMAND_ADVICE, ReplayError

ERRORS = [
    pytest.param(replay.CassetteFormatError("c.msgpack", "truncated"), id="format"),
    pytest.param(replay.CassetteWriteError("c.msgpack", "No space left on device", 28), id="write"),
    pytest.param(
        replay.CassetteMismatchError(
            method="POST",
            url="https://api.test/v1?key=sk-secret",
            cassette_path="c.msgpack",
            record_mode="none",
            nearest="POST https://api.test/v1",
            differences=[("body", "differs")],
            advice=COMMAND_ADVICE,
        ),
        id="mismatch",
    ),
    pytest.param(
        replay.NetworkBlockedError(method="GET", url="https://api.test/", library="urllib3"),
        id="network-blocked",
    ),
    pytest.param(replay.AmbiguousSessionError(["a.msgpack", "b.msgpack"]), id="ambiguous"),
    pytest.param(replay.DecoderMissingError("br", "brotli", "brotli"), id="decoder-missing"),
    pytest.param(replay.DecodedTooLargeError("gzip", 10), id="too-large"),
    pytest.param(replay.ConfigurationError("a speed of 0"), id="configuration"),
]


@pytest.mark.parametrize("error", ERRORS)
def test_an_error_survives_pickling_with_its_message_and_fields(error: ReplayError) -> None:
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is type(error)
    assert str(again) == str(error)
    assert vars(again) == vars(error)


def _blocked(_: int) -> None:
    raise replay.NetworkBlockedError(method="GET", url="https://api.test/")


def test_an_error_raised_in_a_pool_worker_reaches_the_caller() -> None:
    # Unpicklable, it would crash the pool's result thread and hang the caller's get().
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        result = pool.map_async(_blocked, [0])
        with pytest.raises(replay.NetworkBlockedError, match=r"GET https://api\.test/ was refused"):
            result.get(timeout=60)


def test_advice_is_an_immutable_value() -> None:
    from replay.errors import Advice

    assert Advice() == Advice()
    assert hash(Advice()) == hash(Advice())
    assert Advice() != COMMAND_ADVICE
    assert pickle.loads(pickle.dumps(COMMAND_ADVICE)) == COMMAND_ADVICE
    assert repr(Advice(record="r", repeat="p", ignore_host="h")) == (
        "Advice(record='r', repeat='p', ignore_host='h')"
    )
    with pytest.raises(AttributeError):
        COMMAND_ADVICE.record = "x"
