"""One thin shell per client library, and what reaches them.

A shell converts its library's request into a `replay.model.Request`, asks the engine what to
do, and turns the engine's steps into its library's bytes, waits and errors:

- `httpx` (httpx and httpx2, through `playback` and `record`: the public transports),
  `aiohttp`, `requests`, `httpcore` (httpcore used directly, through the httpx shell),
  `urllib3` (urllib3 used directly) and `httpclient` (http.client, and so urllib.request),
  both reading a file of the body's pieces (`filebody`);
  `httpmod` says which httpx module a request belongs to;
- `websockets`, `websockets_sync` and `websockets_aiohttp`: WebSocket conversations of the
  `websockets` clients and of aiohttp's `ws_connect`,
  watched to record (`websockets_record`), replayed by a peer at the end of a socket pair
  (`websockets_peer`);
- `patch` and `on_import`: the patches that route every client of a process to its session;
- `reader` and `netthread`: the readers that stamp each chunk as it comes off the network;
- `network`: `block_network()`, the guard that refuses what no cassette handles, and `reuse`,
  its checks of connections opened before it.
"""
