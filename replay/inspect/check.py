"""`replay check`: validate every stream of some cassettes against its dialect's rules.

A stream is an interaction whose response is SSE, NDJSON or a JSON array, decided as `replay
show` decides it (`replay.framing`: the content type, else how the body starts). SSE and
JSON-array streams are checked against their dialect (none for a stream of no known dialect:
then only truncation and UTF-8); NDJSON streams (Ollama's) against the framing's own
rules. A WebSocket conversation is a stream too, checked against the Realtime or the
Responses WebSocket mode's rules (`replay.dialects.realtime`; `event N` is then the
frame's position). The rules a stream breaks (see `replay.dialects.validate`) become one
`Finding` per rule, however often it is broken: its severity, its first occurrence and how
many there are, on one stable line:

    PATH #INTERACTION event INDEX RULE: SEVERITY: message (N times)

with `event -` for a rule of the whole stream (`stream.truncated`); `--verbose` lists every
occurrence below. A body that cannot be decoded at all (damaged gzip, an unknown
Content-Encoding) is one finding, `stream.encoding`. A file that cannot be read is one line,
`PATH: cannot read: why`, and the others are checked all the same.

A stream resumed after a drop (`Last-Event-ID`, `starting_after`) is checked as its client
assembles it, with the dropped stream's events before its own (event indices count them),
and its numbers must continue the dropped stream's (`replay.inspect.check_resume`).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import attrs

from replay import framing
from replay.dialects import Severity, Violation, closed_after_end, validate
from replay.dialects.realtime import check_frames
from replay.engine.ends import CLOSED_AFTER_END_TEXT
from replay.errors import CassetteFormatError, ReplayError
from replay.framing.decoding import decoded_chunks
from replay.inspect import check_resume
from replay.model import Interaction, Response
from replay.redact import deep_json
from replay.store.cassette import Cassette

__all__ = [
    "UNDECODABLE",
    "CheckResult",
    "Finding",
    "Unreadable",
    "check_cassette",
    "check_files",
    "findings_of",
    "interaction_findings",
    "is_stream",
]

UNDECODABLE = "stream.encoding"
"""The rule of a finding whose body cannot be decoded, so no other rule could be checked."""


def is_stream(response: Response) -> bool:
    """Whether `response` is a stream (SSE, NDJSON or a JSON array), as `replay show` decides
    it too: by its content type, else by how its body starts (see `replay.framing.detect`)."""
    return framing.is_stream(response)


def _ndjson_violations(response: Response) -> list[Violation]:
    """The rules an NDJSON stream breaks: each line a JSON object; a whole last line; an
    end without an error. (No dialect rules: those read server-sent events.)"""
    violations = []
    for index, event in enumerate(framing.events(response, "ndjson")):
        try:
            parsed = deep_json.loads(event.data)
        except ValueError:
            parsed = None
        if not isinstance(parsed, dict):
            violations.append(Violation("ndjson.json", "the line is not a JSON object", index))
    body = b"".join(data for _, data in decoded_chunks(response))
    end = response.end
    if end.error is not None or (end.truncated and not body.endswith(b"\n")):
        why = f"{end.error}: {end.message}" if end.error else f"the {end.stopped_by} stopping it"
        violations.append(Violation("stream.truncated", f"the stream ended with {why}", None))
    elif body and not body.endswith(b"\n"):
        message = "the stream ends inside a line (no newline after its last object)"
        violations.append(Violation("stream.truncated", message, None))
    return violations


def _violations(violations: Iterable[Violation]) -> tuple[Violation, ...]:
    return tuple(violations)


@attrs.frozen
class Finding:
    """One rule broken by one stream: every occurrence, the first one shown.

    Args:
        cassette: the cassette's path, as it was given.
        interaction: the interaction's index in the cassette (0-based).
        violations: every occurrence of the rule in the stream, in event order (never empty).
    """

    cassette: str
    interaction: int
    violations: tuple[Violation, ...] = attrs.field(
        converter=_violations, validator=attrs.validators.min_len(1)
    )

    @property
    def first(self) -> Violation:
        """The occurrence the finding shows: the first in the stream."""
        return self.violations[0]

    @property
    def rule(self) -> str:
        """The rule broken."""
        return self.first.rule

    @property
    def severity(self) -> Severity:
        """How much it matters: `error`, `warning` or `note`."""
        return self.first.severity

    @property
    def count(self) -> int:
        """How many times the stream breaks the rule."""
        return len(self.violations)

    def __str__(self) -> str:
        times = f" ({self.count} times)" if self.count > 1 else ""
        head = f"{self.cassette} #{self.interaction} event {_at(self.first)} {self.rule}"
        return f"{head}: {self.severity}: {_one_line(self.first.message)}{times}"

    def occurrences(self) -> list[str]:
        """One indented line per occurrence: what `--verbose` adds below the finding."""
        return [f"    event {_at(v)}: {_one_line(v.message)}" for v in self.violations]


def _at(violation: Violation) -> str:
    return "-" if violation.index is None else str(violation.index)


def _one_line(message: str) -> str:
    return " ".join(message.split("\n"))


@attrs.frozen
class Unreadable:
    """A cassette that could not be read, so none of its streams was checked."""

    cassette: str
    problem: str

    def __str__(self) -> str:
        return f"{self.cassette}: cannot read: {_one_line(self.problem)}"


def findings_of(cassette: str, interaction: int, violations: Iterable[Violation]) -> list[Finding]:
    """One finding per rule `violations` break, in the order of their first occurrence."""
    by_rule: dict[str, list[Violation]] = {}
    for violation in violations:
        by_rule.setdefault(violation.rule, []).append(violation)
    return [Finding(cassette, interaction, found) for found in by_rule.values()]


def _findings(findings: Iterable[Finding]) -> tuple[Finding, ...]:
    return tuple(findings)


def _unreadable(unreadable: Iterable[Unreadable]) -> tuple[Unreadable, ...]:
    return tuple(unreadable)


@attrs.frozen
class CheckResult:
    """What checking some cassettes found.

    Args:
        cassettes: how many cassettes were checked (those unreadable included).
        streams: how many of their interactions were streams (the others are skipped).
        findings: each rule broken by each stream.
        unreadable: the cassettes that could not be read.
        closed_after_end: how many streams the client closed after their dialect's terminal
            event: complete, and said so (`replay.engine.ends.CLOSED_AFTER_END_TEXT`).
    """

    cassettes: int = 0
    streams: int = 0
    findings: tuple[Finding, ...] = attrs.field(default=(), converter=_findings)
    unreadable: tuple[Unreadable, ...] = attrs.field(default=(), converter=_unreadable)
    closed_after_end: int = 0

    @property
    def ok(self) -> bool:
        """True when every cassette was read and no stream broke a rule worse than a note."""
        return not self.unreadable and all(f.severity == "note" for f in self.findings)

    def __add__(self, other: CheckResult) -> CheckResult:
        return CheckResult(
            self.cassettes + other.cassettes,
            self.streams + other.streams,
            self.findings + other.findings,
            self.unreadable + other.unreadable,
            self.closed_after_end + other.closed_after_end,
        )

    def summary(self) -> str:
        """One line: what was checked, how much was wrong, and how badly."""
        checked = (
            f"checked {_count(self.streams, 'stream')} in {_count(self.cassettes, 'cassette')}"
        )
        if self.findings:
            broken = len({(f.cassette, f.interaction) for f in self.findings})
            severities = ", ".join(
                _count(number, severity)
                for severity in ("error", "warning", "note")
                if (number := sum(f.severity == severity for f in self.findings))
            )
            found = f"{_count(len(self.findings), 'finding')} in {_count(broken, 'stream')}"
            verdict = f"{found} ({severities})"
        else:
            verdict = "no violations"
        if self.closed_after_end:
            verdict += f" ({self.closed_after_end} {CLOSED_AFTER_END_TEXT})"
        if self.unreadable and len(self.unreadable) == self.cassettes:
            return f"checked nothing: {_count(self.cassettes, 'cassette')}, none could be read"
        if self.unreadable:
            verdict += f"; {_count(len(self.unreadable), 'cassette')} could not be read"
        return f"{checked}: {verdict}"

    def report(self, *, verbose: bool = False) -> str:
        """Each unreadable cassette and each finding on one line, then the summary.

        With `verbose`, each finding that occurs more than once is followed by every
        occurrence. Ends with a newline.
        """
        lines = [str(unreadable) for unreadable in self.unreadable]
        for finding in self.findings:
            lines.append(str(finding))
            if verbose and finding.count > 1:
                lines += finding.occurrences()
        return "".join(f"{line}\n" for line in [*lines, self.summary()])


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


def check_cassette(cassette: Cassette, name: str | None = None) -> CheckResult:
    """Validate every stream in `cassette`.

    Args:
        cassette: the cassette.
        name: how findings name it (default: its path, else `<cassette>`).
    """
    if name is None:
        name = str(cassette.path) if cassette.path is not None else "<cassette>"
    streams = closed = 0
    findings: list[Finding] = []
    interactions = cassette.interactions
    linked = {link.resuming: link for link in check_resume.links(interactions)}
    dropped = {link.dropped for link in linked.values()}
    for index, interaction in enumerate(interactions):
        if interaction.frames is None and not is_stream(interaction.response):
            continue
        streams += 1
        link = linked.get(index)
        if link is None:
            found = interaction_findings(interaction, name, index)
        else:  # checked as its client assembles it, and its numbers as they continue
            before = interactions[link.dropped]
            whole = check_resume.assembled(before, interaction, link.point)
            found = interaction_findings(whole, name, index)
            found += findings_of(
                name, index, check_resume.violations(before, interaction, link.point)
            )
        if index in dropped:  # the drop is what the linked scenario tests
            found = [_resumed(finding) for finding in found]
        findings += found
        closed += closed_after_end(interaction)
    return CheckResult(1, streams, findings, closed_after_end=closed)


def _resumed(finding: Finding) -> Finding:
    """`finding` of a stream a later request resumes: its truncation is a note."""
    if finding.rule != "stream.truncated":
        return finding
    notes = [
        attrs.evolve(v, message=f"{v.message} (a later request resumes it)", severity="note")
        for v in finding.violations
    ]
    return attrs.evolve(finding, violations=notes)


def interaction_findings(
    interaction: Interaction, name: str = "<cassette>", index: int = 0
) -> list[Finding]:
    """What `check_cassette` finds in one interaction: one finding per rule its stream
    breaks ([] for a response that is not a stream).

    Args:
        interaction: the interaction.
        name: how findings name its cassette.
        index: its index in that cassette.
    """
    if interaction.frames is not None:  # a WebSocket conversation: its dialect's rules
        return findings_of(name, index, check_frames(interaction.frames))
    response = interaction.response
    kind = framing.detect(response)
    if kind is None:
        return []
    try:
        violations = _ndjson_violations(response) if kind == "ndjson" else validate(interaction)
    except (ValueError, ReplayError) as error:  # the body does not decode: nothing else
        violations = [Violation(UNDECODABLE, f"the body cannot be decoded: {error}")]
    return findings_of(name, index, violations)


def check_files(paths: Iterable[str | Path]) -> CheckResult:
    """Validate every stream in each cassette, one cassette at a time.

    Findings name each cassette by its path as given, in the order given. A cassette that
    cannot be read (missing, not a cassette, of a newer format) is reported in the result
    and the others are checked all the same.
    """
    result = CheckResult()
    for path in paths:
        name = str(path)
        try:
            cassette = Cassette.load(name)
        except OSError as error:
            result += CheckResult(1, unreadable=[Unreadable(name, error.strerror or str(error))])
            continue
        except CassetteFormatError as error:
            result += CheckResult(1, unreadable=[Unreadable(name, error.problem)])
            continue
        result += check_cassette(cassette, name)
    return result
