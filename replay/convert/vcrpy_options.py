"""vcrpy's cassette options and objects, as replay's: what the pytest-recording surface
(`replay.plugin.vcr_compat`) serves a suite written for pytest-recording with.

- `session_kwargs`: a `vcr_config` merged with the `vcr` marks, as `use_cassette`'s keywords
  (`filter_headers` → `redact_headers`, `before_record_request` / `_response` → one
  `before_record`, matcher names registered by `pytest_recording_configure` → the callables),
  and the names replay does not honour.
- `VcrRegistry`: the `vcr` object a `pytest_recording_configure` hook is handed
  (`register_matcher`, `register_serializer`, `register_persister`).
- `VcrCassette`: what a test reads of the `vcr` fixture (`requests`, `responses`,
  `play_count`, `play_counts`, `all_played`, `record_mode`), over replay's `Cassette`.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from replay.convert.vcrpy_yaml import (
    from_vcr_request,
    from_vcr_response,
    vcr_request,
    vcr_response,
)
from replay.model import Interaction, Response

if TYPE_CHECKING:
    from replay.store.cassette import Cassette

__all__ = [
    "Translated",
    "VcrCassette",
    "VcrRegistry",
    "before_record_hook",
    "matchers",
    "session_kwargs",
]

#: vcrpy options with no effect on a replay cassette, accepted without a word: the file is
#: msgpack whatever the serializer was, bodies are kept as the network sent them, and a
#: session saves what it recorded whether the test passed or not.
_NO_EFFECT = frozenset({"serializer", "decode_compressed_response", "record_on_exception"})
#: vcrpy option → `use_cassette` keyword, for those that carry over as they are.
_SAME = {
    "record_mode": "record_mode",
    "allow_playback_repeats": "allow_playback_repeats",
    "ignore_hosts": "ignore_hosts",
    "ignore_localhost": "ignore_localhost",
}

Hook = Callable[..., Any]


@attrs.frozen
class Translated:
    """A vcrpy configuration as `use_cassette`'s keywords.

    Attributes:
        kwargs: the keywords (no path, no `match_on`: see `matchers`).
        match_on: the configuration's `match_on`, None when it names none.
        unhonoured: the vcrpy options replay does not honour, by name.
        dropped_query: the query parameters vcrpy removed from what it recorded
            (`filter_query_parameters`).
    """

    kwargs: dict[str, Any]
    match_on: tuple[Any, ...] | None
    unhonoured: tuple[str, ...]
    dropped_query: tuple[str, ...] = ()


def _names(filters: Sequence[Any]) -> list[str]:
    """The header or parameter names of a vcrpy filter list (`"x"`, or `("x", replacement)`)."""
    return [str(entry[0] if isinstance(entry, (tuple, list)) else entry) for entry in filters]


def matchers(
    names: Sequence[Any], registered: Mapping[str, Hook], dropped_query: Sequence[str] = ()
) -> list[Any]:
    """`match_on` for replay: the names a `pytest_recording_configure` hook registered made
    their callables, and `query` / `uri` blind to the parameters vcrpy's
    `filter_query_parameters` removed from recordings (replay redacts them instead)."""
    made: list[Any] = []
    for name in names:
        if not isinstance(name, str):
            made.append(name)
        elif name in registered:
            made.append(registered[name])
        elif dropped_query and name in ("query", "uri"):
            made.append(_without_query(name, frozenset(dropped_query)))
        else:
            made.append(name)
    return made


def _without_query(name: str, dropped: frozenset[str]) -> Hook:
    """vcrpy's `query` (or `uri`) matcher, blind to the parameters named `dropped`."""

    def seen(request: Any) -> tuple[Any, ...]:
        query = [pair for pair in request.query if pair[0] not in dropped]
        if name == "query":
            return (query,)
        return (request.scheme, request.host, request.port, request.path, query)

    def matcher(new: Any, recorded: Any) -> None:
        assert seen(new) == seen(recorded), f"{seen(new)} != {seen(recorded)}"

    matcher.__name__ = name
    return matcher


def session_kwargs(options: Mapping[str, Any]) -> Translated:
    """`options` (a `vcr_config` merged with the marks' keywords) as `use_cassette`'s keywords.

    Args:
        options: vcrpy's `use_cassette` keywords.
    """
    kwargs: dict[str, Any] = {}
    unhonoured = []
    for name, value in options.items():
        if name in _SAME:
            kwargs[_SAME[name]] = value
        elif name == "filter_headers":
            kwargs["redact_headers"] = _names(value)
        elif name == "filter_query_parameters":
            kwargs["redact_query_parameters"] = _names(value)
        elif name == "match_on":
            pass
        elif name not in _NO_EFFECT and name not in _HOOKS:
            unhonoured.append(name)
    on_request = options.get("before_record_request", options.get("before_record"))
    on_response = options.get("before_record_response")
    if on_request is not None or on_response is not None:
        kwargs["before_record"] = before_record_hook(_chained(on_request), _chained(on_response))
    match_on = options.get("match_on")
    return Translated(
        kwargs,
        None if match_on is None else tuple(match_on),
        tuple(unhonoured),
        tuple(kwargs.get("redact_query_parameters", ())),
    )


