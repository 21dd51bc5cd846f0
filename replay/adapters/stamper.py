"""Arrival times that a client holding the GIL cannot delay: the stamper process, this side.

A recording's chunk is stamped with the moment it came off the network. A reader in the
client's process (a thread, a task) takes that moment only when it runs, and a client that
holds the GIL (building pydantic schemas, a regex, any long C call) keeps it from running;
the kernel's receive timestamps do not survive that either, as Linux merges the segments
queued meanwhile and keeps the last one's time. So the connections being recorded are read
by a helper process (`replay.adapters.stamper_child`), one per recording process, started on
the first recording (some 20 ms): it reads each connection as soon as data arrives, with the
kernel's timestamp, and hands every arrival back as a frame (its time, its bytes), in order.
The client's process keeps the socket for writing, and reads the arrivals (`Arrivals`).

The stamper dies with its process (end of file on its control socket); a forked child starts
its own. Where there is none (no Unix sockets with SCM_RIGHTS, the helper did not start,
`REPLAY_STAMPER=off` in the environment), `attach` says so with None and recordings are read
as before (their cassettes say so: `replay.model.TIMES`).
"""

from __future__ import annotations

import array
import atexit
import contextlib
import os
import socket
import struct
import subprocess
import sys
import threading
from pathlib import Path
from typing import Final

from replay.adapters.stamper_child import OPTION as TIMESTAMP_OPTION

__all__ = ["Arrivals", "attach", "available", "pid", "prepare"]

#: A frame's head, as the stamper writes it: the arrival's time, its byte count, its kind.
_FRAME: Final = struct.Struct("<dIi")
_DATA, _EOF, _ERROR = 0, 1, 2
#: How long the stamper may take to start before recordings go without it.
_START_TIMEOUT: Final = 10.0
_CHILD: Final = Path(__file__).with_name("stamper_child.py")


class Arrivals:
    """The arrivals of one connection, as the stamper forwards them, one at a time.

    Args:
        channel: this process's end of the socket pair the stamper writes to.
    """

    def __init__(self, channel: socket.socket) -> None:
        self._channel = channel
        self._buffer = bytearray()
        self._over = False
        #: The time (on `time.monotonic()`) of the last arrival taken.
        self.stamp: float | None = None

    def next(self, timeout: float | None) -> bytes:
        """The next arrival's bytes (b"" at the end of the stream), its time in `stamp`.

        Raises:
            TimeoutError: nothing arrived within `timeout` seconds.
            OSError: the connection failed (as the stamper's read of it did).
        """
        if self._over:
            return b""
        while True:
            data = self._parsed()
            if data is not None:
                return data
            self._channel.settimeout(timeout)
            self._received(self._channel.recv(1 << 18))

    def ready(self) -> bytes | None:
        """The next arrival if it is there already (b"": the end), else None; never waits.

        Raises:
            OSError: as `next`.
        """
        while not self._over:
            data = self._parsed()
            if data is not None:
                return data
            self._channel.settimeout(0)
            try:
                received = self._channel.recv(1 << 18)
            except (BlockingIOError, InterruptedError):
                return None
            self._received(received)
        return b""

    def fileno(self) -> int:
        """The channel's descriptor: readable when an arrival (or the end) is on its way."""
        return self._channel.fileno()

    def _parsed(self) -> bytes | None:
        """The next whole frame's bytes (b"": the end), or None until one is whole."""
        buffer = self._buffer
        if len(buffer) < _FRAME.size:
            return None
        stamp, size, kind = _FRAME.unpack_from(buffer)
        length = _FRAME.size + (size if kind == _DATA else 0)
        if len(buffer) < length:
            return None
        data = bytes(buffer[_FRAME.size : length])
        del buffer[:length]
        self.stamp = stamp
        if kind == _DATA:
            return data
        self._over = True
        if kind == _ERROR:
            raise OSError(size, os.strerror(size))
        return b""

    def _received(self, received: bytes) -> None:
        if not received:  # the stamper is gone: the stream cannot go on
            self._over = True
            raise ConnectionResetError("the stamper process stopped")
        self._buffer += received

    def pending(self) -> bool:
        """Whether an arrival (or the end) is there to take without waiting."""
        if self._over or len(self._buffer) >= _FRAME.size:
            return True
        self._channel.settimeout(0)
        try:
            received = self._channel.recv(1 << 18)
        except (BlockingIOError, TimeoutError, InterruptedError):
            return False
        except OSError:
            return True
        if not received:
            return True
        self._buffer += received
        return True

    def close(self) -> None:
        """Let go of the channel (the stamper then lets go of the connection)."""
        self._channel.close()


