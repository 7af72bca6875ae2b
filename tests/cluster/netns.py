"""Simulated multi-host clusters built from Linux network namespaces.

Role: test-side library for ``tests/cluster``. It turns this one machine into
several "hosts" so that cluster tests can run real multi-process programs
(torchrun, gloo worlds, ddpcheck itself) on each host and inject network
faults between them. It is never imported by the ``ddpcheck`` package and is
not shipped; it runs only inside the pytest process on the test machine, as
root.

Topology of ``Cluster(n)`` (all names derive from ``<prefix>-<pid>-<seq>``,
where ``pid`` is the creating process, so leftovers of crashed runs can be
recognised and swept; ``X`` is derived from pid and seq)::

    netns <id>-br : bridge br0 (cluster net), br1 (extra net, optional),
                    bridge-side veth ends h<i>e0 / h<i>e1, no IP addresses
    netns <id>-h<i>: lo, eth0 = 10.213.X.(i+1)/24 (veth peer of h<i>e0 on br0)
                     eth1 = 10.214.X.(i+1)/24 (optional, on br1)
                     dummy0 = 10.215.X.(i+1)/24 (optional, reaches nobody)

``Cluster(n, topology="mesh")`` (n <= 16) replaces br0/eth0 by a full mesh
of point-to-point veth pairs, one per pair of hosts, so that every pair's
traffic has a link of its own that can be shaped alone::

    netns <id>-h<i>: lo = 127.0.0.1/8 + host address H_i = 10.216.X.(i+1)/32
                     l<j> (for every other host j) = 10.217.X.a/31, veth to
                         l<i> in host j (10.217.X.a^1/31); link k (pairs
                         (i<j) in order) uses a = 2k+2 on the i side
                     route H_j/32 via the peer's l<i> address dev l<j> src H_i
    netns <id>-br : no br0; only br1 (extra net) and dummy fallbacks

The host address is the only address a host's name resolves to; it sits on
``lo`` (no ``dummy`` links are needed) and Linux accepts it on any
interface, so a server bound to 0.0.0.0 or to H_i is reachable at H_i from
every other host, and outgoing connections to H_j (bound to H_i or not) use
H_i as source. Forwarding stays off (no transit through a third host) and
the strict reverse-path check passes, since the route back to H_j is the
link the packet came in on. Mesh links have IPv6 address generation off, so
their byte counters only see the cluster's own IPv4 traffic.

There is no uplink and no default route in any namespace, so traffic can
only go to loopback or to the other namespaces of the same cluster.
``/etc/netns/<ns>/hosts`` (bind-mounted over ``/etc/hosts`` by
``ip netns exec``) makes every host resolve every host name, its own
included, to its host address (eth0's, or H_i in a mesh).

Every command a Host starts runs as::

    ip netns exec NS unshare --uts sh -c 'hostname "$1" && shift && exec "$@"' sh NAME argv...

in its own session, so ``socket.gethostname()`` returns the host name and the
whole tree can be killed. Cleanup (``Cluster.close``, the context manager's
exit, an atexit hook, and ``sweep_stale`` for crashed runs) kills every tracked
process group, then every process still inside the namespaces, then deletes
the namespaces (which destroys veths and bridges) and ``/etc/netns/<ns>``.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import itertools
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Union

__all__ = [
    "Cluster",
    "Host",
    "NetnsError",
    "available",
    "burst_for_rate",
    "list_namespaces",
    "parse_rate",
    "sweep_stale",
]

NETNS_DIRS = (Path("/run/netns"), Path("/var/run/netns"))
ETC_NETNS = Path("/etc/netns")

#: First two octets of the cluster network, extra network and dummy network.
CLUSTER_NET = "10.213"
EXTRA_NET = "10.214"
DUMMY_NET = "10.215"
#: Mesh topology: host addresses (on lo, /32) and point-to-point links (/31 each).
HOST_NET = "10.216"
LINK_NET = "10.217"
#: Largest mesh: 16 hosts = 120 links = 240 link addresses in one /24.
MESH_MAX_HOSTS = 16
TOPOLOGIES = ("bridge", "mesh")
#: The address a host's own name maps to in the "Debian style" fault variant.
LOOPBACK_SELF_ADDR = "127.0.1.1"

_PREFIX_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,15}$")
_HOSTNAME_RE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$")
_IFNAME_RE = re.compile(r"^[A-Za-z0-9_.-]{1,15}$")

Argv = Union[str, Sequence[str]]
Port = Union[int, str]


class NetnsError(RuntimeError):
    """A namespace/bridge/firewall command failed."""


# --------------------------------------------------------------------------- helpers


def _which(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    for d in ("/usr/sbin", "/sbin", "/usr/bin", "/bin"):
        cand = os.path.join(d, name)
        if os.access(cand, os.X_OK):
            return cand
    return None


@functools.cache
def _tool(name: str) -> str:
    path = _which(name)
    if path is None:
        raise NetnsError(f"{name} not found")
    return path


def _cmd(
    argv: Sequence[str], *, check: bool = True, timeout: float = 30.0
) -> subprocess.CompletedProcess:
    """Run an administrative command (ip/tc/iptables) in the root context."""
    argv = [str(a) for a in argv]
    try:
        res = subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except FileNotFoundError as exc:
        raise NetnsError(f"{argv[0]} not found") from exc
    if check and res.returncode != 0:
        detail = res.stderr.strip() or res.stdout.strip()
        raise NetnsError(f"`{shlex.join(argv)}` failed ({res.returncode}): {detail}")
    return res


def _ip(*args: str, ns: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
    argv = [_tool("ip")]
    if ns is not None:
        argv += ["-n", ns]
    return _cmd(argv + list(args), check=check)


def _pid_alive(pid: int) -> bool:
    """True if ``pid`` exists and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as fh:
            state = fh.read().rsplit(")", 1)[1].split()[0]
        return state not in ("Z", "X")
    except (OSError, IndexError):
        return True


