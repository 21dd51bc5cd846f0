"""The reader threads of the recordings (`replay.adapters.reader`), each reused body after body.

A thread runs one job at a time, in an empty `contextvars` context, with the sessions of the
client that handed it over; idle for `_IDLE_WAIT`, it ends, and at exit the idle ones end
first (see `_Workers.end_idle`).
"""

from __future__ import annotations

import atexit
import contextvars
import os
import queue
import threading
from collections.abc import Callable
from typing import Final

from replay.adapters import routes
from replay.engine.feed import CLOSE_WAIT, Failed

__all__ = ["WORKERS"]

#: How long a reader thread waits, idle, for the next body before it ends.
_IDLE_WAIT: Final = 10.0

#: The names of a reader thread reading a body, and of one waiting for the next.
_BUSY_NAME: Final = "replay-recorder"
_IDLE_NAME: Final = "replay-recorder-idle"

_Job = tuple[Callable[[], object], Callable[[object], None], threading.Event]


class _Workers:
    """The reader threads, each reused body after body (it ends once idle `_IDLE_WAIT`).

    A thread started for each body cost its first chunk some 0.1 ms, and its memory: each
    thread allocates from a glibc arena, and a reader started afresh faulted in new pages for
    every chunk it kept (about 12,700 faults, some 5 µs a 16 KiB chunk, in bench 10), where
    one that lives on mostly reuses the pages the last recording freed.

    Each body is read in an empty `contextvars` context, as in a thread of its own, with the
    sessions of the client that handed it over (`routes.carried`); the threads themselves
    carry none (`routes.start_unrouted`), from one body to the next.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: list[tuple[queue.SimpleQueue[_Job | None], threading.Thread]] = []

    def run(
        self, job: Callable[[], object], last: Callable[[object], None], done: threading.Event
    ) -> None:
        """Run `job` in an idle reader thread, or a new one; once it returned, hand what it
        returned to `last`, then set `done`. The thread is idle before `last`: a client that
        reads the end of a body and sends the next request finds it ready."""
        with self._lock:
            jobs, _ = self._idle.pop() if self._idle else (None, None)
        if jobs is None:
            jobs = queue.SimpleQueue()
            thread = threading.Thread(
                target=self._serve, args=(jobs,), name=_BUSY_NAME, daemon=True
            )
            routes.start_unrouted(thread)
        jobs.put((job, last, done))

    def _serve(self, jobs: queue.SimpleQueue[_Job | None]) -> None:
        thread = threading.current_thread()
        while True:
            try:
                given = jobs.get(timeout=_IDLE_WAIT)
            except queue.Empty:
                with self._lock:
                    if (jobs, thread) in self._idle:  # nobody is handing it a job: it ends
                        self._idle.remove((jobs, thread))
                        return
                continue  # taken from the idle ones just now: its job is on the way
            if given is None:  # the process is exiting
                return
            job, last, done = given
            thread.name = _BUSY_NAME
            try:
                item = contextvars.Context().run(job)
            except BaseException as error:  # ends the thread (with a traceback), as before
                thread.name = _IDLE_NAME
                last(Failed(error))  # the client hears of it: it must not wait for more
                done.set()
                raise
            thread.name = _IDLE_NAME  # before `done`: a closed body's reader is seen idle
            with self._lock:
                self._idle.append((jobs, thread))
            last(item)
            done.set()
            del given, job, last, done, item  # an idle thread holds on to no recording

    def end_idle(self) -> None:
        """At exit: end the idle threads, so that the process ends as without them, its main
        thread last (a parent sees it gone only once it is: `replay record` holds a signal
        that comes after the program ended, and passes on one that comes before)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for jobs, _ in idle:
            jobs.put(None)
        for _, thread in idle:
            thread.join(CLOSE_WAIT)

    def forget(self) -> None:
        """In a forked child: the idle threads are the parent's."""
        self._lock = threading.Lock()
        self._idle = []


WORKERS: Final = _Workers()
atexit.register(WORKERS.end_idle)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=WORKERS.forget)
