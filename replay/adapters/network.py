"""Blocking the network: requests no cassette handles fail at once, loopback excepted.

Three layers, all idle unless a block is active:

1. The HTTP layer. A router at the bottom of the patch stack refuses every httpx / httpx2
   request that no cassette session took, with an error naming the request.
2. The socket layer. An audit hook (`sys.addaudithook`) refuses the calls that make a
   socket reach a host — `socket.connect` (`connect`, `connect_ex`), `socket.sendto` (UDP,
   and TCP with `MSG_FASTOPEN`), `socket.sendmsg` with an address — of every socket,
   `_socket.socket` used directly included, before any packet leaves. An audit hook cannot
   be removed, so it is installed once and consults the blocks active at the moment.
   Connections opened before the block are refused on reuse (`replay.adapters.reuse`).
3. Child Python processes. While a block is active, `ENV_BLOCK_NETWORK` (the allowed hosts)
   is carried into every Python process started (`replay.run.descendants`: `os.environ` with
   replay's start-up hook first on PYTHONPATH, a `Popen`'s own `env=`, the preparation data
   of `multiprocessing` spawn and forkserver workers), which blocks its own network before
   its first line runs (`block_from_environment`, from `replay.run.site.sitecustomize` or
   the preparation data). The environment is put back as it was when the block ends.

A process blocked from birth (`block_from_environment`) also says each refusal on its
stderr as it happens, since the program may catch the error and go on.

Not covered: programs that are not Python (curl, node), Python started with -S, -E or -I
(no start-up hook), C extensions that make their own socket system calls without audit
events (uvloop, pycurl, grpc), writes to a descriptor connected before the block that
bypass the socket objects (`replay.adapters.reuse`), name resolution (a DNS lookup of a
refused host may still reach the resolver: the connection after it is refused), and
processes started by C code. A `multiprocessing` forkserver started during the block stays
blocked after it.

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
from typing import Any, NoReturn
from urllib.parse import urlsplit

from replay.adapters import patch, reuse
from replay.adapters.routes import routers_here
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
    "program_block",
    "refuse_unless_reachable",
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
            # (sent by a session recording it: its own, not a host it lets go live)
            sessions: list[Any] = [r for r in routers_here() if hasattr(r, "ignores")]
            cassette = (
                str(sessions[-1].path) if sessions and not sessions[-1].ignores(url) else None
            )
            _refuse(NetworkBlockedError(method=request.method, url=_shown(url), cassette=cassette))

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
    port = address[1] if len(address) > 1 else "?"
    _refuse_host(host, _VERBS[event], f"{host}:{port}")


def _allowed_now(host: str | None) -> bool:
    """Whether every active block allows `host`."""
    blocks = _blocks
    return all(host in allowed or is_allowed(host, allowed) for allowed in blocks)


def _refuse_host(host: str | None, method: str, url: str) -> None:
    """Refuse `method` to `url` (naming the library that sent it) unless `host` is allowed."""
    __tracebackhide__ = hide_for_replay_errors
    if _allowed_now(host):
        return
    shown = _shown(url) if "://" in url else url
    _refuse(NetworkBlockedError(method=method, url=shown, library=reuse.caller_library()))


def refuse_unless_reachable(method: str, url: str) -> None:
    """Refuse a request of a routed client (requests, aiohttp) about to reach the network
    if a block is active that does not allow its host; nothing to do with no block.

    Raises:
        NetworkBlockedError: a block does not allow the host of `url`.
    """
    __tracebackhide__ = hide_for_replay_errors
    if not _blocks:
        return
    host = urlsplit(url).hostname
    if not _allowed_now(host):
        _refuse(NetworkBlockedError(method=method, url=_shown(url)))


def _shown(url: str) -> str:
    from replay.redact.redactor import Redactor  # (a refusal only)

    return Redactor().url(url)  # the message never echoes a secret


#: Whether a refusal is also written on stderr as it happens (processes blocked from birth,
#: whose program may catch the error and go on: `block_from_environment`).
_report = False
_reporting = threading.local()


def _refuse(error: NetworkBlockedError) -> NoReturn:
    """Raise `error` (without the frames that made it), written on stderr first if asked."""
    __tracebackhide__ = hide_for_replay_errors
    if _report and not getattr(_reporting, "on", False):
        _reporting.on = True  # (stderr may be a socket itself)
        try:
            sys.stderr.write(f"replay: {error}\n")
            sys.stderr.flush()
        except (OSError, ValueError, AttributeError):
            pass  # no stderr: the program still gets the error
        finally:
            _reporting.on = False
    raise_bare(error)


def _start(guard: _Guard) -> None:
    global _blocks, _hook_installed
    with _blocks_lock:
        if not _hook_installed:
            sys.addaudithook(_audit)
            _hook_installed = True
        _blocks = (*_blocks, guard.allowed_hosts)
        reuse.start(_refuse_host)
    patch.install_bottom(guard)


def _stop(guard: _Guard) -> None:
    global _blocks
    patch.uninstall(guard)
    with _blocks_lock:
        index = _blocks.index(guard.allowed_hosts)
        _blocks = (*_blocks[:index], *_blocks[index + 1 :])
        if not _blocks:
            reuse.stop()


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


def program_block(
    block: bool,
    allowed_hosts: Collection[str] | None,
    ignore_hosts: Collection[str] = (),
    ignore_localhost: bool = False,
    *,
    replay_only: bool = False,
) -> dict[str, str]:
    """The variables that make a Python program started with replay's start-up hook (first
    on PYTHONPATH, as `replay run` / `replay record` put it) block its network for its whole
    life (`block_from_environment`), each refusal also said on its stderr; none if neither
    `block` nor `replay_only` (a program that must not reach the network at all).

    The hosts it may still reach: `allowed_hosts` (None: loopback, or none if
    `replay_only`), and those its cassette session lets go live (`ignore_hosts`, loopback
    with `ignore_localhost`).

    Raises:
        ConfigurationError: `allowed_hosts` without a block.
    """
    if not (block or replay_only):
        if allowed_hosts:
            raise ConfigurationError("--allow-host needs --block-network (or run --mode none)")
        return {}
    default = frozenset[str]() if replay_only else LOOPBACK
    hosts = default if allowed_hosts is None else host_names(allowed_hosts)
    hosts |= host_names(ignore_hosts) | (LOOPBACK if ignore_localhost else frozenset())
    return {ENV_BLOCK_NETWORK: json.dumps(sorted(hosts))}


def block_from_environment(environ: Mapping[str, str] | None = None) -> bool:
    """Block this process's network for its whole life if `ENV_BLOCK_NETWORK` asks it to.

    Called at start-up by replay's `sitecustomize`; the environment (and so the block)
    passes on to this process's own children. Each refusal is also written on stderr as it
    happens (one line), since the program may catch it. Returns whether a block was started.

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
    global _report
    _report = True
    guard = _Guard(host_names(hosts))
    _start(guard)
    _ChildEnvironment(guard.allowed_hosts)  # for this process's whole life
    return True
