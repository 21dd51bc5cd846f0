"""The cassette file: its format, read and written in bounded time and memory.

`file` (the msgpack document, versioned; `load_interactions`, `save_interactions`, `merge`,
`file_lock`), `cassette` (`Cassette`: the interactions and their play bookkeeping), `load`,
`walk` and `msgpack_bytes` (reading a file in time and memory bounded by its size, building
nothing unchecked), `validate` and `prechecked` (an interaction's checks, and the values made
once they passed), `atomic` (saving through symlinks, atomically), `spool` (a recording's
payloads on disk as they come) and `journal` (a long session's finished interactions, kept
as parts beside the cassette until it saves).
"""
