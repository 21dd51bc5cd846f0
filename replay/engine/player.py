"""The Player: which recorded response answers a request, and what it plays.

`Player.take` is the one way an answer is found, by every shell (the session, the replay
transports, `replay serve`, `replay play`): it redacts the request (as it was redacted
before it was stored), finds its interaction through the cassette's match index, applies
the faults of this attempt, and counts the play, all under one lock. It explains a miss
with a `CassetteMismatchError` naming the nearest recorded request.

An attempt that a `status` fault answers does not use the interaction up (the client's
retry gets the recording), yet the interaction counts as played when the session ends:
`settle()` says so.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import attrs

from replay.engine.advice import Advice
from replay.errors import CassetteMismatchError, hide_for_replay_errors, raise_bare
from replay.model import Request, Response
from replay.redact.redactor import Redactor
from replay.store.cassette import Cassette

if TYPE_CHECKING:
    from replay.faults import Fault, FaultLike, Injector

__all__ = ["Played", "Player"]


class Played:
    """What one request plays (a plain slotted class: one is made per replayed request).

    Args:
        index: the interaction's position in the cassette.
        response: the recorded response, with this attempt's faults applied.
        stall_steps: the chunk steps a stall fault delays (a read timeout may fire there).
    """

    __slots__ = ("index", "response", "stall_steps")

    def __init__(self, index: int, response: Response, stall_steps: tuple[int, ...] = ()) -> None:
        self.index = index
        self.response = response
        self.stall_steps = stall_steps

    def __repr__(self) -> str:
        return f"Played(index={self.index}, stall_steps={self.stall_steps})"


def _matches_hosts(cassette: Cassette) -> bool:
    return any(name in ("host", "uri") for name in cassette.match_on if isinstance(name, str))


class Player:
    """Answers requests from `cassette`: redact, match, apply faults, count; one lock.

    Args:
        cassette: the interactions and their play bookkeeping.
        redactor: applied to each request before matching, as it was before recording.
        faults: `replay.faults` values or specs applied to what is played.
        record_mode: named in mismatch messages.
        replayable: only the first N interactions answer (a session passes the number it
            loaded: what it records itself is not played back to it); None: all.
        advice: how mismatch errors word their advice (the library's keywords by default).
    """

    def __init__(
        self,
        cassette: Cassette,
        *,
        redactor: Redactor | None = None,
        faults: Iterable[FaultLike] = (),
        record_mode: str = "none",
        replayable: int | None = None,
        advice: Advice | None = None,
    ) -> None:
        self.cassette = cassette
        self.advice = advice or Advice()
        self.redactor = redactor or Redactor()
        self._injector: Injector | None = None
        if not (isinstance(faults, (tuple, list)) and not faults):
            # (Without faults, as most players are, `replay.faults` is never imported.)
            from replay.faults import Injector

            self._injector = Injector(faults)
        self.record_mode = record_mode
        self.replayable = replayable
        #: The mismatches raised, even those a client swallowed (an SDK may retry).
        self.mismatches: list[CassetteMismatchError] = []
        self.lock = threading.Lock()
        self._answered: set[int] = set()  # interactions a status fault answered
        # The recorded JSON bodies redaction leaves as they are, found on the first request:
        # a live request that repeats one is not looked through again.
        self._clean_bodies: frozenset[bytes] | None = None

    @property
    def injector(self) -> Injector:
        """The faults, and the attempts each interaction had."""
        if self._injector is None:
            from replay.faults import Injector

            self._injector = Injector(())
        return self._injector

    @property
    def faults(self) -> tuple[Fault, ...]:
        """The faults applied to what is played."""
        return self.injector.faults

    def take(self, request: Request, *, reason: str = "") -> Played:
        """What answers `request` (as sent, not yet redacted), counted as played.

        Args:
            reason: why the record mode does not record it, for the mismatch message.

        Raises:
            CassetteMismatchError: nothing answers it.
        """
        __tracebackhide__ = hide_for_replay_errors
        played = self.find(request)
        if played is None:
            raise_bare(self.mismatch(self.redactor.request(request), reason))  # not `request`
        return played

    def find(self, request: Request) -> Played | None:
        """What answers `request` (as sent, not yet redacted), counted as played; None when
        nothing does (the session then records it)."""
        clean = self._clean_bodies
        if clean is None:
            clean = self._clean_bodies = self.redactor.clean_bodies(self._recorded_bodies())
        wanted = self.redactor.request(request, clean=clean)
        with self.lock:
            index = self.cassette.find(wanted, among_first=self.replayable)
        if index is None:
            return self._resumed(wanted) or self._reconnected(wanted)
        injector = self._injector
        if injector is None or not injector.faults:  # the usual case, made short
            return Played(index, self._response(index, wanted))
        return self._play(index, wanted)

    def _response(self, index: int, wanted: Request) -> Response:
        """The recorded response of interaction `index`, its JSON-RPC answers under the ids
        of `wanted` when it matched a recording made under other ids."""
        interaction = self.cassette.interactions[index]
        recorded = interaction.request.body
        if wanted.body == recorded or b'"jsonrpc"' not in recorded:  # the usual case
            return interaction.response
        from replay.matching import jsonrpc

        renames = jsonrpc.same_call(wanted.body, recorded)
        return (
            interaction.response
            if renames is None
            else jsonrpc.answer(interaction.response, renames)
        )

    def _resumed(self, wanted: Request) -> Played | None:
        """A client resuming a stream a `resume` fault dropped: the rest of that recording
        (the latest played stream it resumes, which the fault targets)."""
        injector = self._injector
        if injector is None or not injector.resumes():
            return None
        from replay.faults import resuming
        from replay.matching import same_but_resume
        from replay.matching.resume import resume_point

        point = resume_point(wanted)
        if point is None:
            return None
        match_on = self.cassette.match_on

        def same(new: Request, recorded: Request) -> bool:
            return same_but_resume(match_on, new, recorded)

        with self.lock:
            interactions = self.cassette.interactions
            last = self.replayable if self.replayable is not None else len(interactions)
            played = [i for i in range(last) if self.cassette.play_counts[i]]
        for index in reversed(played):
            interaction = interactions[index]
            if not any(f.applies_to(index, interaction.request) for f in injector.resumes()):
                continue
            rest = resuming.answer(interaction, wanted, point, same)
            if rest is not None:
                return Played(index, rest)
        return None

    def _unresumed(self, wanted: Request) -> str:
        """Why a `resume` fault did not answer `wanted`, when it resumes a stream."""
        if self._injector is None or not self._injector.resumes():
            return ""
        from replay.matching.resume import resume_point

        point = resume_point(wanted)
        if point is None:
            return ""
        return (
            f"It resumes a stream {point}, but no stream played so far that the resume fault "
            "targets holds that event, for this request."
        )

    def _reconnected(self, wanted: Request) -> Played | None:
        """An MCP client's GET stream opened again once its recording has played: the
        recording's headers and end, without its messages (they were delivered once)."""
        if wanted.method != "GET" or not any(
            name.lower() == "mcp-session-id" for name, _ in wanted.headers
        ):
            return None
        with self.lock:
            interactions = self.cassette.interactions
            last = self.replayable if self.replayable is not None else len(interactions)
            played = [
                index
                for index in range(last)
                if self.cassette.play_counts[index]
                and interactions[index].request.method == "GET"
                and interactions[index].request.url == wanted.url
            ]
        if not played:
            return None
        response = interactions[played[-1]].response
        return Played(played[-1], attrs.evolve(response, chunks=[]))

    def _recorded_bodies(self) -> list[bytes]:
        interactions = self.cassette.interactions
        if self.replayable is not None:
            interactions = interactions[: self.replayable]
        return [interaction.request.body for interaction in interactions]

    def play(self, index: int) -> Played:
        """What interaction `index` plays when asked for by its own recorded request
        (`replay play`): the faults of this attempt applied."""
        return self._play(index, self.cassette.interactions[index].request, counted=False)

    def mismatch(self, wanted: Request, reason: str = "") -> CassetteMismatchError:
        """The error for `wanted` (redacted), which nothing answers; kept in `mismatches`."""
        with self.lock:
            nearest, differences = self.cassette.explain(wanted)
            hosts = {urlsplit(i.request.url).hostname for i in self.cassette.interactions}
        # Only where hosts are matched on ("replay serve" answers for any host).
        host = urlsplit(wanted.url).hostname if _matches_hosts(self.cassette) else None
        reason = "\n".join(filter(None, [reason, self._unresumed(wanted)]))
        error = CassetteMismatchError(
            method=wanted.method,
            url=wanted.url,
            cassette_path=self.cassette.path,
            record_mode=self.record_mode,
            nearest=nearest,
            differences=differences,
            reason=reason,
            unseen_host=host if host is not None and host not in hosts else None,
            advice=self.advice,
        )
        self.mismatches.append(error)
        return error

    def settle(self) -> None:
        """Count every interaction a status fault answered as played (at a session's end)."""
        with self.lock:
            counts = self.cassette.play_counts
            for index in self._answered:
                counts[index] = max(1, counts[index])

    def _play(self, index: int, wanted: Request, *, counted: bool = True) -> Played:
        recorded = self._response(index, wanted)
        injector = self._injector
        if injector is None or not injector.faults:
            return Played(index, recorded)
        outcome = injector.outcome(index, wanted, recorded)
        if outcome.answered_by is not None and counted:
            with self.lock:
                self.cassette.release(index)
                self._answered.add(index)
        return Played(index, outcome.response, outcome.stall_steps())
