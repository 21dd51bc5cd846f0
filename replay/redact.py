"""What never reaches a cassette: credentials in headers and in the query string.

Redaction replaces a value by a placeholder and keeps the name, so the cassette still shows
that a key was sent, and matching (which never looks at these values by default) still works.
It runs on the request before it is matched or stored, and on the response headers.

The user's `hook` (`before_record`) runs after the built-in redaction. It is also applied to
each live request before matching (with an empty response), as vcrpy applies its
`before_record_request`: a request the hook rewrote on disk must still match the live
request it came from.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from urllib.parse import unquote_plus, urlsplit, urlunsplit

import attrs

from replay.model import Interaction, Request, Response

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

#: What the hook sees as the response when it is applied to a live request for matching.
_NO_RESPONSE = Response(status=200)


def _lower_set(names: Iterable[str]) -> frozenset[str]:
    if isinstance(names, str):  # one name, not its letters
        names = (names,)
    return frozenset(name.lower() for name in names)


@attrs.frozen
class Redactor:
    """Replaces secrets by a placeholder in requests and responses.

    Args:
        headers: extra header names to redact (case-insensitive), added to the defaults.
        query_parameters: extra query parameter names to redact (case-insensitive), added to
            the defaults.
        hook: a callable applied last to every interaction (e.g. to scrub a body field). It is
            also applied, with an empty response, to each live request before matching.
    """

    headers: frozenset[str] = attrs.field(default=frozenset(), converter=_lower_set)
    query_parameters: frozenset[str] = attrs.field(default=frozenset(), converter=_lower_set)
    hook: Callable[[Interaction], Interaction | None] | None = None

    def _pairs(self, pairs: tuple[tuple[str, str], ...]) -> list[tuple[str, str]]:
        secret = DEFAULT_HEADERS | self.headers
        return [(k, PLACEHOLDER if k.lower() in secret else v) for k, v in pairs]

    def url(self, url: str) -> str:
        """`url` with the values of secret query parameters replaced.

        Only those values change: the other parameters keep their order and their exact
        encoding, so the stored URL is the one that was sent, minus the secrets.
        """
        parts = urlsplit(url)
        if parts.password is not None:  # user:password@host: the password is a credential
            host = parts.netloc.rpartition("@")[2]
            user = parts.netloc.rpartition("@")[0].partition(":")[0]
            parts = parts._replace(netloc=f"{user}:{PLACEHOLDER}@{host}")
            url = urlunsplit(parts)
        if not parts.query:
            return url
        secret = DEFAULT_QUERY_PARAMETERS | self.query_parameters
        fields = parts.query.split("&")
        cleaned = []
        for field in fields:
            name, equals, _ = field.partition("=")
            if unquote_plus(name).lower() in secret:
                field = f"{name}={PLACEHOLDER}" if equals else field
            cleaned.append(field)
        if cleaned == fields:
            return url
        return urlunsplit(parts._replace(query="&".join(cleaned)))

    def _request(self, request: Request) -> Request:
        url = self.url(request.url)
        secret = DEFAULT_HEADERS | self.headers
        if url is request.url and not any(k.lower() in secret for k, _ in request.headers):
            return request  # nothing to hide: no copy (this runs once per replayed request)
        return attrs.evolve(request, url=url, headers=self._pairs(request.headers))

    def request(self, request: Request) -> Request:
        """`request` as it would be stored: secrets replaced, then the hook applied.

        This is what a live request is matched as, so it meets its recorded self.
        """
        cleaned = self._request(request)
        if self.hook is None:
            return cleaned
        hooked = self.hook(Interaction(cleaned, _NO_RESPONSE))
        return cleaned if hooked is None else hooked.request

    def interaction(self, interaction: Interaction) -> Interaction | None:
        """A copy of `interaction` with secrets replaced in its request and response headers,
        then passed through the hook; None when the hook returns None (vcrpy's "do not
        record this one")."""
        response = attrs.evolve(
            interaction.response, headers=self._pairs(interaction.response.headers)
        )
        cleaned = Interaction(self._request(interaction.request), response)
        return self.hook(cleaned) if self.hook is not None else cleaned
