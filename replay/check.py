"""`replay check`: validate every stream of some cassettes against its dialect's rules.

A stream is an interaction whose response is `text/event-stream`, or whose body a dialect
recognises anyway (a server that sent the wrong content type). Each rule a stream breaks
(see `replay.dialects.validate`) becomes a `Finding` that knows its cassette and
interaction, printed on one stable line:

    PATH #INTERACTION event INDEX RULE: message

with `event -` for a rule of the whole stream (`stream.truncated`). A body that cannot be
decoded at all (damaged gzip, an unknown Content-Encoding) is one finding, `stream.encoding`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

import attrs

from replay.cassette import Cassette
from replay.dialects import Violation, detect, validate
from replay.model import Response

__all__ = ["UNDECODABLE", "CheckResult", "Finding", "check_cassette", "check_files", "is_stream"]

UNDECODABLE = "stream.encoding"
"""The rule of a finding whose body cannot be decoded, so no other rule could be checked."""


def is_stream(response: Response) -> bool:
    """Whether `response` is an event stream: by its content type, or by what it says.

    A body that cannot be decoded counts as a stream when its content type says so.
    """
    content_type = response.header("content-type") or ""
    if content_type.split(";")[0].strip().lower() == "text/event-stream":
        return True
    try:
        return bool(response.chunks) and detect(response) is not None
    except ValueError:  # an undecodable body that does not claim to be a stream
        return False


@attrs.frozen
class Finding:
    """One rule broken by one interaction of one cassette.

    Args:
        cassette: the cassette's path, as it was given.
        interaction: the interaction's index in the cassette (0-based).
        violation: the rule, what was wrong, and at which event.
    """

    cassette: str
    interaction: int
    violation: Violation

    def __str__(self) -> str:
        index = "-" if self.violation.index is None else str(self.violation.index)
        message = " ".join(self.violation.message.split("\n"))  # one finding, one line
        rule = self.violation.rule
        return f"{self.cassette} #{self.interaction} event {index} {rule}: {message}"


def _findings(findings: Iterable[Finding]) -> tuple[Finding, ...]:
    return tuple(findings)


@attrs.frozen
class CheckResult:
    """What checking some cassettes found.

    Args:
        cassettes: how many cassettes were checked.
        streams: how many of their interactions were streams (the others are skipped).
        findings: every broken rule, by cassette, interaction and event.
    """

    cassettes: int = 0
    streams: int = 0
    findings: tuple[Finding, ...] = attrs.field(default=(), converter=_findings)

    @property
    def ok(self) -> bool:
        """True when no stream broke any rule."""
        return not self.findings

    def __add__(self, other: CheckResult) -> CheckResult:
        return CheckResult(
            self.cassettes + other.cassettes,
            self.streams + other.streams,
            self.findings + other.findings,
        )

    def summary(self) -> str:
        """One line: what was checked and how much was wrong."""
        checked = (
            f"checked {_count(self.streams, 'stream')} in {_count(self.cassettes, 'cassette')}"
        )
        if self.ok:
            return f"{checked}: no violations"
        broken = len({(f.cassette, f.interaction) for f in self.findings})
        violations = _count(len(self.findings), "violation")
        return f"{checked}: {violations} in {_count(broken, 'stream')}"

    def report(self) -> str:
        """One line per finding, then the summary; ends with a newline."""
        return "".join(f"{line}\n" for line in [*map(str, self.findings), self.summary()])


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
    streams = 0
    findings: list[Finding] = []
    for index, interaction in enumerate(cassette.interactions):
        if not is_stream(interaction.response):
            continue
        streams += 1
        try:
            violations = validate(interaction)
        except ValueError as error:  # the body does not decode: nothing else can be checked
            violations = [Violation(UNDECODABLE, f"the body cannot be decoded: {error}")]
        findings.extend(Finding(name, index, violation) for violation in violations)
    return CheckResult(1, streams, findings)


def check_files(paths: Iterable[str | Path]) -> CheckResult:
    """Load every cassette first, then validate every stream in each.

    Findings name each cassette by its path as given, in the order given.

    Raises:
        FileNotFoundError: a path does not exist.
        CassetteFormatError: a file is not a cassette this version reads.
    """
    names = [str(path) for path in paths]
    cassettes: Sequence[Cassette] = [Cassette.load(name) for name in names]
    return sum(
        (check_cassette(cassette, name) for cassette, name in zip(cassettes, names, strict=True)),
        CheckResult(),
    )