def list_namespaces(prefix: str | None = None) -> list[str]:
    """Names of existing network namespaces (optionally only ``<prefix>-*``)."""
    names: set[str] = set()
    for d in NETNS_DIRS:
        with contextlib.suppress(OSError):
            names.update(os.listdir(d))
    if not names:
        res = _cmd([_tool("ip"), "netns", "list"], check=False)
        names.update(line.split()[0] for line in res.stdout.splitlines() if line.strip())
    if prefix is not None:
        names = {n for n in names if n.startswith(prefix + "-")}
    return sorted(names)


def _ns_exists(ns: str) -> bool:
    return any((d / ns).exists() for d in NETNS_DIRS)


def _ns_pids(ns: str) -> list[int]:
    res = _cmd([_tool("ip"), "netns", "pids", ns], check=False)
    me = os.getpid()
    return [int(tok) for tok in res.stdout.split() if tok.isdigit() and int(tok) != me]


def _kill_ns_pids(ns: str, rounds: int = 40) -> None:
    """SIGKILL every process inside ``ns`` until none is left (best effort)."""
    for _ in range(rounds):
        pids = _ns_pids(ns)
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.05)


def _remove_ns(ns: str) -> None:
    """Kill everything in ``ns``, delete it and its /etc/netns directory."""
    if _ns_exists(ns):
        _kill_ns_pids(ns)
        _ip("netns", "del", ns, check=False)
    shutil.rmtree(ETC_NETNS / ns, ignore_errors=True)


@contextlib.contextmanager
def _signals_deferred() -> Iterator[None]:
    """Hold SIGINT/SIGTERM during cleanup so Ctrl-C cannot leave half a cluster.

    Only possible in the main thread; the pending signal fires right after.
    """
    if threading.current_thread() is not threading.main_thread() or not hasattr(
        signal, "pthread_sigmask"
    ):
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def sweep_stale(prefix: str = "ddpc") -> list[str]:
    """Remove namespaces and /etc/netns dirs of earlier runs whose creator died.

    Names look like ``<prefix>-<creator pid>-...``; those whose creator pid no
    longer exists have their processes killed and are deleted. Returns the
    removed namespace names. Live runs (including concurrent ones) are left
    alone.
    """
    _check_prefix(prefix)
    pat = re.compile(rf"^{re.escape(prefix)}-(\d+)-")
    removed: list[str] = []
    for ns in list_namespaces(prefix):
        m = pat.match(ns)
        if m and not _pid_alive(int(m.group(1))):
            _remove_ns(ns)
            removed.append(ns)
    with contextlib.suppress(OSError):
        for entry in ETC_NETNS.iterdir():
            m = pat.match(entry.name)
            if m and not _pid_alive(int(m.group(1))) and not _ns_exists(entry.name):
                shutil.rmtree(entry, ignore_errors=True)
    return removed


def _check_prefix(prefix: str) -> None:
    # No '-' allowed: sweep_stale("ddpc") must never parse another prefix's names.
    if not _PREFIX_RE.match(prefix):
        raise ValueError(f"prefix must match {_PREFIX_RE.pattern} (no '-'), got {prefix!r}")


@functools.cache
def available() -> tuple[bool, str]:
    """Whether clusters can be built here: ``(True, "")`` or ``(False, reason)``.

    Checks root, the needed tools, and really creates a throw-away namespace
    with a bridge, a veth, an iptables listing, a tc listing and a UTS unshare.
    The result is cached for the process.
    """
    if not sys.platform.startswith("linux"):
        return False, "network namespaces need Linux"
    if os.geteuid() != 0:
        return False, "building network namespaces needs root"
    for tool in ("ip", "tc", "iptables", "unshare", "hostname"):
        if _which(tool) is None:
            return False, f"{tool} not found (install iproute2 / iptables / util-linux / hostname)"
    if not os.path.exists("/bin/sh"):
        return False, "/bin/sh not found"
    ns = f"ddpc-{os.getpid()}-probe"
    ip = _tool("ip")
    steps: list[tuple[str, list[str]]] = [
        ("ip netns add", [ip, "netns", "add", ns]),
        ("bridge", [ip, "-n", ns, "link", "add", "br0", "type", "bridge"]),
        ("veth", [ip, "-n", ns, "link", "add", "v0", "type", "veth", "peer", "name", "v1"]),
        ("iptables", [ip, "netns", "exec", ns, _tool("iptables"), "-w", "-S"]),
        ("tc", [_tool("tc"), "-n", ns, "qdisc", "show"]),
        ("unshare --uts", [ip, "netns", "exec", ns, _tool("unshare"), "--uts", "/bin/true"]),
    ]
    try:
        for what, argv in steps:
            try:
                _cmd(argv, timeout=20)
            except (NetnsError, subprocess.TimeoutExpired, OSError) as exc:
                return False, f"{what} does not work here: {exc}"
    finally:
        _remove_ns(ns)
    return True, ""


