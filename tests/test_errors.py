"""replay's errors as values: they cross processes whole."""

from __future__ import annotations

import multiprocessing
import pickle
import subprocess
import sys

import pytest

import replay
from replay.engine.advice import COMMAND_ADVICE
from replay.errors import ReplayError

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
    from replay.engine.advice import Advice

    assert Advice() == Advice()
    assert hash(Advice()) == hash(Advice())
    assert Advice() != COMMAND_ADVICE
    assert pickle.loads(pickle.dumps(COMMAND_ADVICE)) == COMMAND_ADVICE
    assert repr(Advice(record="r", repeat="p", ignore_host="h", rewrite="w")) == (
        "Advice(record='r', repeat='p', ignore_host='h', rewrite='w')"
    )
    with pytest.raises(AttributeError):
        COMMAND_ADVICE.record = "x"


def test_the_errors_module_imports_nothing_of_replay() -> None:
    # Every module may raise its errors: it sits below them all, in a process of its own.
    code = (
        "import sys, replay.errors; "
        "print(sorted(m for m in sys.modules if m.startswith('replay') and m != 'replay.errors'))"
    )
    ran = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert ran.stdout.strip() == "['replay']"  # the package itself, whose __init__ is lazy


def test_the_unplayed_warning_lists_the_first_five_requests_and_counts_the_rest() -> None:
    requests = [f"GET https://api.test/v1/{n}" for n in range(7)]

    message = replay.errors.UnplayedInteractionsWarning.describe("c.msgpack", requests)

    assert message == (
        "7 unplayed interactions in cassette 'c.msgpack':"
        + "".join(f"\n  GET https://api.test/v1/{n}" for n in range(5))
        + "\n  … and 2 more"
    )


def test_a_mismatch_shows_its_request_and_advice_as_given() -> None:
    error = replay.CassetteMismatchError(
        method="GET",
        url="https://api.test/v1?model=m",
        cassette_path=None,
        record_mode="none",
        nearest="GET https://api.test/v1?model=n",
        differences=[("query", "model differs")],
    )

    assert str(error).splitlines() == [
        "GET https://api.test/v1?model=m has no match in the in-memory cassette "
        "(record mode 'none')",
        "Nearest recorded request: GET https://api.test/v1?model=n",
        "  query differs: model differs",
        "To record it, use record_mode='new_episodes' (or 'all' to record everything again).",
    ]
