"""Blocking the network: requests no cassette handles fail at once, loopback excepted.

Three layers, all idle unless a block is active:

1. The HTTP layer. A router at the bottom of the patch stack refuses every httpx / httpx2
   request that no cassette session took, with an error naming the request.
2. The socket layer. An audit hook (`sys.addaudithook`) refuses the calls that make a
   socket reach a host — `socket.connect` (`connect`, `connect_ex`), `socket.sendto` (UDP,
   and TCP with `MSG_FASTOPEN`), `socket.sendmsg` with an address — of every socket,
   `_socket.socket` used directly included, before any packet leaves. An audit hook cannot
   be removed, so it is installed once and consults the blocks active at the moment.
3. Child Python processes. While a block is active, `ENV_BLOCK_NETWORK` (the allowed hosts)
   is carried into every Python process started (`replay.run.descendants`: `os.environ` with
   replay's start-up hook first on PYTHONPATH, a `Popen`'s own `env=`, the preparation data
   of `multiprocessing` spawn and forkserver workers), which blocks its own network before
   its first line runs (`block_from_environment`, from `replay.run.site.sitecustomize` or
   the preparation data). The environment is put back as it was when the block ends.

Not covered: programs that are not Python (curl, node), Python started with -S, -E or -I
(no start-up hook), C extensions that make their own socket system calls without audit
events (uvloop, pycurl, grpc), name resolution (a DNS lookup of a refused host may still
reach the resolver: the connection after it is refused), and processes started by C
code. A `multiprocessing` forkserver started during the block stays blocked after it.

Loopback stays allowed unless `allowed_hosts` says otherwise, since tests talk to local
servers.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import socket
import sys
import threading
from collections.abc import Collection, Iterable, Iterator, Mapping
from types import FrameType
from typing import Any
from urllib.parse import urlsplit

from replay.adapters import patch
from replay.errors import (
    ConfigurationError,
    NetworkBlockedError,
    hide_for_replay_errors,
    raise_bare,
)

__all__ = [
    "ENV_BLOCK_NETWORK",
    "LOOPBACK",
    "block_from_environment",
    "block_network",
    "host_names",
    "is_allowed",
]

#: Hosts allowed by default: the loopback interface.
LOOPBACK: frozenset[str] = frozenset({"localhost", "127.0.0.1", "::1"})

ENV_BLOCK_NETWORK = "REPLAY_BLOCK_NETWORK"
"""Set while a block is active: the hosts still allowed, as a JSON list. A Python process
started with it (and replay's hook on PYTHONPATH) blocks its network for its whole life."""


def host_names(hosts: Iterable[str]) -> frozenset[str]:
    """Host names as `is_allowed` compares them: lower case, without IPv6 brackets; a
    single string is one host, not its letters."""
    if isinstance(hosts, str):
        hosts = (hosts,)
    return frozenset(host.strip().strip("[]").lower() for host in hosts if host.strip())


def is_allowed(host: str | None, allowed_hosts: Collection[str]) -> bool:
    """Whether `host` may be reached: listed, or loopback when loopback hosts are listed."""
    if host is None:
        return True  # a Unix socket or the like: not the network
    host = host.strip("[]").lower()
    if host in allowed_hosts:
        return True
    if "127.0.0.1" in allowed_hosts or "::1" in allowed_hosts:
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            return False
        mapped = getattr(address, "ipv4_mapped", None)  # ::ffff:127.0.0.1 is loopback too
        return address.is_loopback or (mapped is not None and mapped.is_loopback)
    return False


class _Guard:
    """The router at the bottom of the stack: passes allowed hosts, refuses the rest."""

    def __init__(self, allowed_hosts: Collection[str]) -> None:
        self.allowed_hosts = frozenset(h.lower() for h in allowed_hosts)

    def _check(self, request: Any) -> None:
        __tracebackhide__ = hide_for_replay_errors
        url = str(request.url)
        host = urlsplit(url).hostname
        if not is_allowed(host, self.allowed_hosts):
            from replay.redact.redactor import Redactor  # (a refusal only)

            shown = Redactor().url(url)  # the message never echoes a secret
            raise_bare(NetworkBlockedError(method=request.method, url=shown))  # not `request`

    def handle(self, request: Any, send: patch.Send) -> Any:
        """Send an allowed request; refuse the rest."""
        __tracebackhide__ = hide_for_replay_errors
        self._check(request)
        return send(request)

    async def ahandle(self, request: Any, send: patch.AsyncSend) -> Any:
        """Send an allowed request; refuse the rest."""
        __tracebackhide__ = hide_for_replay_errors
        self._check(request)
        return await send(request)


# -- the socket layer ---------------------------------------------------------------------------

#: The allowed hosts of each active block; a host must be allowed by all of them.
_blocks: tuple[frozenset[str], ...] = ()
_blocks_lock = threading.Lock()
_hook_installed = False
#: Audit events of socket calls that reach a host, and the verb a refusal names.
_VERBS = {"socket.connect": "CONNECT", "socket.sendto": "SENDTO", "socket.sendmsg": "SENDMSG"}
_INTERNET = (socket.AF_INET, socket.AF_INET6)


def _audit(event: str, args: tuple[Any, ...]) -> None:
    """The audit hook: refuse a socket call to a host some active block does not allow."""
    if not _blocks or event not in _VERBS:
        return  # every other audited event of the process, as fast as can be
    sock, address = args[0], args[1]
    if getattr(sock, "family", None) not in _INTERNET or not isinstance(address, tuple):
        return  # a Unix socket, or a connected socket's send (no address)
    if not address:
        return  # malformed: the call itself fails
    host = str(address[0])
    if all(is_allowed(host, allowed) for allowed in _blocks):
        return
    port = address[1] if len(address) > 1 else "?"
    raise NetworkBlockedError(method=_VERBS[event], url=f"{host}:{port}", library=_caller_library())


def _start(guard: _Guard) -> None:
    global _blocks, _hook_installed
    with _blocks_lock:
        if not _hook_installed:
            sys.addaudithook(_audit)
            _hook_installed = True
        _blocks = (*_blocks, guard.allowed_hosts)
    patch.install_bottom(guard)


def _stop(guard: _Guard) -> None:
    global _blocks
    patch.uninstall(guard)
    with _blocks_lock:
        index = _blocks.index(guard.allowed_hosts)
        _blocks = (*_blocks[:index], *_blocks[index + 1 :])


#: Modules a connection passes through that are not the client library making it.
_PLUMBING = frozenset(
    {
        "socket",
        "ssl",
        "asyncio",
        "selectors",
        "concurrent",
        "threading",
        "contextlib",
        "functools",
        "anyio",
        "sniffio",
        "replay",
        "trio",
        "uvloop",
        "_pytest",
        "pluggy",
    }
)


def _caller_library() -> str | None:
    """The library whose code opened the connection being refused: the innermost frame's
    module that is not plumbing (the stdlib's `http.client` or `urllib.request` by name)."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        name = str(frame.f_globals.get("__name__", ""))
        top = name.partition(".")[0]
        if top and top not in _PLUMBING:
            return name if top in ("http", "urllib") else top
        frame = frame.f_back
    return None


# -- child processes ----------------------------------------------------------------------------


class _ChildEnvironment:
    """A block carried into the Python processes started while it is active, however they
    start (`replay.run.descendants`: the environment, a Popen's env of its own, the
    preparation data of `multiprocessing` workers); `restore` ends that."""

    def __init__(self, allowed_hosts: frozenset[str]) -> None:
        from replay.run.descendants import carry

        settings = {ENV_BLOCK_NETWORK: json.dumps(sorted(allowed_hosts))}
        self._carrier = carry(settings, arrive="replay.adapters.network:_arrive")

    def restore(self) -> None:
        """Carry the block no further (the environment is put back as it was)."""
        self._carrier.end()


#: The blocks this process started from `ENV_BLOCK_NETWORK` (`block_from_environment`),
#: by its text: each once, though both the start-up hook and a worker's preparation data ask.
_arrived: set[str] = set()


def _arrive(settings: Mapping[str, str], payload: object) -> None:
    """In a `multiprocessing` worker started during a block: block its network too (unless
    its start-up hook did)."""
    block_from_environment(settings)


@contextlib.contextmanager
def block_network(allowed_hosts: Collection[str] = LOOPBACK) -> Iterator[None]:
    """Within the block, only `allowed_hosts` (and cassettes) answer requests, in this
    process and in the Python processes started meanwhile.

    Raises (from the refused request):
        NetworkBlockedError: a request, connection or datagram to a host not allowed.
    """
    guard = _Guard(allowed_hosts)
    _start(guard)
    environment = _ChildEnvironment(frozenset.intersection(*_blocks))
    try:
        yield
    finally:
        environment.restore()
        _stop(guard)


def block_from_environment(environ: Mapping[str, str] | None = None) -> bool:
    """Block this process's network for its whole life if `ENV_BLOCK_NETWORK` asks it to.

    Called at start-up by replay's `sitecustomize`; the environment (and so the block)
    passes on to this process's own children. Returns whether a block was started.

    Raises:
        ConfigurationError: the variable is not a JSON list of host names.
    """
    text = (os.environ if environ is None else environ).get(ENV_BLOCK_NETWORK)
    if text is None:
        return False
    try:
        hosts = json.loads(text)
    except ValueError:
        hosts = None
    if not isinstance(hosts, list) or not all(isinstance(host, str) for host in hosts):
        raise ConfigurationError(f"{ENV_BLOCK_NETWORK} must be a JSON list of hosts, not {text!r}")
    if text in _arrived:  # (the start-up hook, then the `multiprocessing` preparation data)
        return True
    _arrived.add(text)
    guard = _Guard(host_names(hosts))
    _start(guard)
    _ChildEnvironment(guard.allowed_hosts)  # for this process's whole life
    return True