class _Process:
    """The stamper process of this process, and its control socket."""

    def __init__(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.child = subprocess.Popen(
                [sys.executable, "-I", "-S", str(_CHILD), str(theirs.fileno())],
                pass_fds=[theirs.fileno()],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,  # nothing of it in the program's output; a stamper
                # that fails is seen here (no "+", a closed socket): recordings say "reader"
            )
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        self.control = ours
        self.lock = threading.Lock()
        try:
            ours.settimeout(_START_TIMEOUT)
            started = ours.recv(1)
            ours.settimeout(None)
        except OSError:
            started = b""
        if started != b"+":
            self.close()
            raise OSError("the stamper process did not start")

    def attach(self, sock: socket.socket) -> Arrivals:
        # The kernel stamps what arrives from now on, before the stamper has even taken the
        # socket (a busy machine may run it a few milliseconds later: a response arriving
        # meanwhile would have no stamp, and get the time the stamper read it).
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, TIMESTAMP_OPTION, 1)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            fds = array.array("i", [sock.fileno(), theirs.fileno()])
            with self.lock:
                self.control.sendmsg([b"c"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)])
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        return Arrivals(ours)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.control.close()
        with contextlib.suppress(Exception):
            self.child.wait(1.0)


_lock = threading.Lock()
_process: _Process | None = None
_failed = False
_inherited: list[_Process] = []


def _start() -> _Process | None:
    global _process, _failed
    with _lock:
        if _process is None and not _failed:
            try:
                _process = _Process()
            except (OSError, subprocess.SubprocessError, ValueError):
                _failed = True
        return _process


def prepare() -> None:
    """Start the stamper in the background now, if this process can have one and has none:
    a session that records has begun, and its first recording must not wait for the start
    (some 20 ms, which its time to first byte would otherwise count)."""
    if _process is None and available():
        thread = threading.Thread(target=_start, name="replay-stamper-start", daemon=True)
        thread.start()


def available() -> bool:
    """Whether this process can have a stamper (it starts on the first `attach`): Unix
    sockets with SCM_RIGHTS, the helper not failed, and `REPLAY_STAMPER` not "off"."""
    if _failed or os.environ.get("REPLAY_STAMPER", "").lower() in ("off", "0", "no"):
        return False
    return hasattr(socket, "SCM_RIGHTS") and hasattr(socket, "AF_UNIX")


def pid() -> int | None:
    """The process id of this process's stamper; None while it has none."""
    return None if _process is None else _process.child.pid


def attach(sock: socket.socket) -> Arrivals | None:
    """Hand the TCP socket `sock` (connected, nothing read yet) to the stamper: its arrivals
    from now on; None when there is no stamper (then read `sock` as usual)."""
    if not available():
        return None
    process = _start()
    if process is None:
        return None
    try:
        return process.attach(sock)
    except OSError:  # the stamper is gone: recordings go without it from now on
        global _failed
        _failed = True
        return None


def _forget() -> None:
    """In a forked child: the stamper is the parent's (its control socket is closed here,
    so that the parent's exit still ends it); the child starts its own."""
    global _process, _lock
    _lock = threading.Lock()
    if _process is not None:
        with contextlib.suppress(OSError):
            _process.control.close()
        _inherited.append(_process)  # (its Popen is the parent's to wait for)
        _process = None


def _at_exit() -> None:
    if _process is not None:
        _process.close()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget)
atexit.register(_at_exit)
