"""Network facts and probes for the launcher's preflight; runs in the launcher on every node,
never imports torch.

Facts: name resolution (the interfaces and routes are ``ddpcheck.node.interfaces``).
Probes: a TCP connect to the rendezvous endpoint (with a grace period while
the host node comes up) and a bind check of the rendezvous port on the host node.
The describe_* functions are pure: they turn a probe result into a catalogue Problem or None.
"""

from __future__ import annotations

import errno
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import psutil

from ddpcheck.diagnoses import Problem, register
from ddpcheck.node.interfaces import (
    is_loopback,
)

OUTCOMES = ("ok", "refused", "timeout", "no-route", "unreachable", "resolve-failed", "error")


ENDPOINT_REFUSED = register(
    "endpoint-refused", "nothing is listening on the rendezvous endpoint",
    "the host node (node rank 0) has not started or has exited, or --rdzv-endpoint / "
    "--node-rank point at a machine that is not hosting the rendezvous",
    "start the host node first; pass the same --rdzv-endpoint on every node and --node-rank 0 "
    "on the machine that owns that address")
ENDPOINT_UNREACHABLE = register(
    "endpoint-unreachable", "connections to the rendezvous endpoint time out",
    "no reply at all: a firewall (iptables/nftables, cloud security group) drops the packets, "
    "or the address is on a network this node cannot reach",
    "open the port between the nodes, or use an --rdzv-endpoint address on a network all "
    "nodes reach")
ENDPOINT_NO_ROUTE = register(
    "endpoint-no-route", "this node has no route to the rendezvous endpoint",
    "the address is on a network this node is not connected to, or the host does not answer "
    "on its subnet (down, wrong address, or a firewall rejecting with host-unreachable)",
    "use an --rdzv-endpoint address on a network every node has (see `ip -o addr`), "
    "or fix the routing")
ENDPOINT_UNRESOLVABLE = register(
    "endpoint-unresolvable", "the rendezvous host name does not resolve",
    "the name is misspelled, or not in DNS / /etc/hosts on this node",
    "use the host's IP address, or a name every node resolves")
ENDPOINT_CONNECT_FAILED = register(
    "endpoint-connect-failed", "connecting to the rendezvous endpoint failed",
    "a local firewall (EPERM from an OUTPUT rule), a bad source address, or another socket error",
    "check this node's firewall rules and the address named")
ENDPOINT_PORT_IN_USE = register(
    "endpoint-port-in-use", "the rendezvous port is already in use on the host node",
    "another job, or a leftover torchrun / TCPStore from an earlier run, listens on it",
    "stop the process holding the port, or pick another port in --rdzv-endpoint")
ENDPOINT_BIND_FAILED = register(
    "endpoint-bind-failed", "the host node cannot listen on the rendezvous endpoint",
    "the address is not one of this node's addresses, or the port needs privileges",
    "run the host node (--node-rank 0) on the machine that owns the --rdzv-endpoint address, "
    "with a port >= 1024")


# --- resolution -----------------------------------------------------------------------------
@dataclass(frozen=True)
class Resolution:
    host: str
    addresses: tuple[str, ...] = ()
    error: str = ""

    @property
    def ok(self) -> bool:
        return bool(self.addresses)

    @property
    def loopback(self) -> bool:
        return self.ok and all(is_loopback(a) for a in self.addresses)


# glibc retries each nameserver (resolv.conf "timeout:5 attempts:2" by default), so a dead DNS
# server holds getaddrinfo for 10 s per server; ddpcheck's own waits must not inherit that.
RESOLVE_DEADLINE_S = 10.0


def resolve(host: str, deadline_s: float = RESOLVE_DEADLINE_S) -> Resolution:
    """All IPv4 addresses of host (getaddrinfo, AF_INET), or the resolver's error text.

    getaddrinfo cannot be interrupted, so it runs in a daemon thread and is given up on after
    ``deadline_s``: the answer is then an error saying the resolver did not answer.
    """
    answer: list[Resolution] = []
    worker = threading.Thread(target=lambda: answer.append(_getaddrinfo(host)), daemon=True,
                              name=f"resolve {host}")
    worker.start()
    worker.join(deadline_s)
    if answer:
        return answer[0]
    return Resolution(host, (), f"the resolver did not answer within {deadline_s:g} s (DNS "
                                "server slow or unreachable: check /etc/resolv.conf)")


