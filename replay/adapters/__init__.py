"""Adapters: the client libraries other than httpx / httpx2 that replay serves.

Each module here patches one library's send path so that its requests go through the
cassette session of their context, and is imported only when that library is installed
(`replay.patch.ADAPTERS` names them). An adapter is a thin shell over the engine:

- `patches()` returns the (class, attribute, replacement) triples to install while any
  session is active; `replay.patch` installs and restores them with the httpx patches.
- Per request, the replacement asks `replay.patch.routed()` for the session of its
  context (None: no session, send as usual; `patch.bypassed()` is set inside replay's own
  sends, which pass straight through), builds a `replay.model.Request`, and asks the
  session: `session.answer(request)` gives a `Played` to replay (or raises
  `CassetteMismatchError`), or None: record it, through `session.start_recording(request)`,
  whose `Recording` notes the headers, each chunk as it arrives and the end.
- Replaying, it steps an `engine.Stepper(played.response, session.schedule())` with
  `engine.step_async` / `engine.step_sync` on `session.clock`, and ends the body as the
  library's own error (`End.error` names the httpx-style class: RemoteProtocolError,
  ReadTimeout… mapped to the library's nearest one).
"""