# --------------------------------------------------------------------------- rates

_RATE_UNITS = {
    "": 1.0, "bit": 1.0,
    "kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "tbit": 1e12,
    "kibit": 1024.0, "mibit": 1024.0**2, "gibit": 1024.0**3, "tibit": 1024.0**4,
    "bps": 8.0, "kbps": 8e3, "mbps": 8e6, "gbps": 8e9, "tbps": 8e12,
    "kibps": 8 * 1024.0, "mibps": 8 * 1024.0**2, "gibps": 8 * 1024.0**3, "tibps": 8 * 1024.0**4,
}


def parse_rate(rate: str | float) -> float:
    """Rate in bits/s from a tc-style string (``"100mbit"``, ``"1gbit"``, ``"10mbps"``
    = 10 MB/s, bare number = bit/s) or a number of bits/s."""
    if isinstance(rate, (int, float)):
        bits = float(rate)
    else:
        m = re.match(r"^\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*$", rate)
        if not m or m.group(2).lower() not in _RATE_UNITS:
            raise ValueError(f"bad rate {rate!r} (use e.g. '100mbit', '1gbit', '500kbit')")
        bits = float(m.group(1)) * _RATE_UNITS[m.group(2).lower()]
    if bits <= 0:
        raise ValueError(f"rate must be positive, got {rate!r}")
    return bits


def burst_for_rate(rate: str | float) -> int:
    """tbf burst in bytes: 10 ms worth of traffic, at least 32kbit (4000 B)."""
    return max(int(parse_rate(rate) / 8 / 100), 4000)


# --------------------------------------------------------------------------- Host


