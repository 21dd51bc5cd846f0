"""The stamper: a helper process that reads recorded connections the moment data arrives.

Run by `replay.adapters.stamper` as `python -I -S <this file> <fd>`, one per recording process;
stdlib only, so that it starts in a few milliseconds and never imports replay. It has an
interpreter (and a GIL) of its own: a client that holds its process's GIL cannot delay it.

Its control socket (the Unix socket `fd`) brings, for each connection, two descriptors
(SCM_RIGHTS): a duplicate of the connection's TCP socket, and the stamper's end of a socket
pair. The stamper reads the TCP socket as soon as data is there (`recvmsg`, with the kernel's
receive timestamp where the platform gives it) and writes each arrival down the pair as one
frame: `<d I i` (the arrival's time on this machine's `time.monotonic()`, the byte count,
a code: 0 data, 1 end of stream, 2 error with the byte count as its errno), then the bytes.
It keeps what the other end has not read yet (up to `HELD` bytes a connection; past that it
stops reading the connection until the other end catches up). The pair's other end closing
drops the connection here. End of file on the control socket (its parent exited, or let it
go) ends the stamper.
"""

from __future__ import annotations

import array
import contextlib
import os
import selectors
import signal
import socket
import struct
import sys
import time

FRAME = struct.Struct("<dIi")
DATA, EOF, ERROR = 0, 1, 2
READ = 262144
HELD = 32 * 1024 * 1024
LINUX = sys.platform.startswith("linux")
#: Linux's SO_TIMESTAMPNS (a timespec); elsewhere SO_TIMESTAMP (a timeval).
OPTION = 35 if LINUX else getattr(socket, "SO_TIMESTAMP", 0x400)
STAMP = struct.Struct("qq" if LINUX else "ql")
SCALE = 1e-9 if LINUX else 1e-6
SPACE = socket.CMSG_SPACE(STAMP.size)


def offset() -> float:
    """`time.time() - time.monotonic()` now: read between two readings of the monotonic
    clock, the closest of a few tries (this process may be preempted between two calls on a
    busy machine: the offset would be off by that long)."""
    best, found = float("inf"), 0.0
    for _ in range(4):
        before = time.monotonic()
        real = time.time()
        after = time.monotonic()
        if after - before < best:
            best, found = after - before, real - (before + after) / 2
        if best < 50e-6:
            break
    return found


def monotonic_of(ancillary: list[tuple[int, int, bytes]]) -> float:
    """The arrival's time on `time.monotonic()`: the kernel's stamp (on CLOCK_REALTIME)
    carried over by the two clocks' offset read now; now itself without a stamp."""
    mono = time.monotonic()
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == OPTION and len(data) >= STAMP.size:
            seconds, fraction = STAMP.unpack_from(data)
            stamp: float = seconds + fraction * SCALE - offset()
            return min(stamp, mono)
    return mono


class Connection:
    """One recorded connection: its TCP socket (read here) and where its frames go."""

    def __init__(self, tcp: socket.socket, out: socket.socket) -> None:
        self.tcp: socket.socket | None = tcp
        self.out: socket.socket | None = out
        self.held = bytearray()
        self.reading = True
        with contextlib.suppress(OSError):
            tcp.setsockopt(socket.SOL_SOCKET, OPTION, 1)


class Stamper:
    """The loop: the control socket, and every connection's two sockets."""

    def __init__(self, control: socket.socket) -> None:
        self.control = control
        self.selector = selectors.DefaultSelector()
        self.selector.register(control, selectors.EVENT_READ, None)

    def run(self) -> None:
        while True:
            for key, events in self.selector.select():
                if key.data is None:
                    if not self.accept():
                        return
                    continue
                connection, which = key.data
                if which == "tcp":
                    self.read(connection)
                elif events & selectors.EVENT_READ:
                    self.drop(connection)  # the other end closed (it never writes)
                else:
                    self.flush(connection)

    def accept(self) -> bool:
        fds = array.array("i")
        try:
            data, ancillary, _flags, _address = self.control.recvmsg(
                16, socket.CMSG_SPACE(2 * fds.itemsize)
            )
        except InterruptedError:
            return True
        except OSError:
            return False
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
        if not data:
            return False
        if len(fds) != 2:
            for fd in fds:
                os.close(fd)
            return True
        tcp, out = socket.socket(fileno=fds[0]), socket.socket(fileno=fds[1])
        connection = Connection(tcp, out)
        self.selector.register(tcp, selectors.EVENT_READ, (connection, "tcp"))
        self.selector.register(out, selectors.EVENT_READ, (connection, "out"))
        return True

    def read(self, connection: Connection) -> None:
        if connection.tcp is None:
            return
        try:
            data, ancillary, _flags, _address = connection.tcp.recvmsg(
                READ, SPACE, socket.MSG_DONTWAIT
            )
        except (BlockingIOError, InterruptedError):
            return
        except OSError as error:
            self.end(connection, FRAME.pack(time.monotonic(), error.errno or 0, ERROR))
            return
        if not data:
            self.end(connection, FRAME.pack(monotonic_of(ancillary), 0, EOF))
            return
        connection.held += FRAME.pack(monotonic_of(ancillary), len(data), DATA)
        connection.held += data
        self.flush(connection)
        tcp = connection.tcp
        if len(connection.held) > HELD and connection.reading and tcp is not None:
            connection.reading = False  # until the other end catches up (`flush`)
            self.selector.unregister(tcp)

    def end(self, connection: Connection, frame: bytes) -> None:
        connection.held += frame
        tcp, connection.tcp = connection.tcp, None
        if tcp is not None:
            if connection.reading:
                self.selector.unregister(tcp)
            tcp.close()
        connection.reading = False
        self.flush(connection)

    def flush(self, connection: Connection) -> None:
        if connection.out is None:
            return
        held = connection.held
        while held:
            try:
                sent = connection.out.send(held, socket.MSG_DONTWAIT)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                self.drop(connection)
                return
            del held[:sent]
        events = selectors.EVENT_READ | (selectors.EVENT_WRITE if held else 0)
        if not held and connection.tcp is None:
            self.drop(connection)
            return
        self.selector.modify(connection.out, events, (connection, "out"))
        if not connection.reading and connection.tcp is not None and len(held) <= HELD // 2:
            connection.reading = True
            self.selector.register(connection.tcp, selectors.EVENT_READ, (connection, "tcp"))

    def drop(self, connection: Connection) -> None:
        for which in ("tcp", "out"):
            sock = getattr(connection, which)
            if sock is None:
                continue
            with contextlib.suppress(KeyError, ValueError):
                self.selector.unregister(sock)
            sock.close()
            setattr(connection, which, None)
        connection.held = bytearray()
        connection.reading = False


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the terminal's Ctrl-C is the parent's
    control = socket.socket(fileno=int(sys.argv[1]))
    control.setblocking(True)
    # The kernel stamps arrivals while an inet socket asks for it (turning it on is
    # deferred there: the first segments after would have no stamp): this one asks, for
    # as long as the stamper runs.
    keep = None
    with contextlib.suppress(OSError):
        keep = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        keep.setsockopt(socket.SOL_SOCKET, OPTION, 1)
    try:
        try:
            control.sendall(b"+")  # started
        except OSError:
            return  # the parent is gone (it may exit before it hears that this one started)
        Stamper(control).run()
    finally:
        if keep is not None:
            keep.close()


if __name__ == "__main__":
    main()
