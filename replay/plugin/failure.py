"""What the plugin adds to a failed test's report: replay's own error first when a client
library wrapped it, the faults injected, the unmatched requests and the command that records
them.

Imported by `replay.plugin.run` once a test that used a cassette has failed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from replay.errors import CassetteMismatchError, ReplayError

if TYPE_CHECKING:
    from replay.session.lifecycle import CassetteSession

__all__ = ["explain_failure", "replay_first", "selector"]


def _wrapped(error: BaseException) -> ReplayError | None:
    """The replay error `error` was raised from (its cause or context), if it is not one."""
    seen: set[int] = set()
    found: BaseException | None = error
    while found is not None and id(found) not in seen:
        if isinstance(found, ReplayError):
            return None if found is error else found
        seen.add(id(found))
        found = found.__cause__ or found.__context__
    return None


def replay_first(item: pytest.Item, call: pytest.CallInfo[Any], report: Any) -> BaseException:
    """Show replay's error as the failure, and little else: the test's frames, the frame
    replay raised it in and its message once; the frames of the client library it crossed
    are left out (its message says all replay knows). Where a client library wrapped it in
    its own (an SDK's `APIConnectionError: Connection error.`), replay's error is shown in
    its place, and what the test saw under it.

    Returns the error the report shows (the exception that reached the test otherwise)."""
    excinfo = call.excinfo
    if excinfo is None:
        return BaseException()
    outer = excinfo.value
    error = outer if isinstance(outer, ReplayError) else _wrapped(outer)
    if error is None or item.config.getoption("tbstyle", "auto") in ("no", "line", "native"):
        return outer
    from _pytest._code.code import ExceptionInfo, Traceback

    test_file = str(item.path)
    entries = [entry for entry in excinfo.traceback if str(entry.path) == test_file]
    own = ExceptionInfo.from_exception(error).traceback if error is not outer else []
    shown = ExceptionInfo.from_exc_info((type(error), error, excinfo.tb))
    last = own[-1:] if own else [entry for entry in excinfo.traceback[-1:] if entry not in entries]
    shown.traceback = Traceback([*entries, *last])
    longrepr = shown.getrepr(
        style="long" if item.config.getoption("tbstyle", "auto") == "long" else "short",
        showlocals=bool(item.config.getoption("showlocals", False)),
        tbfilter=False,
        chain=False,
    )
    if error is not outer:
        saw = f"{type(outer).__module__}.{type(outer).__qualname__}: {outer}"
        longrepr.addsection(
            "replay: the test saw", f"{saw}\n(raised by the client library from replay's error)"
        )
    report.longrepr = longrepr
    return error


def explain_failure(item: pytest.Item, session: CassetteSession, report: Any, shown: Any) -> None:
    """Add what replay knows of a failed test to its report: faults, unmatched requests (their
    message left out when the report already shows it: `shown`, the error it shows)."""
    if session.options.faults:
        report.sections.append(_fault_report(session))
    policy = session.speed_note()
    if policy is not None:
        report.sections.append(("replay: speed policy", policy))
    if not session.mismatches:
        return
    lines = [str(error) for error in session.mismatches if error is not shown]
    if any(isinstance(e, CassetteMismatchError) and e.body_only for e in session.mismatches):
        lines.append(
            f"To record it again: pytest --record-mode=rewrite '{selector(item.nodeid)}' "
            "(deletes the cassette: its stale recording goes with it, where new_episodes "
            "would keep it, unplayed)"
        )
    else:
        lines.append(f"To record it: pytest --record-mode=new_episodes '{selector(item.nodeid)}'")
    report.sections.append(("replay: unmatched requests", "\n\n".join(lines)))


def selector(nodeid: str) -> str:
    """What selects the test `nodeid` on pytest's command line: the id itself; for a test
    whose parametrize ids hold a key, its function with all its parameters (replay shows no
    key; those already recorded replay, `new_episodes` records only what is missing)."""
    from replay.redact.shapes import holds_key

    if not holds_key(nodeid):
        return nodeid
    where, _, name = nodeid.rpartition("::")
    return f"{where}::{name.partition('[')[0]}"


def _fault_report(session: CassetteSession) -> tuple[str, str]:
    """The faults section: the faults injected, or why none were (nothing was replayed)."""
    injector = session.injector
    lines = injector.report()
    used = session.last_used
    recorded = len(used[0].recorded) if used is not None else 0
    if recorded:
        lines.append(
            f"{recorded} interaction(s) recorded by this test, live and untouched: faults break "
            "what is replayed, so the next run replays them with the faults"
        )
    title = "faults injected" if injector.injected() else "faults not injected"
    return f"replay: {title}", "\n".join(lines)