class Host:
    """One simulated machine: a network namespace plus a hostname.

    Attributes: ``name`` (hostname), ``ns`` (namespace), ``addr`` (the
    address every host resolves this one's name to: eth0's, or in a mesh the
    host address H_i on lo), ``index``, ``extra_addr`` (eth1, if the cluster
    has ``extra_net``), ``dummy_addr`` (dummy0, if added), ``cluster``.
    """

    def __init__(self, cluster: Cluster, index: int, name: str, ns: str, addr: str) -> None:
        self.cluster = cluster
        self.index = index
        self.name = name
        self.ns = ns
        self.addr = addr
        self.extra_addr: str | None = None
        self.dummy_addr: str | None = None
        self.self_loopback = False
        #: interface name inside the host -> (other end as (namespace, device)
        #: or None, address): the bridge-side veth, or the peer host's l<i>
        self._ifaces: dict[str, tuple[tuple[str, str] | None, str]] = {}
        #: mesh only: peer index -> (link device l<j>, peer's address on the link)
        self._links: dict[int, tuple[str, str]] = {}

    def __repr__(self) -> str:
        return f"Host({self.name!r}, ns={self.ns!r}, addr={self.addr!r})"

    # ---- introspection

    @property
    def ifaces(self) -> dict[str, str]:
        """Interface name -> IPv4 address of the interfaces the cluster made
        (``eth0`` or the mesh links ``l<j>``, maybe ``eth1``, ``dummy0``;
        never ``lo``, which holds a mesh host's :attr:`addr`)."""
        return {name: addr for name, (_, addr) in self._ifaces.items()}

    @property
    def uplinks(self) -> list[str]:
        """The interfaces that lead to the other hosts: ``["eth0"]``, or in a
        mesh every ``l<j>`` (by peer index)."""
        if self.cluster.topology == "mesh":
            return [dev for _, (dev, _) in sorted(self._links.items())]
        return ["eth0"]

    def link_dev(self, peer: Host | int | str) -> str:
        """Mesh only: the interface of this host on its link to ``peer``
        (a Host, index or name), e.g. ``"l2"``."""
        other = self._peer(peer)
        return self._links[other.index][0]

    def byte_counters(self, devs: Iterable[str] | None = None) -> dict[str, tuple[int, int]]:
        """Interface -> ``(rx_bytes, tx_bytes)`` from the kernel, for ``devs``
        (default: every interface of :attr:`ifaces`)."""
        want = list(self._ifaces) if devs is None else list(devs)
        res = _ip("-s", "-j", "link", "show", ns=self.ns)
        stats = {}
        for link in json.loads(res.stdout or "[]"):
            s64 = link.get("stats64") or link.get("stats") or {}
            stats[link["ifname"]] = (int(s64["rx"]["bytes"]), int(s64["tx"]["bytes"]))
        missing = [d for d in want if d not in stats]
        if missing:
            raise ValueError(f"{self.name} has no interface {missing} (has {sorted(stats)})")
        return {d: stats[d] for d in want}

    def pids(self) -> list[int]:
        """Pids of every process currently inside this host's namespace."""
        return _ns_pids(self.ns)

    # ---- running programs

    def command(self, argv: Argv) -> list[str]:
        """The full wrapper argv that runs ``argv`` as this host (not tracked:
        prefer :meth:`popen`). A string ``argv`` is run with ``/bin/sh -c``."""
        if isinstance(argv, str):
            argv = ["/bin/sh", "-c", argv]
        argv = [os.fspath(a) for a in argv]
        if not argv:
            raise ValueError("empty argv")
        return [
            _tool("ip"), "netns", "exec", self.ns,
            _tool("unshare"), "--uts",
            "/bin/sh", "-c", f'{_tool("hostname")} "$1" && shift && exec "$@"', "sh", self.name,
            *argv,
        ]

    def popen(
        self, argv: Argv, env: Mapping[str, str | None] | None = None, *, inherit_env: bool = True,
        **kw: Any,
    ) -> subprocess.Popen:
        """Start ``argv`` on this host; returns the Popen (its pid is the program's pid).

        ``env`` is merged over ``os.environ`` (a ``None`` value unsets a
        variable); pass ``inherit_env=False`` to start from an empty
        environment. stdin defaults to /dev/null. The process gets its own
        session (``start_new_session=True``, cannot be overridden) and is
        tracked: the cluster kills it (and its whole namespace) on close.
        """
        self.cluster._require_running()
        full_env = dict(os.environ) if inherit_env else {}
        for key, val in (env or {}).items():
            if val is None:
                full_env.pop(key, None)
            else:
                full_env[key] = str(val)
        kw.pop("start_new_session", None)
        kw.pop("process_group", None)
        kw.setdefault("stdin", subprocess.DEVNULL)
        proc = subprocess.Popen(self.command(argv), env=full_env, start_new_session=True, **kw)
        self.cluster._track(proc, self.ns)
        return proc

    def run(
        self, argv: Argv, timeout: float | None = 60.0, env: Mapping[str, str | None] | None = None,
        *, check: bool = False, input: str | bytes | None = None, **kw: Any,
    ) -> subprocess.CompletedProcess:
        """Run ``argv`` on this host and wait. stdout/stderr are captured as
        text unless overridden. On timeout the process group and everything
        it left in the namespace's session is SIGKILLed and
        ``subprocess.TimeoutExpired`` is raised (with the output so far)."""
        kw.setdefault("stdout", subprocess.PIPE)
        kw.setdefault("stderr", subprocess.PIPE)
        if "text" not in kw and "universal_newlines" not in kw and "encoding" not in kw:
            kw["text"] = True
        if input is not None:
            kw["stdin"] = subprocess.PIPE
        proc = self.popen(argv, env=env, **kw)
        shown = argv if isinstance(argv, str) else list(argv)
        try:
            out, err = proc.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_tree(proc)
            try:
                out, err = proc.communicate(timeout=5)
            except subprocess.TimeoutExpired:  # an orphan still holds the pipes
                out = err = None
                _close_pipes(proc)
                proc.wait()
            raise subprocess.TimeoutExpired(shown, timeout or 0.0, out, err) from None
        except BaseException:
            _kill_tree(proc)
            proc.wait()
            raise
        res = subprocess.CompletedProcess(shown, proc.returncode, out, err)
        if check:
            res.check_returncode()
        return res

    def popen_python(self, code: str, *args: str, **kw: Any) -> subprocess.Popen:
        """:meth:`popen` of ``sys.executable -c code args...``."""
        return self.popen([sys.executable, "-c", code, *args], **kw)

    def run_python(self, code: str, *args: str, **kw: Any) -> subprocess.CompletedProcess:
        """:meth:`run` of ``sys.executable -c code args...``."""
        return self.run([sys.executable, "-c", code, *args], **kw)

    def exec_admin(self, argv: Sequence[str], *, check: bool = True) -> subprocess.CompletedProcess:
        """Run an administrative command in the namespace (no UTS namespace,
        not tracked, output captured); raises NetnsError on failure if ``check``."""
        return _cmd([_tool("ip"), "netns", "exec", self.ns, *argv], check=check)

    def kill_all(self) -> None:
        """SIGKILL every process inside this host (tracked or not)."""
        self.cluster._kill_tracked(lambda p: p in self.cluster._procs_by_ns.get(self.ns, ()))
        _kill_ns_pids(self.ns)

    # ---- name resolution

    def set_self_loopback(self, on: bool = True) -> None:
        """Make this host resolve its own name to 127.0.1.1 (Debian default,
        a classic gloo/NCCL misconfiguration) or back to its host address.
        Other hosts keep resolving it to that. Affects running processes too
        (the hosts file is rewritten in place)."""
        self.self_loopback = on
        self.cluster._write_hosts_file(self)

    # ---- interfaces

    def add_dummy(self, name: str = "dummy0", addr: str | None = None) -> str:
        """Add an up interface ``name`` with ``addr`` (default
        ``10.215.X.(i+1)/24``) that reaches no other host. Uses a ``dummy``
        link, or where the kernel has none a veth whose peer sits unattached
        in the bridge namespace. Returns the address (without prefix length)."""
        if not _IFNAME_RE.match(name) or name in self._ifaces:
            raise ValueError(f"bad or duplicate interface name {name!r}")
        cidr = addr or f"{self.cluster.dummy_prefix}.{self.index + 1}/24"
        if "/" not in cidr:
            cidr += "/24"
        peer: tuple[str, str] | None = None
        if _ip("link", "add", name, "type", "dummy", ns=self.ns, check=False).returncode != 0:
            peer = (self.cluster.bridge_ns, f"h{self.index}d{len(self._ifaces)}")
            _ip("link", "add", name, "type", "veth", "peer", "name", peer[1],
                "netns", peer[0], ns=self.ns)
            _ip("link", "set", peer[1], "up", ns=peer[0])
        _ip("addr", "add", cidr, "dev", name, ns=self.ns)
        _ip("link", "set", name, "up", ns=self.ns)
        plain = cidr.split("/")[0]
        self._ifaces[name] = (peer, plain)
        if name == "dummy0":
            self.dummy_addr = plain
        return plain

    # ---- fault injection

    def iptables(self, *args: str) -> subprocess.CompletedProcess:
        """Run ``iptables -w ARGS`` inside this host."""
        return self.exec_admin([_tool("iptables"), "-w", *args])

    def drop_port(self, port: Port, proto: str = "tcp") -> None:
        """Silently drop incoming ``proto`` packets to ``port`` (int or
        ``"lo:hi"`` range) arriving from the network (loopback is exempt), so
        connects from other hosts time out. Inserted first, so it wins over
        :meth:`drop_all_tcp_except`."""
        if proto not in ("tcp", "udp"):
            raise ValueError(f"proto must be tcp or udp, got {proto!r}")
        self.iptables("-I", "INPUT", "1", "!", "-i", "lo", "-p", proto, "--dport", _port(port),
                      "-j", "DROP")

    def drop_all_tcp_except(self, ports: Iterable[Port]) -> None:
        """Firewall: incoming TCP from the network is dropped unless it goes
        to one of ``ports`` or belongs to an established connection (so this
        host's own outgoing connections still work). Loopback is exempt."""
        self.iptables("-A", "INPUT", "-i", "lo", "-j", "ACCEPT")
        try:
            self.iptables("-A", "INPUT", "-p", "tcp", "-m", "conntrack",
                          "--ctstate", "ESTABLISHED,RELATED", "-j", "ACCEPT")
        except NetnsError:  # no conntrack: a non-SYN packet is part of a connection
            self.iptables("-A", "INPUT", "-p", "tcp", "!", "--syn", "-j", "ACCEPT")
        for port in ports:
            self.iptables("-A", "INPUT", "-p", "tcp", "--dport", _port(port), "-j", "ACCEPT")
        self.iptables("-A", "INPUT", "-p", "tcp", "-j", "DROP")

    def clear_firewall(self) -> None:
        """Remove every iptables INPUT rule of this host."""
        self.iptables("-F", "INPUT")

    def rate_limit(
        self, rate: str | float = "100mbit", *, dev: str | None = None, direction: str = "both",
        burst: int | None = None, latency: str = "400ms",
    ) -> None:
        """Shape ``dev`` with a tbf qdisc (``tc qdisc replace ... root tbf rate
        R burst B latency 400ms``). ``dev`` defaults to :attr:`uplinks`: eth0,
        or in a mesh every link of this host (a slow node). ``direction``:
        ``"egress"`` shapes what this host sends (qdisc on ``dev``),
        ``"ingress"`` what it receives (qdisc on the other end of the veth:
        the bridge-side port, or the peer host's ``l<i>``), ``"both"``
        (default) both. ``burst`` in bytes defaults to :func:`burst_for_rate`.
        Each interface end has one qdisc: the last limit set on it wins."""
        if direction not in ("egress", "ingress", "both"):
            raise ValueError(f"direction must be egress, ingress or both, got {direction!r}")
        devs = self.uplinks if dev is None else [dev]
        _tbf([t for d in devs for t in self._shaping_targets(d, direction)],
             rate, burst, latency)

    def clear_rate_limit(self, dev: str | None = None) -> None:
        """Remove the shaping of :meth:`rate_limit` from ``dev`` (default
        :attr:`uplinks`), both directions."""
        devs = self.uplinks if dev is None else [dev]
        _untbf([t for d in devs for t in self._shaping_targets(d, "both")])

    def rate_limit_link(
        self, peer: Host | int | str, rate: str | float = "100mbit", *,
        burst: int | None = None, latency: str = "400ms",
    ) -> None:
        """Mesh only: limit both directions of the link between this host and
        ``peer`` (tbf on ``l<peer>`` here and on ``l<self>`` there); every
        other link keeps its speed. Same parameters as :meth:`rate_limit`."""
        _tbf(self._shaping_targets(self.link_dev(peer), "both"), rate, burst, latency)

    def clear_link_limit(self, peer: Host | int | str) -> None:
        """Mesh only: undo :meth:`rate_limit_link` (both ends of the link)."""
        _untbf(self._shaping_targets(self.link_dev(peer), "both"))

    def link_down(self, dev: str | None = None) -> None:
        """Take ``dev`` (default :attr:`uplinks`) down: its subnet route (and
        in a mesh the host route through it) disappears, connects fail with
        ENETUNREACH, established connections stall. The other end of the
        veth loses carrier."""
        for d in self.uplinks if dev is None else [dev]:
            _ip("link", "set", d, "down", ns=self.ns)

    def link_up(self, dev: str | None = None) -> None:
        """Bring ``dev`` (default :attr:`uplinks`) back up (address and subnet
        route return; in a mesh the host route to the peer is re-added, since
        the kernel drops it with the link)."""
        for d in self.uplinks if dev is None else [dev]:
            _ip("link", "set", d, "up", ns=self.ns)
            for j, (link, _) in self._links.items():
                if link == d:
                    self._add_mesh_route(j)

    def _add_mesh_route(self, j: int) -> None:
        dev, gateway = self._links[j]
        _ip("route", "replace", f"{self.cluster.hosts[j].addr}/32", "via", gateway,
            "dev", dev, "src", self.addr, ns=self.ns)

    def _peer(self, peer: Host | int | str) -> Host:
        if self.cluster.topology != "mesh":
            raise ValueError("per-link operations need Cluster(..., topology='mesh')")
        other = peer if isinstance(peer, Host) else self.cluster.host(peer)
        if other.cluster is not self.cluster or other is self:
            raise ValueError(f"{other.name} is not another host of {self.name}'s cluster")
        return other

    def _shaping_targets(self, dev: str, direction: str) -> list[tuple[str, str]]:
        if dev not in self._ifaces:
            raise ValueError(f"{self.name} has no interface {dev!r} (has {sorted(self._ifaces)})")
        peer = self._ifaces[dev][0]
        targets = []
        if direction in ("egress", "both"):
            targets.append((self.ns, dev))
        if direction in ("ingress", "both"):
            if peer is None:
                raise ValueError(f"{dev} has no veth peer to shape ingress on")
            targets.append(peer)
        return targets


