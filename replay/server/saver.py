"""How `replay proxy` saves its cassette: in batches, from a thread of its own.

The proxy's recording is its own (the file is replaced, not merged), and under load
interactions finish by the hundred a second: saving the whole cassette after each would make
each save cost more than the last. So the tape records into an `Outbox`, which hands each
interaction, packed at once as the file holds it, to the `Saver`; the saver's thread writes
the file, atomically, at once after a quiet spell and then at most every `interval` seconds
while more keep finishing, and `close` writes what is left. A crash loses at most what
finished during the last interval and the save under way; the file is always a whole
cassette.

The bytes are `store.dumps`'s own: its document is a map whose last entry is the
interactions array, so a cassette is the document's head, the array's length, and each
interaction's bytes in turn (`tests/test_proxy.py` checks the file against `store.dumps`).
Until the store offers this itself (saving interactions packed beforehand, or appending to
a file), the head is cut from `store.dumps([])` here.
"""

from __future__ import annotations

import threading
from pathlib import Path

import msgpack

from replay.errors import CassetteWriteError
from replay.model import Interaction
from replay.server.asgi import Log
from replay.store.atomic import write_atomically
from replay.store.cassette import Cassette
from replay.store.file import dumps

__all__ = ["SAVE_INTERVAL", "Outbox", "Saver"]

#: Seconds between two saves while interactions keep finishing (`--save-interval`).
SAVE_INTERVAL = 0.5

#: The document's head: `store.dumps` of no interactions but for the empty array that ends it.
_HEAD = dumps([])[:-1]


def _packed(interaction: Interaction) -> bytes:
    """`interaction` as the cassette file holds it (`store.dumps` of it alone, past `_HEAD`
    and its one-byte array length)."""
    return dumps([interaction])[len(_HEAD) + 1 :]


class Saver:
    """Saves the interactions `add`ed to it into `path`, in batches, from a thread of its own.

    A save writes bytes packed before: the work that holds the GIL is the batch's and one
    copy of the bytes, however long the cassette grows (the writing lets the GIL go), and
    no objects are kept for the garbage collector to walk again and again. An existing file
    is replaced only once something was recorded.

    Args:
        path: the cassette file.
        interval: the most seconds between two saves while interactions keep coming.
        log: told when a save in the thread fails (the next one tries again).
    """

    def __init__(self, path: Path, interval: float, log: Log) -> None:
        self.path = path
        self.interval = interval
        self._log = log
        self._lock = threading.Lock()  # one save at a time
        self._saved: int | None = None  # how many interactions the file holds, once written
        self._wanted = threading.Condition()  # guards what follows
        self._parts: list[bytes] = []  # the packed interactions, in the order they finished
        self._dirty = False
        self._closing = False
        self._thread: threading.Thread | None = None

    def add(self, interaction: Interaction) -> None:
        """Keep `interaction`, packed: it is saved within `interval` seconds (or by `close`)."""
        part = _packed(interaction)
        with self._wanted:
            self._parts.append(part)
            if self._closing:
                return
            self._dirty = True
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="replay-proxy-saver", daemon=True
                )
                self._thread.start()
            self._wanted.notify()

    def _run(self) -> None:
        while True:
            with self._wanted:
                self._wanted.wait_for(lambda: self._dirty or self._closing)
                if self._closing:
                    return
                self._dirty = False
            try:
                self.save()
            except CassetteWriteError as error:  # kept: the next save, or the last, may work
                self._log(str(error))
            with self._wanted:  # the pause that gathers a batch (cut short by `close`)
                self._wanted.wait_for(lambda: self._closing, timeout=self.interval)

    def save(self) -> None:
        """Write the cassette now if it holds something the file does not."""
        with self._lock:
            with self._wanted:
                parts = self._parts[:]
            if self._saved == len(parts) or (not parts and self.path.exists()):
                return
            array = msgpack.Packer().pack_array_header(len(parts))
            write_atomically(self.path, b"".join([_HEAD, array, *parts]))
            self._saved = len(parts)

    def close(self) -> None:
        """Stop the saving thread (letting a save under way end) and save what is left."""
        with self._wanted:
            self._closing = True
            self._wanted.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join()
        self.save()


class Outbox(Cassette):
    """The cassette the proxy's tape records into: each interaction goes to the `Saver`,
    packed, and is not kept here (`interactions` stays empty)."""

    def __init__(self, saver: Saver) -> None:
        super().__init__()
        self._saver = saver

    def append(self, interaction: Interaction) -> None:
        """Hand `interaction`, recorded and redacted, to the saver."""
        self._saver.add(interaction)