_HOOKS = frozenset({"before_record_request", "before_record", "before_record_response"})


def _chained(hooks: Hook | Sequence[Hook] | None) -> Hook | None:
    """vcrpy's hook option (a callable, or a list of them applied in turn) as one callable."""
    if hooks is None or callable(hooks):
        return hooks
    chain = list(hooks)

    def each(value: Any) -> Any:
        for hook in chain:
            if value is None:
                return None
            value = hook(value)
        return value

    return each


def before_record_hook(
    on_request: Hook | None, on_response: Hook | None
) -> Callable[[Interaction], Interaction | None]:
    """vcrpy's `before_record_request` / `before_record_response` as one `before_record`.

    Each hook gets what vcrpy would hand it (a `vcr.request.Request`, a response dict) and
    may change it or return None (the interaction is then not stored). A response whose body
    the hook left alone keeps its chunks and their times; a new body is one chunk.
    """

    def before_record(interaction: Interaction) -> Interaction | None:
        request = interaction.request
        if on_request is not None:
            changed = on_request(vcr_request(request))
            if changed is None:
                return None
            request = from_vcr_request(changed)
        response = interaction.response
        if on_response is not None:
            given = vcr_response(response)
            changed = on_response(given)
            if changed is None:
                return None
            response = _response_after(response, changed)
        return Interaction(request, response)

    return before_record


def _response_after(recorded: Response, changed: Mapping[str, Any]) -> Response:
    """The recorded response as the hook left it: its own chunks while its body is unchanged."""
    made = from_vcr_response(changed)
    if made.body == recorded.body:
        return attrs.evolve(recorded, status=made.status, headers=made.headers)
    return attrs.evolve(made, headers_at=recorded.headers_at)


class VcrRegistry:
    """The `vcr` object a `pytest_recording_configure(config, vcr)` hook is handed.

    `register_matcher` is honoured (the name may then be used in `match_on`);
    `register_serializer` is accepted (a migrated cassette is replay's msgpack, read by
    replay: the serializer only mattered to the YAML `replay migrate` read); a vcrpy option set
    as an attribute (`vcr.match_on = [...]`, `vcr.filter_headers = [...]`) is a default of
    every cassette, beneath `vcr_config` and the marks (`defaults`), as vcrpy's `VCR` makes it;
    the rest is noted in `unhonoured`.
    """

    _OWN = ("matchers", "serializers", "defaults", "unhonoured")

    def __init__(self) -> None:
        #: Matchers by name, as registered.
        self.matchers: dict[str, Hook] = {}
        #: Serializers by name, as registered.
        self.serializers: dict[str, Any] = {}
        #: vcrpy options set on this object: every cassette's defaults.
        self.defaults: dict[str, Any] = {}
        #: What was asked of this object that replay does not do, by name.
        self.unhonoured: list[str] = []

    def register_matcher(self, name: str, matcher: Hook) -> None:
        """vcrpy's: `match_on` may name `matcher` as `name`."""
        self.matchers[name] = matcher

    def register_serializer(self, name: str, serializer: Any) -> None:
        """vcrpy's: accepted, and of no effect on replay's cassettes."""
        self.serializers[name] = serializer

    def register_persister(self, persister: Any) -> None:
        """vcrpy's: not honoured (replay's cassettes are its own files)."""
        self.unhonoured.append("vcr.register_persister")

    def __setattr__(self, name: str, value: Any) -> None:
        if name in self._OWN:
            object.__setattr__(self, name, value)
        else:
            self.defaults[name] = value  # (what replay does not honour is said when used)

    def __getattr__(self, name: str) -> Any:
        try:
            return self.__dict__["defaults"][name]
        except KeyError:
            raise AttributeError(name) from None


class VcrCassette:
    """What a test reads of pytest-recording's `vcr` fixture, over replay's `Cassette`.

    Attributes:
        cassette: replay's cassette in use (its `interactions`, `play_counts`...).
        record_mode: the record mode in force.
    """

    def __init__(self, cassette: Cassette, record_mode: str) -> None:
        self.cassette = cassette
        self.record_mode = record_mode

    @property
    def requests(self) -> list[Any]:
        """Each interaction's request, as vcrpy's `Request` (recorded ones included)."""
        return [vcr_request(i.request) for i in self.cassette.interactions]

    @property
    def responses(self) -> list[dict[str, Any]]:
        """Each interaction's response, as vcrpy's response dict (the body whole)."""
        return [vcr_response(i.response) for i in self.cassette.interactions]

    @property
    def data(self) -> list[tuple[Any, dict[str, Any]]]:
        """(request, response) pairs, as vcrpy's `Cassette.data`."""
        return list(zip(self.requests, self.responses, strict=True))

    @property
    def play_counts(self) -> collections.Counter[int]:
        """How often each interaction played, by index (vcrpy's `Counter`)."""
        return collections.Counter(
            {index: count for index, count in enumerate(self.cassette.play_counts) if count}
        )

    @property
    def play_count(self) -> int:
        """How many plays in all."""
        return self.cassette.play_count

    @property
    def all_played(self) -> bool:
        """Whether every interaction played."""
        return self.cassette.all_played

    def __len__(self) -> int:
        return len(self.cassette.interactions)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.cassette, name)