def _getaddrinfo(host: str) -> Resolution:
    try:
        infos = socket.getaddrinfo(host, None, socket.AF_INET, socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        return Resolution(host, (), str(exc))
    addrs = tuple(dict.fromkeys(str(info[4][0]) for info in infos))
    return Resolution(host, addrs, "" if addrs else "no IPv4 address")


# --- connect --------------------------------------------------------------------------------
@dataclass(frozen=True)
class ConnectResult:
    outcome: str  # one of OUTCOMES
    address: str = ""  # the IP tried ("" if resolution failed)
    elapsed: float = 0.0  # seconds, over all attempts
    error: str = ""  # errno / resolver text
    attempts: int = 1

    @property
    def ok(self) -> bool:
        return self.outcome == "ok"


_ERRNO_OUTCOME = {errno.ECONNREFUSED: "refused", errno.ETIMEDOUT: "timeout",
                  errno.EHOSTUNREACH: "no-route", errno.ENETUNREACH: "unreachable"}


def tcp_connect(host: str, port: int, timeout: float,
                source_addr: str | None = None) -> ConnectResult:
    """One TCP connect to host:port (first IPv4 address), optionally from source_addr."""
    start = time.monotonic()
    res = resolve(host)
    if not res.ok:
        return ConnectResult("resolve-failed", "", time.monotonic() - start, res.error)
    address = res.addresses[0]
    outcome, error = _connect(address, port, timeout, source_addr)
    return ConnectResult(outcome, address, time.monotonic() - start, error)


def _connect(address: str, port: int, timeout: float,
             source_addr: str | None) -> tuple[str, str]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        if source_addr:
            sock.bind((source_addr, 0))
        sock.connect((address, port))
        return "ok", ""
    except socket.timeout:
        return "timeout", f"no reply within {timeout:g} s"
    except OSError as exc:
        code = exc.errno or 0
        return _ERRNO_OUTCOME.get(code, "error"), _errno_text(exc)
    finally:
        sock.close()


def _errno_text(exc: OSError) -> str:
    name = errno.errorcode.get(exc.errno or 0, "")
    text = exc.strerror or str(exc)
    return f"{name}: {text}" if name else text


def connect_with_grace(host: str, port: int, timeout: float, grace: float,
                       source_addr: str | None = None, interval: float = 0.5) -> ConnectResult:
    """tcp_connect, retrying while refused for up to `grace` s (the host node may still start).

    Anything but "refused" (ok, timeout, no-route, ...) returns at once.
    """
    start = time.monotonic()
    attempts = 0
    while True:
        attempts += 1
        result = tcp_connect(host, port, timeout, source_addr)
        left = grace - (time.monotonic() - start)
        if result.outcome != "refused" or left <= 0:
            break
        time.sleep(min(interval, left))
    return ConnectResult(result.outcome, result.address, time.monotonic() - start,
                         result.error, attempts)


# --- bind -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class BindResult:
    ok: bool
    port: int
    addr: str
    error: str = ""
    errno_name: str = ""
    holder_pid: int | None = None
    holder_name: str = ""
    holder_cmdline: str = ""  # only to recognise a second ddpcheck; never shown (secrets)
    holder_user: str = ""
    holder_exe: str = ""

    @property
    def holder(self) -> str:
        """'pid 123 (user alice, /usr/bin/python3.11)', or '' if unknown.

        The command line is left out: it can carry tokens and passwords.
        """
        if self.holder_pid is None:
            return ""
        what = ", ".join(x for x in (f"user {self.holder_user}" if self.holder_user else "",
                                     self.holder_exe or self.holder_name) if x)
        return f"pid {self.holder_pid}" + (f" ({what})" if what else "")


def bind_check(port: int, addr: str = "0.0.0.0") -> BindResult:
    """Try to bind addr:port as torch's TCPStore does (SO_REUSEADDR); name the holder if in use."""
    family = socket.AF_INET6 if ":" in addr else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((addr, port))
        return BindResult(True, port, addr)
    except OSError as exc:
        name = errno.errorcode.get(exc.errno or 0, "")
        pid, pname, cmd, user, exe = (_port_holder(port) if exc.errno == errno.EADDRINUSE
                                      else (None, "", "", "", ""))
        return BindResult(False, port, addr, _errno_text(exc), name, pid, pname, cmd, user, exe)
    finally:
        sock.close()


def _port_holder(port: int) -> tuple[int | None, str, str, str, str]:
    """(pid, name, cmdline, user, executable) of the process listening on TCP port."""
    try:
        conns = psutil.net_connections(kind="tcp")
    except (psutil.Error, OSError):
        return None, "", "", "", ""
    mine = [c for c in conns if c.laddr and c.laddr.port == port and c.pid is not None]
    mine.sort(key=lambda c: c.status != psutil.CONN_LISTEN)
    if not mine:
        return None, "", "", "", ""
    pid = int(mine[0].pid)
    try:
        proc = psutil.Process(pid)
        with proc.oneshot():
            return pid, proc.name(), " ".join(proc.cmdline()), _safe(proc.username), \
                _safe(proc.exe)
    except (psutil.Error, OSError):
        return pid, "", "", "", ""


def _safe(getter: Callable[[], str]) -> str:
    try:
        return getter()
    except (psutil.Error, OSError, KeyError):  # KeyError: a uid with no passwd entry
        return ""


# --- descriptions (pure) --------------------------------------------------------------------
def _target(host: str, port: int, address: str) -> str:
    shown = f" ({address})" if address and address != host else ""
    return f"{host}:{port}{shown}"


def describe_connect(result: ConnectResult, host: str, port: int, node: str) -> Problem | None:
    """The Problem a failed connect from `node` to host:port means, or None if it succeeded."""
    if result.ok:
        return None
    where = f"TCP connect to {_target(host, port, result.address)}"
    secs = f"{result.elapsed:.1f} s"
    outcome = result.outcome
    if outcome == "refused":
        tries = f" (retried for {secs})" if result.attempts > 1 else ""
        diag, what = ENDPOINT_REFUSED, f"refused: nothing listening{tries}"
    elif outcome == "timeout":
        diag, what = ENDPOINT_UNREACHABLE, f"timed out after {secs} (no reply: packets dropped)"
    elif outcome in ("no-route", "unreachable"):
        diag, what = ENDPOINT_NO_ROUTE, f"failed: {result.error or outcome}"
    elif outcome == "resolve-failed":
        return ENDPOINT_UNRESOLVABLE.problem(
            f"cannot resolve {host} on node {node}: {result.error}", hosts=(node,))
    else:
        diag, what = ENDPOINT_CONNECT_FAILED, f"failed: {result.error or outcome}"
    fix = f"open TCP port {port} between the nodes, or use an --rdzv-endpoint address on a " \
          "network all nodes reach" if diag is ENDPOINT_UNREACHABLE else ""
    return diag.problem(f"{where} {what} from node {node}", fix=fix, hosts=(node,))


def describe_bind(result: BindResult, node: str) -> Problem | None:
    """The Problem a failed bind of the rendezvous port on the host `node` means, or None."""
    if result.ok:
        return None
    target = f"{result.addr}:{result.port}"
    if result.errno_name == "EADDRINUSE":
        holder = result.holder or "a process ddpcheck cannot see (run as root, or " \
                                  f"`ss -ltnp 'sport = :{result.port}'`)"
        fix = (f"stop {result.holder} or " if result.holder else "free the port or ") + \
            f"pick another port, e.g. --rdzv-endpoint HOST:{result.port + 1}"
        return ENDPOINT_PORT_IN_USE.problem(
            f"cannot listen on {target} on node {node}: in use by {holder}",
            fix=fix, hosts=(node,))
    cause = ""
    if result.errno_name == "EADDRNOTAVAIL":
        cause = f"{result.addr} is not an address of node {node}: this node is not the host"
    elif result.errno_name == "EACCES":
        cause = f"ports below 1024 need root; {result.port} is privileged"
    return ENDPOINT_BIND_FAILED.problem(
        f"cannot listen on {target} on node {node}: {result.error}", cause=cause, hosts=(node,))

