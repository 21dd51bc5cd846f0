"""Text made safe to print on a terminal: what a cassette holds is shown, never obeyed."""

from __future__ import annotations

import re

__all__ = ["printable"]

# C0 controls but the line break and tab, DEL, C1 controls, and the bidirectional overrides
# (which reorder what a terminal shows): a cassette from a pull request is shown, not obeyed.
_UNPRINTABLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """`text` with every character that would steer a terminal (ESC, BEL, CR, bidi
    overrides…) shown escaped (`\\x1b`, `\\u202e`); line breaks and tabs are kept."""
    return _UNPRINTABLE.sub(_escaped, text)


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