def _tbf(targets: Iterable[tuple[str, str]], rate: str | float, burst: int | None,
         latency: str) -> None:
    bits = parse_rate(rate)
    spec = ["tbf", "rate", f"{int(bits)}bit", "burst", str(burst or burst_for_rate(bits)),
            "latency", latency]
    for ns, link in targets:
        _cmd([_tool("tc"), "-n", ns, "qdisc", "replace", "dev", link, "root", *spec])


def _untbf(targets: Iterable[tuple[str, str]]) -> None:
    for ns, link in targets:
        _cmd([_tool("tc"), "-n", ns, "qdisc", "del", "dev", link, "root"], check=False)


def _port(port: Port) -> str:
    text = str(port)
    if not re.match(r"^\d{1,5}(:\d{1,5})?$", text):
        raise ValueError(f"bad port {port!r} (int or 'lo:hi')")
    return text


def _killpg(proc: subprocess.Popen) -> None:
    """SIGKILL the process group led by ``proc`` unless it was already reaped
    (then its pid, and so the group id, could belong to someone else)."""
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)


def _close_pipes(proc: subprocess.Popen) -> None:
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            with contextlib.suppress(Exception):
                stream.close()


def _descendants(pid: int) -> list[int]:
    """Pids of the live descendants of ``pid`` (by parent links in /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    found: list[int] = []
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _kill_tree(proc: subprocess.Popen) -> None:
    """SIGKILL ``proc``'s group and every descendant, including those that
    moved to their own session (torchrun's workers do). Orphans that already
    lost their parent are only reached by killing the whole namespace."""
    if proc.returncode is None:
        for pid in _descendants(proc.pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
    _killpg(proc)


# --------------------------------------------------------------------------- Cluster

_SEQ = itertools.count()
_LIVE: list[Cluster] = []
_LIVE_LOCK = threading.Lock()


class Cluster:
    """``n`` simulated hosts on one bridge, or in a full mesh; a context manager.

    >>> with Cluster(2) as c:
    ...     c[1].run_python("import socket; print(socket.gethostbyname('node0'))")

    Options: ``topology`` (``"bridge"``, the default: every host's eth0 on
    one bridge; ``"mesh"``, n <= 16: one point-to-point link per pair of
    hosts, see the module docstring, for per-link limits with
    :meth:`Host.rate_limit_link`), ``names`` (hostnames, default
    ``node0..``), ``extra_net`` (each
    host also gets ``eth1`` on a second bridge, subnet 10.214.X.0/24),
    ``dummy`` (True or host indices: add ``dummy0`` in 10.215.X.0/24 that
    reaches nobody), ``self_loopback`` (host indices/names whose own name
    resolves to 127.0.1.1), ``sweep`` (run :func:`sweep_stale` first).
    """

    def __init__(
        self,
        n: int = 2,
        prefix: str = "ddpc",
        *,
        names: Sequence[str] | None = None,
        extra_net: bool = False,
        dummy: bool | Iterable[int] = False,
        self_loopback: Iterable[int | str] = (),
        sweep: bool = True,
        topology: str = "bridge",
    ) -> None:
        _check_prefix(prefix)
        if topology not in TOPOLOGIES:
            raise ValueError(f"topology must be one of {TOPOLOGIES}, got {topology!r}")
        if not 1 <= n <= 250:
            raise ValueError(f"n must be in 1..250, got {n}")
        if topology == "mesh" and n > MESH_MAX_HOSTS:
            raise ValueError(f"a mesh has at most {MESH_MAX_HOSTS} hosts, got {n}")
        names = list(names) if names is not None else [f"node{i}" for i in range(n)]
        if len(names) != n or len(set(names)) != n:
            raise ValueError(f"need {n} distinct names, got {names!r}")
        for name in names:
            if not _HOSTNAME_RE.match(name) or name == "localhost":
                raise ValueError(f"bad host name {name!r}")
        self.n = n
        self.topology = topology
        self.prefix = prefix
        self.names = names
        self.extra_net = extra_net
        self.sweep = sweep
        self.pid = os.getpid()
        self.seq = next(_SEQ)
        #: common stem of every namespace name: ``<prefix>-<pid>-<seq>``
        self.id = f"{prefix}-{self.pid}-{self.seq}"
        self.bridge_ns = f"{self.id}-br"
        octet = 1 + (self.pid * 7 + self.seq) % 254
        #: first three octets of the host addresses (eth0, or mesh H_i) ...
        self.net_prefix = f"{HOST_NET if topology == 'mesh' else CLUSTER_NET}.{octet}"
        self.extra_prefix = f"{EXTRA_NET}.{octet}"
        self.dummy_prefix = f"{DUMMY_NET}.{octet}"
        #: ... and of the mesh links' /31s
        self.link_prefix = f"{LINK_NET}.{octet}"
        #: the /24 holding the host addresses
        self.subnet = f"{self.net_prefix}.0/24"
        self.link_subnet = f"{self.link_prefix}.0/24"
        self.extra_subnet = f"{self.extra_prefix}.0/24"
        self.dummy_subnet = f"{self.dummy_prefix}.0/24"
        self.hosts = [
            Host(self, i, name, f"{self.id}-h{i}", f"{self.net_prefix}.{i + 1}")
            for i, name in enumerate(names)
        ]
        if dummy is True:
            self._dummy_hosts = list(range(n))
        elif dummy is False:
            self._dummy_hosts = []
        else:
            self._dummy_hosts = [int(i) for i in dummy]
        for spec in self_loopback:
            self.host(spec).self_loopback = True
        self._procs: list[subprocess.Popen] = []
        self._procs_by_ns: dict[str, list[subprocess.Popen]] = {}
        self._lock = threading.RLock()
        self._state = "new"  # new -> running -> closed

    # ---- container protocol

    def __repr__(self) -> str:
        return f"Cluster({self.id!r}, hosts={[h.name for h in self.hosts]}, state={self._state})"

    def __len__(self) -> int:
        return self.n

    def __iter__(self) -> Iterator[Host]:
        return iter(self.hosts)

    def __getitem__(self, key: int | str) -> Host:
        return self.host(key)

    def host(self, key: int | str) -> Host:
        """Host by index or name."""
        if isinstance(key, int):
            return self.hosts[key]
        for h in self.hosts:
            if h.name == key:
                return h
        raise KeyError(key)

    @property
    def namespaces(self) -> list[str]:
        """Every namespace of this cluster (bridge first)."""
        return [self.bridge_ns] + [h.ns for h in self.hosts]

    @property
    def addrs(self) -> dict[str, str]:
        """Host name -> host address (eth0's, or the mesh host address)."""
        return {h.name: h.addr for h in self.hosts}

    @property
    def links(self) -> list[tuple[Host, Host]]:
        """Mesh: every link as (lower-index host, higher-index host), in
        creation order; empty for a bridge cluster."""
        if self.topology != "mesh":
            return []
        return list(itertools.combinations(self.hosts, 2))

    # ---- lifecycle

    def __enter__(self) -> Cluster:
        return self.start()

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            self.close()
            return
        try:  # do not let a cleanup problem hide the body's exception
            self.close()
        except NetnsError as err:
            warnings.warn(str(err), RuntimeWarning, stacklevel=2)

    def start(self) -> Cluster:
        """Build the namespaces, links and hosts files (idempotent)."""
        with self._lock:
            if self._state == "running":
                return self
            if self._state == "closed":
                raise NetnsError("cluster already closed")
            ok, why = available()
            if not ok:
                raise NetnsError(f"network namespaces unavailable: {why}")
            if self.sweep:
                sweep_stale(self.prefix)
            with _LIVE_LOCK:
                _LIVE.append(self)
            self._state = "running"
            try:
                self._build()
            except BaseException:
                self.close()
                raise
        return self

    def _build(self) -> None:
        for ns in self.namespaces:  # same pid+seq can only be a stale run (pid reuse)
            _remove_ns(ns)
        br = self.bridge_ns
        mesh = self.topology == "mesh"
        _ip("netns", "add", br)
        bridges = ([] if mesh else ["br0"]) + (["br1"] if self.extra_net else [])
        for bridge in bridges:
            _ip("link", "add", bridge, "type", "bridge", ns=br)
            _ip("link", "set", bridge, "up", ns=br)
        for h in self.hosts:
            _ip("netns", "add", h.ns)
            _ip("link", "set", "lo", "up", ns=h.ns)
            nets = [] if mesh else [("eth0", "br0", h.addr)]
            if mesh:
                _ip("addr", "add", f"{h.addr}/32", "dev", "lo", ns=h.ns)
            if self.extra_net:
                h.extra_addr = f"{self.extra_prefix}.{h.index + 1}"
                nets.append(("eth1", "br1", h.extra_addr))
            for dev, bridge, addr in nets:
                peer = f"h{h.index}e{dev[3:]}"
                _ip("link", "add", dev, "type", "veth", "peer", "name", peer, "netns", br, ns=h.ns)
                _ip("link", "set", peer, "master", bridge, "up", ns=br)
                _ip("addr", "add", f"{addr}/24", "dev", dev, ns=h.ns)
                _ip("link", "set", dev, "up", ns=h.ns)
                h._ifaces[dev] = ((br, peer), addr)
        if mesh:
            self._build_mesh()
        for i in self._dummy_hosts:
            self.hosts[i].add_dummy()
        for h in self.hosts:
            self._write_hosts_file(h)

    def _build_mesh(self) -> None:
        links = self.links
        for k, (a, b) in enumerate(links):
            dev_a, dev_b = f"l{b.index}", f"l{a.index}"
            addr_a, addr_b = f"{self.link_prefix}.{2 * k + 2}", f"{self.link_prefix}.{2 * k + 3}"
            _ip("link", "add", dev_a, "type", "veth", "peer", "name", dev_b, "netns", b.ns,
                ns=a.ns)
            for h, dev, addr, other, other_dev, other_addr in (
                (a, dev_a, addr_a, b, dev_b, addr_b), (b, dev_b, addr_b, a, dev_a, addr_a)
            ):
                _ip("addr", "add", f"{addr}/31", "dev", dev, ns=h.ns)
                # No IPv6 link-local address: no ND/MLD chatter in the byte counters.
                _ip("link", "set", dev, "addrgenmode", "none", "up", ns=h.ns)
                h._ifaces[dev] = ((other.ns, other_dev), addr)
                h._links[other.index] = (dev, other_addr)
        for a, b in links:
            a._add_mesh_route(b.index)
            b._add_mesh_route(a.index)

    def hosts_file(self, host: Host) -> str:
        """The /etc/hosts content ``host`` sees."""
        lines = ["127.0.0.1\tlocalhost", "::1\tlocalhost ip6-localhost ip6-loopback"]
        for h in self.hosts:
            addr = LOOPBACK_SELF_ADDR if (h is host and h.self_loopback) else h.addr
            lines.append(f"{addr}\t{h.name}")
        return "\n".join(lines) + "\n"

    def _write_hosts_file(self, host: Host) -> None:
        if self._state != "running":
            return
        d = ETC_NETNS / host.ns
        d.mkdir(parents=True, exist_ok=True)
        # Rewritten in place (same inode): the bind mounts of running processes see it.
        with open(d / "hosts", "w") as fh:
            fh.write(self.hosts_file(host))
        if os.path.exists("/etc/resolv.conf") and not (d / "resolv.conf").exists():
            # No nameserver: unknown names fail locally instead of going anywhere.
            (d / "resolv.conf").write_text("# ddpcheck test host: no DNS\noptions attempts:1\n")

    def _require_running(self) -> None:
        if self._state != "running":
            raise NetnsError(f"cluster {self.id} is {self._state}, not running")

    def _track(self, proc: subprocess.Popen, ns: str) -> None:
        with self._lock:
            self._procs.append(proc)
            self._procs_by_ns.setdefault(ns, []).append(proc)

    def _kill_tracked(self, which: Any = None) -> None:
        with self._lock:
            procs = [p for p in self._procs if which is None or which(p)]
        for p in procs:
            _kill_tree(p)
        for p in procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(timeout=5)

    def kill_all(self) -> None:
        """SIGKILL every tracked process group and every process in any of the
        cluster's namespaces; the cluster stays up."""
        with _signals_deferred():
            self._kill_tracked()
            for ns in self.namespaces:
                if _ns_exists(ns):
                    _kill_ns_pids(ns)

    def close(self) -> None:
        """Tear everything down (idempotent, safe after a partial start).

        Kills processes (tracked groups, then whatever is left in each
        namespace), deletes the namespaces (and with them veths and bridges)
        and the /etc/netns directories. Ctrl-C is deferred until done.
        """
        with self._lock, _signals_deferred():
            if self._state == "new":
                self._state = "closed"
                return
            errors: list[str] = []
            with contextlib.suppress(Exception):
                self._kill_tracked()
            for ns in reversed(self.namespaces):
                try:
                    _remove_ns(ns)
                except Exception as exc:  # keep going: remove as much as possible
                    errors.append(f"{ns}: {exc}")
            for p in self._procs:
                _close_pipes(p)
            self._state = "closed"
            with _LIVE_LOCK:
                if self in _LIVE:
                    _LIVE.remove(self)
            leftover = [ns for ns in self.namespaces if _ns_exists(ns)]
            if leftover or errors:
                raise NetnsError(f"cleanup of {self.id} incomplete: {leftover} {errors}")


def _close_all() -> None:
    """atexit hook: last-resort teardown of clusters nobody closed."""
    with _LIVE_LOCK:
        live = list(_LIVE)
    for c in live:
        with contextlib.suppress(Exception):
            c.close()


atexit.register(_close_all)
