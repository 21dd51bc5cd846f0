"""`replay serve` and `replay proxy`: ASGI apps (`serve`, `proxy`) on one uvicorn runner
(`asgi`, 127.0.0.1 only), each request's arrival bounded (`guard`); the proxy saves its
cassette in batches from a thread of its own (`saver`). WebSocket upgrades: answered from a
cassette (`websocket`), relayed and recorded (`websocket_proxy`).
"""
