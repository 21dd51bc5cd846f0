"""The pytest plugin's watcher of a run: each cassette session's record on its test's
report, the failed test's explanation, and the `replay` section of the terminal summary.

Registered by `replay.plugin.hooks` at configure; as that module, it imports nothing of the
library until a session reports to it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from replay.plugin.summary import SessionLog, SessionRecord, Unplayed
    from replay.session.lifecycle import CassetteSession

__all__ = ["Run", "option"]

#: The cassette sessions each test entered, on its item's stash until it is reported.
_SESSIONS = pytest.StashKey["list[CassetteSession]"]()


def option(config: pytest.Config, name: str, ini: str) -> Any:
    """The command line's `name`, else the ini file's `ini`."""
    # None is "not given"; so is pytest-recording's False default of a shared flag.
    value = config.getoption(name)
    return config.getini(ini) if value is None or value is False else value


def _uses_cassette(item: pytest.Item) -> bool:
    """Whether `item` will enter a cassette session: it is marked, or asks for the fixture."""
    if item.get_closest_marker("use_cassette") is not None:
        return True
    return "cassette" in getattr(item, "fixturenames", ())


def _display(path: Path, root: str) -> str:
    """`path` as the summary shows it: relative to the rootdir `root` when under it."""
    shown = str(path)
    if shown.startswith(root) and shown[len(root) : len(root) + 1] == os.sep:
        return shown[len(root) + 1 :]  # (what `relative_to` gives, without its cost)
    try:
        return str(path.relative_to(root))
    except ValueError:
        return shown


def _described(request: Any) -> tuple[str, str]:
    """A recorded request (redacted, as stored) as the summary lists it, "METHOD URL body…"
    (a key's shape in the body shown as its hash), and its key: a digest of all three."""
    import hashlib

    from replay.redact.shapes import hash_shapes

    body = request.body
    key = hashlib.sha1(b"%s %s\n%s" % (request.method.encode(), request.url.encode(), body))
    shown = f"{request.method} {request.url}"
    if body:
        text = " ".join(body[:200].decode("utf-8", "replace").split())
        shown += f" {hash_shapes(text[:60])}" + ("…" if len(text) > 60 or len(body) > 200 else "")
    return shown, key.hexdigest()[:16]


class Run:
    """Watches every cassette session of the run (a `replay.session.imposed.Watcher`), puts each
    one's record on its test's report (so that xdist workers' reach the summary too), and
    sums them up at the end."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self._root = str(config.rootpath)
        self.item: pytest.Item | None = None
        self._log: SessionLog | None = None
        self._holding = False  # holding the transport patches for the next test
        # The records this process put on its tests' reports, by id of their data.
        self._made: dict[int, tuple[dict[str, object], SessionRecord]] = {}

    @property
    def log(self) -> SessionLog:
        if self._log is None:
            from replay.plugin.summary import SessionLog

            self._log = SessionLog()
        return self._log

    def resolve(self, path: Path) -> Path:
        """Where a cassette path named in a test points: the one rule of all three forms
        (`replay.session.naming.resolve_cassette_path`: a bare name beside the test's default
        cassettes, a relative path relative to the test file); outside a test, as given."""
        item = self.item
        if item is None or path.is_absolute():
            return path
        from replay.session.naming import resolve_cassette_path

        directory = self.config.getoption("cassette_dir") or self.config.getini(
            "replay_cassette_dir"
        )
        return resolve_cassette_path(path, item.path, directory or None, self.config.rootpath)

    # -- the Watcher -------------------------------------------------------------------------

    def entered(self, session: CassetteSession) -> None:
        if self.item is not None:
            self.item.stash.setdefault(_SESSIONS, []).append(session)

    def left(self, session: CassetteSession) -> None:
        from replay.plugin.summary import SessionRecord
        from replay.redact.shapes import hash_shapes

        used = session.last_used
        if used is None:
            return
        cassette, loaded = used
        counts = cassette.play_counts
        unplayed: list[Unplayed] = [
            (index, *_described(cassette.interactions[index].request))
            for index in range(loaded)
            if counts[index] == 0
        ]
        unplayed += [  # WebSocket conversations not wholly consumed (`Cassette.unconsumed`)
            (index, f"{cassette.interactions[index].request.url} ({left})")
            for index, left in cassette.unconsumed.items()
        ]
        record = SessionRecord(
            path=_display(session.path, self._root),
            # (a key in a parametrize id is shown as a hash of it, as its cassette is named)
            test=hash_shapes(self.item.nodeid) if self.item is not None else "",
            replayed=cassette.play_count,
            recorded=len(cassette.recorded),
            saved=session.saved,
            loaded=loaded,
            unplayed=tuple(unplayed),
            judged=not session.mismatches,
            fresh=tuple(_described(i.request)[1] for i in cassette.recorded),
        )
        if self.item is not None:
            data = record.to_dict()
            self.item.user_properties.append(("replay", data))
            self._made[id(data)] = (data, record)  # (its report comes back here: no re-parse)
        else:
            self.log.add(record)

    # -- hooks -------------------------------------------------------------------------------

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Any:
        self.item = item
        try:
            return (yield)
        finally:
            self.item = None
            if _SESSIONS in item.stash:  # reported: let what they loaded go
                del item.stash[_SESSIONS]

    # Between two tests that each use a cassette, the transport patches stay on (patched,
    # with no session, a transport sends as if unpatched): taking them off after one test
    # and putting them back on for the next cost some 35 µs a test.

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_teardown(self, item: pytest.Item, nextitem: pytest.Item | None) -> Any:
        if nextitem is not None and _SESSIONS in item.stash and _uses_cassette(nextitem):
            from replay.adapters import patch

            patch.hold()  # before this test's session leaves
            self._holding = True
        return (yield)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Any:
        try:
            return (yield)
        finally:  # the next test's session is in (or its setup failed): let go
            self._release()

    def _release(self) -> None:
        if self._holding:
            from replay.adapters import patch

            self._holding = False
            patch.release()

    def pytest_unconfigure(self) -> None:
        self._release()  # (a run interrupted between two tests)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[Any]) -> Any:
        report = yield
        if report.failed and call.excinfo is not None:
            from replay.plugin.failure import explain_failure, replay_first

            shown = replay_first(item, call, report)
            for session in item.stash.get(_SESSIONS, []):
                explain_failure(item, session, report, shown)
        return report

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "teardown":
            return
        for name, value in report.user_properties:
            if name == "replay" and isinstance(value, dict):
                # (`_made` holds `data` until here: no other dict can have its id meanwhile)
                made = self._made.pop(id(value), None)
                if made is not None and made[0] is value:
                    self.log.add(made[1])
                else:  # another process's (an xdist worker's)
                    from replay.plugin.summary import SessionRecord

                    self.log.add(SessionRecord.from_dict(value))

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if hasattr(self.config, "workerinput"):  # an xdist worker: the controller judges
            return
        strict = option(self.config, "strict_cassettes", "replay_strict_cassettes")
        if strict and self._log is not None and self._log.unplayed():
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self._log is None or not self._log.records:
            return
        terminalreporter.write_sep("-", "replay")
        for line in self._log.summary_lines():
            terminalreporter.write_line(line)
        if not option(self.config, "strict_cassettes", "replay_strict_cassettes"):
            return
        unplayed = self._log.unplayed()
        for path in sorted(unplayed):
            users = ", ".join(self._log.users(path)) or "no test"
            terminalreporter.write_line(
                f"replay: error: {path} has {len(unplayed[path])} interaction(s) no test "
                f"played (--strict-cassettes); used by {users}",
                red=True,
            )
