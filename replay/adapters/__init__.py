"""Adapters: the client libraries other than httpx / httpx2 that replay serves.

Each module here patches one library's send path so that its requests go through the
cassette session of their context, and is imported only when that library is installed
(`replay.patch.ADAPTERS` names them). An adapter is a thin shell over the engine:

- `patches()` returns the (class, attribute, replacement) triples to install while any
  session is active; `replay.patch` installs and restores them with the httpx patches.
- Per request, the replacement asks `replay._routes.routed()` for the session of its
  context (None: no session, send as usual; `bypassed()` is set inside replay's own sends,
  which pass straight through), then the engine's exchange (`replay.engine.exchange`):
  `route(session, url)` is `LIVE` for an ignored host; else it builds a
  `replay.model.Request` and `Exchange.decide(request)` gives a `Replay` (or raises
  `CassetteMismatchError`) or a `Record`, whose recording it sends through `Record.sent` /
  `asent` and whose body a reader stamps as it arrives (`replay.engine.feed`).
- Replaying, it plays `replay.body(fail, read_timeout)` (`replay.engine.playing.Playing`:
  sync or async, the instant path included), `fail` building the library's own error for
  a recorded end (`End.error` names the httpx-style class: RemoteProtocolError,
  ReadTimeout… mapped to the library's nearest one).
"""
