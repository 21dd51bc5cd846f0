"""What never reaches a cassette: credentials in headers and in the query string.

Redaction replaces a value by a placeholder and keeps the name, so the cassette still shows
that a key was sent, and matching (which never looks at these values by default) still works.
It runs on the request before it is matched or stored, and on the response headers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import attrs

from replay.model import Interaction, Request

__all__ = ["DEFAULT_HEADERS", "DEFAULT_QUERY_PARAMETERS", "PLACEHOLDER", "Redactor"]

PLACEHOLDER = "REDACTED"

DEFAULT_HEADERS: frozenset[str] = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "x-api-key",
        "api-key",
        "cookie",
        "set-cookie",
        "x-goog-api-key",
        "openai-organization",
        "openai-project",
    }
)
DEFAULT_QUERY_PARAMETERS: frozenset[str] = frozenset(
    {"key", "api_key", "apikey", "api-key", "token", "access_token", "auth", "secret", "password"}
)


def _lower_set(names: Iterable[str]) -> frozenset[str]:
    return frozenset(name.lower() for name in names)


@attrs.frozen
class Redactor:
    """Replaces secrets by a placeholder in requests and responses.

    Args:
        headers: extra header names to redact (case-insensitive), added to the defaults.
        query_parameters: extra query parameter names to redact, added to the defaults.
        hook: a callable applied last to every interaction (e.g. to scrub a body field).
    """

    headers: frozenset[str] = attrs.field(default=frozenset(), converter=_lower_set)
    query_parameters: frozenset[str] = attrs.field(default=frozenset(), converter=_lower_set)
    hook: Callable[[Interaction], Interaction] | None = None

    def _header_names(self) -> frozenset[str]:
        return DEFAULT_HEADERS | self.headers

    def _pairs(self, pairs: tuple[tuple[str, str], ...]) -> list[tuple[str, str]]:
        secret = self._header_names()
        return [(k, PLACEHOLDER if k.lower() in secret else v) for k, v in pairs]

    def url(self, url: str) -> str:
        """`url` with secret query parameters replaced."""
        parts = urlsplit(url)
        if not parts.query:
            return url
        secret = DEFAULT_QUERY_PARAMETERS | self.query_parameters
        query = parse_qsl(parts.query, keep_blank_values=True)
        if not any(name.lower() in secret for name, _ in query):
            return url
        cleaned = [(k, PLACEHOLDER if k.lower() in secret else v) for k, v in query]
        return urlunsplit(parts._replace(query=urlencode(cleaned)))

    def request(self, request: Request) -> Request:
        """A copy of `request` with secret headers and query parameters replaced."""
        return attrs.evolve(
            request, url=self.url(request.url), headers=self._pairs(request.headers)
        )

    def interaction(self, interaction: Interaction) -> Interaction:
        """A copy of `interaction` with secrets replaced in its request and response headers."""
        response = attrs.evolve(
            interaction.response, headers=self._pairs(interaction.response.headers)
        )
        cleaned = Interaction(self.request(interaction.request), response)
        return self.hook(cleaned) if self.hook is not None else cleaned
