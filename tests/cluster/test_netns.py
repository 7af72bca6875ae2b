"""Tests of the network-namespace cluster library itself (test side only).

Runs in pytest on the test machine, as root; skipped with the reason where
namespaces cannot be built. Every check runs real processes inside the
simulated hosts (python one-liners with sockets); traffic only ever goes to
loopback or between this run's namespaces. Fast: a few seconds in total.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

import pytest

from .netns import (
    ETC_NETNS,
    MESH_MAX_HOSTS,
    Cluster,
    Host,
    NetnsError,
    available,
    burst_for_rate,
    list_namespaces,
    parse_rate,
    sweep_stale,
)

PORT = 29500

# Accepts on every port in argv; per connection reads to EOF, answers
# "<host> <nbytes>" and closes. Bounded: exits after 60 s at the latest.
# Listens on 0.0.0.0, or with BIND=hostname on the address its own name
# resolves to (as gloo does).
SERVER = r"""
import os, selectors, socket, sys, time
sel = selectors.DefaultSelector()
bind = os.environ.get("BIND", "0.0.0.0")
if bind == "hostname":
    bind = socket.gethostbyname(socket.gethostname())
for port in sys.argv[1:]:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((bind, int(port)))
    s.listen(16)
    sel.register(s, selectors.EVENT_READ)
print("ready", flush=True)
deadline = time.monotonic() + 60
while time.monotonic() < deadline:
    for key, _ in sel.select(timeout=1):
        conn, _ = key.fileobj.accept()
        conn.settimeout(20)
        n = 0
        while True:
            chunk = conn.recv(1 << 16)
            if not chunk:
                break
            n += len(chunk)
        conn.sendall(f"{socket.gethostname()} {n}".encode())
        conn.close()
"""

# argv: timeout nbytes target... (target = host:port). Prints one JSON list:
# {"target", "result": "ok" | "timeout" | errno name, "reply", "elapsed",
# "local" (source address)}. With BIND=hostname the socket is bound to the
# address of the own host name before connecting (as gloo does).
CLIENT = r"""
import errno, json, os, socket, sys, time
timeout, nbytes = float(sys.argv[1]), int(sys.argv[2])
src = None
if os.environ.get("BIND") == "hostname":
    src = (socket.gethostbyname(socket.gethostname()), 0)
out = []
for target in sys.argv[3:]:
    host, port = target.rsplit(":", 1)
    rec = {"target": target, "reply": None, "local": None}
    t0 = time.monotonic()
    try:
        s = socket.create_connection((host, int(port)), timeout=timeout, source_address=src)
        rec["local"] = s.getsockname()[0]
        s.settimeout(30)
        s.sendall(b"x" * nbytes)
        s.shutdown(socket.SHUT_WR)
        reply = b""
        while True:
            chunk = s.recv(4096)
            if not chunk:
                break
            reply += chunk
        s.close()
        rec.update(result="ok", reply=reply.decode())
    except socket.timeout:
        rec["result"] = "timeout"
    except OSError as exc:
        rec["result"] = errno.errorcode.get(exc.errno, repr(exc))
    rec["elapsed"] = time.monotonic() - t0
    out.append(rec)
print(json.dumps(out))
"""


def start_server(host: Host, *ports: int, bind_own: bool = False) -> subprocess.Popen:
    env = {"BIND": "hostname" if bind_own else None}
    proc = host.popen_python(SERVER, *map(str, ports), env=env, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready", f"server on {host.name} did not start"
    return proc


def connect(host: Host, *targets: str, nbytes: int = 0, timeout: float = 1.0,
            bind_own: bool = False) -> list[dict]:
    env = {"BIND": "hostname" if bind_own else None}
    res = host.run_python(CLIENT, str(timeout), str(nbytes), *targets, env=env, timeout=60)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def connect1(host: Host, target: str, **kw: Any) -> dict:
    return connect(host, target, **kw)[0]


def resolve(host: Host, *names: str) -> dict[str, str]:
    code = (
        "import json, socket, sys; "
        "print(json.dumps({n: socket.gethostbyname(n) for n in sys.argv[1:]}))"
    )
    res = host.run_python(code, *names, timeout=30, check=True)
    return json.loads(res.stdout)


def proc_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


# --------------------------------------------------------------------------- pure helpers


def test_parse_rate_and_burst() -> None:
    assert parse_rate("100mbit") == 1e8
    assert parse_rate("1gbit") == 1e9
    assert parse_rate("10mbps") == 8e7  # tc: mbps = megabytes per second
    assert parse_rate(5000) == 5000.0
    assert burst_for_rate("100mbit") == 125_000  # 10 ms worth
    assert burst_for_rate("1mbit") == 4000  # floor: 32kbit
    for bad in ("fast", "10 parsecs", "-1mbit", "0"):
        with pytest.raises(ValueError):
            parse_rate(bad)


def test_bad_options_rejected() -> None:
    with pytest.raises(ValueError):
        Cluster(2, prefix="has-dash")
    with pytest.raises(ValueError):
        Cluster(2, names=["a", "a"])
    with pytest.raises(ValueError):
        Cluster(0)
    with pytest.raises(ValueError):
        Cluster(3, topology="ring")
    with pytest.raises(ValueError):
        Cluster(MESH_MAX_HOSTS + 1, topology="mesh")
    bridged = Cluster(2)  # never started: these are checked before any command runs
    with pytest.raises(ValueError, match="mesh"):
        bridged[0].rate_limit_link(1)
    mesh = Cluster(3, topology="mesh")
    with pytest.raises(ValueError):
        mesh[0].rate_limit_link("node0")  # no link to itself
    with pytest.raises(KeyError):
        mesh[0].clear_link_limit("node7")


def test_mesh_address_plan() -> None:
    c = Cluster(MESH_MAX_HOSTS, topology="mesh")
    assert c.net_prefix.startswith("10.216.") and c.link_prefix.startswith("10.217.")
    assert [h.addr for h in c] == [f"{c.net_prefix}.{i + 1}" for i in range(MESH_MAX_HOSTS)]
    assert len(c.links) == MESH_MAX_HOSTS * (MESH_MAX_HOSTS - 1) // 2  # 120 /31s fit a /24
    assert (c.links[0][0].name, c.links[0][1].name) == ("node0", "node1")
    assert Cluster(3).links == []


def test_available_reports_reason() -> None:
    ok, why = available()
    assert isinstance(ok, bool)
    assert (why == "") if ok else why


# --------------------------------------------------------------------------- topology


def test_hosts_reach_each_other_by_name(cluster3: Cluster) -> None:
    names = [h.name for h in cluster3]
    assert names == ["node0", "node1", "node2"]
    assert len({h.addr for h in cluster3}) == 3
    servers = [start_server(h, PORT) for h in cluster3]
    for h in cluster3:
        # own name -> own eth0 address (not loopback), others -> theirs
        assert resolve(h, *names) == cluster3.addrs
        others = [f"{o.name}:{PORT}" for o in cluster3 if o is not h]
        for rec in connect(h, *others, nbytes=10):
            assert rec["result"] == "ok", rec
            assert rec["reply"] == f"{rec['target'].split(':')[0]} 10"
    for s in servers:
        assert s.poll() is None


def test_popen_sets_hostname_and_pid_is_program(make_cluster: Callable[..., Cluster]) -> None:
    c = make_cluster(2, names=["alpha", "beta"])
    code = "import os, socket; print(socket.gethostname(), os.getpid())"
    proc = c["beta"].popen_python(code, stdout=subprocess.PIPE, text=True)
    out, _ = proc.communicate(timeout=30)
    name, pid = out.split()
    assert name == "beta"
    assert int(pid) == proc.pid  # ip netns exec / unshare / sh all exec: pid is the program
    assert c[0].run(["hostname"], check=True).stdout.strip() == "alpha"
    # The machine's own hostname is untouched.
    assert os.uname().nodename not in ("alpha", "beta")


def test_env_merge_and_unset(cluster2: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DDPC_NETNS_A", "outer")
    monkeypatch.setenv("DDPC_NETNS_B", "outer")
    code = "import os; print(os.environ.get('DDPC_NETNS_A'), os.environ.get('DDPC_NETNS_B'))"
    res = cluster2[0].run_python(code, env={"DDPC_NETNS_A": "inner", "DDPC_NETNS_B": None})
    assert res.stdout.split() == ["inner", "None"]


def test_self_loopback_variant(make_cluster: Callable[..., Cluster]) -> None:
    c = make_cluster(2, self_loopback=["node1"])
    assert resolve(c[1], "node0", "node1") == {"node0": c[0].addr, "node1": "127.0.1.1"}
    assert resolve(c[0], "node0", "node1") == c.addrs
    c[1].set_self_loopback(False)
    assert resolve(c[1], "node1") == {"node1": c[1].addr}


def test_extra_net_and_dummy_interfaces(make_cluster: Callable[..., Cluster]) -> None:
    c = make_cluster(2, extra_net=True, dummy=[0])
    h0, h1 = c
    assert set(h0.ifaces) == {"eth0", "eth1", "dummy0"}
    assert set(h1.ifaces) == {"eth0", "eth1"}
    assert h0.extra_addr and h0.extra_addr.startswith("10.214.")
    assert h0.dummy_addr and h0.dummy_addr.startswith("10.215.")
    listing = h0.run_python("import os; print(' '.join(sorted(os.listdir('/sys/class/net'))))")
    assert listing.stdout.split() == ["dummy0", "eth0", "eth1", "lo"]
    start_server(h1, PORT)
    assert connect1(h0, f"{h1.extra_addr}:{PORT}")["result"] == "ok"  # second network works
    # dummy0's subnet reaches nobody: another address in it never answers.
    unreachable = c.dummy_prefix + ".2"
    rec = connect1(h0, f"{unreachable}:{PORT}", timeout=0.5)
    assert rec["result"] in ("timeout", "EHOSTUNREACH", "ENETUNREACH"), rec


# --------------------------------------------------------------------------- faults


def test_drop_port_times_out_while_closed_port_is_refused(cluster2: Cluster) -> None:
    h0, h1 = cluster2
    start_server(h1, PORT)
    assert connect1(h0, f"node1:{PORT}")["result"] == "ok"
    h1.drop_port(PORT)
    dropped, closed = connect(h0, f"node1:{PORT}", f"node1:{PORT + 1}", timeout=0.7)
    assert dropped["result"] == "timeout", dropped
    assert dropped["elapsed"] >= 0.6
    assert closed["result"] == "ECONNREFUSED", closed
    # loopback inside the host is exempt from the rule
    assert connect1(h1, f"127.0.0.1:{PORT}")["result"] == "ok"
    h1.clear_firewall()
    assert connect1(h0, f"node1:{PORT}")["result"] == "ok"


def test_drop_all_tcp_except(cluster2: Cluster) -> None:
    h0, h1 = cluster2
    start_server(h1, PORT, PORT + 1)
    start_server(h0, PORT + 2)
    h1.drop_all_tcp_except([PORT])
    allowed, blocked = connect(h0, f"node1:{PORT}", f"node1:{PORT + 1}", timeout=0.7)
    assert allowed["result"] == "ok", allowed
    assert blocked["result"] == "timeout", blocked
    # h1's own outgoing connections still work (replies are established traffic)
    assert connect1(h1, f"node0:{PORT + 2}", nbytes=100_000)["result"] == "ok"
    h1.clear_firewall()
    assert connect1(h0, f"node1:{PORT + 1}")["result"] == "ok"


def test_rate_limit_throttles_throughput(cluster2: Cluster) -> None:
    h0, h1 = cluster2
    start_server(h1, PORT)
    nbytes = 4 * 1024 * 1024  # 4 MiB at 100 Mbit/s ~ 0.34 s
    fast = connect1(h0, f"node1:{PORT}", nbytes=nbytes)
    assert fast["reply"] == f"node1 {nbytes}"
    h0.rate_limit("100mbit")  # egress of the sender
    slow = connect1(h0, f"node1:{PORT}", nbytes=nbytes)
    assert slow["reply"] == f"node1 {nbytes}"
    assert 0.25 <= slow["elapsed"] < 10, slow
    assert fast["elapsed"] * 2 < slow["elapsed"], (fast, slow)
    h0.clear_rate_limit()
    qdiscs = subprocess.run(["tc", "-n", h0.ns, "qdisc", "show", "dev", "eth0"],
                            capture_output=True, text=True, check=True).stdout
    assert "tbf" not in qdiscs
    # Shaping the receiver's ingress (bridge-side veth) limits it as well.
    h1.rate_limit("100mbit", direction="ingress")
    slow_in = connect1(h0, f"node1:{PORT}", nbytes=nbytes)
    assert 0.25 <= slow_in["elapsed"] < 10, slow_in


def test_link_down_and_up(cluster2: Cluster) -> None:
    h0, h1 = cluster2
    start_server(h1, PORT)
    h0.link_down()
    rec = connect1(h0, f"node1:{PORT}", timeout=0.7)
    assert rec["result"] in ("ENETUNREACH", "EHOSTUNREACH", "timeout"), rec
    h0.link_up()
    assert connect1(h0, f"node1:{PORT}", timeout=5)["result"] == "ok"
    h1.link_down()  # the peer vanishes: connects time out / find no host
    rec = connect1(h0, f"node1:{PORT}", timeout=0.7)
    assert rec["result"] in ("EHOSTUNREACH", "timeout"), rec
    h1.link_up()
    assert connect1(h0, f"node1:{PORT}", timeout=5)["result"] == "ok"


# --------------------------------------------------------------------------- mesh

MIB4 = 4 * 1024 * 1024  # at 100 Mbit/s: 0.34 s


def run_qdiscs(ns: str, dev: str) -> str:
    return subprocess.run(["tc", "-n", ns, "qdisc", "show", "dev", dev],
                          capture_output=True, text=True, check=True).stdout


def all_counters(c: Cluster) -> dict[tuple[int, int], tuple[int, int]]:
    """(host, peer) -> (rx, tx) bytes of host's interface on the link to peer."""
    return {(h.index, int(dev[1:])): v for h in c for dev, v in h.byte_counters(h.uplinks).items()}


@pytest.mark.parametrize("n", [3, 4])
def test_mesh_every_pair_talks_by_name_over_its_own_link(
    make_cluster: Callable[..., Cluster], n: int,
) -> None:
    c = make_cluster(n, topology="mesh")
    names = [h.name for h in c]
    assert len(c.links) == n * (n - 1) // 2
    for h in c:
        assert h.addr == f"{c.net_prefix}.{h.index + 1}"
        assert h.uplinks == [f"l{o.index}" for o in c if o is not h]
        assert set(h.ifaces) == set(h.uplinks)
        assert all(a.startswith(c.link_prefix + ".") for a in h.ifaces.values())
        assert h.link_dev(c[(h.index + 1) % n].name) == f"l{(h.index + 1) % n}"
    if n == 3:  # strict reverse-path filtering (many distros' default) must not matter
        for h in c:
            h.exec_admin(["/bin/sh", "-c",
                          "for f in /proc/sys/net/ipv4/conf/*/rp_filter; do echo 1 > $f; done"])
        rp = c[1].exec_admin(["cat", "/proc/sys/net/ipv4/conf/l0/rp_filter"]).stdout
        assert rp.strip() == "1"
    # Odd hosts listen on 0.0.0.0, even ones on the address of their own name (like gloo).
    servers = [start_server(h, PORT, bind_own=h.index % 2 == 0) for h in c]
    nbytes = 300_000
    for h in c:
        assert resolve(h, *names) == c.addrs
        others = [o for o in c if o is not h]
        before = all_counters(c)
        # Odd senders bind to their host address first (like gloo), even ones let the kernel pick.
        recs = connect(h, *(f"{o.name}:{PORT}" for o in others), nbytes=nbytes,
                       bind_own=h.index % 2 == 1)
        after = all_counters(c)
        for o, rec in zip(others, recs):
            assert rec["result"] == "ok", rec
            assert rec["reply"] == f"{o.name} {nbytes}"
            assert rec["local"] == h.addr, rec  # source is H_i either way
        for (i, j), (rx, tx) in after.items():
            d_rx, d_tx = rx - before[i, j][0], tx - before[i, j][1]
            if i == h.index:  # each of h's links carried exactly one transfer out
                assert nbytes <= d_tx < 1.5 * nbytes, (h.name, i, j, d_tx)
            elif j == h.index:
                assert nbytes <= d_rx < 1.5 * nbytes, (h.name, i, j, d_rx)
            else:  # links between two other hosts stay quiet
                assert d_rx < 20_000 and d_tx < 20_000, (h.name, i, j, d_rx, d_tx)
    for s in servers:
        assert s.poll() is None


def test_mesh_rate_limit_link_slows_only_that_link(make_cluster: Callable[..., Cluster]) -> None:
    c = make_cluster(4, topology="mesh")
    h0, h1, h2, h3 = c
    for h in c:
        start_server(h, PORT)
    fast01, fast02 = connect(h0, f"node1:{PORT}", f"node2:{PORT}", nbytes=MIB4)
    h0.rate_limit_link("node2", "100mbit")
    assert "tbf" in run_qdiscs(h0.ns, "l2") and "tbf" in run_qdiscs(h2.ns, "l0")
    assert not any("tbf" in run_qdiscs(h.ns, dev) for h in c for dev in h.uplinks
                   if (h.index, dev) not in ((0, "l2"), (2, "l0")))
    ok01, slow02 = connect(h0, f"node1:{PORT}", f"node2:{PORT}", nbytes=MIB4)
    slow20, ok21, ok23 = connect(h2, f"node0:{PORT}", f"node1:{PORT}", f"node3:{PORT}",
                                 nbytes=MIB4)
    ok13 = connect1(h1, f"node3:{PORT}", nbytes=MIB4)
    print(f"\nmesh link limit 100mbit, 4 MiB: node0->node1 {fast01['elapsed']:.3f}s "
          f"node0->node2 {fast02['elapsed']:.3f}s unlimited; limited: node0->node2 "
          f"{slow02['elapsed']:.3f}s node2->node0 {slow20['elapsed']:.3f}s, others: "
          f"node0->node1 {ok01['elapsed']:.3f}s node2->node1 {ok21['elapsed']:.3f}s "
          f"node2->node3 {ok23['elapsed']:.3f}s node1->node3 {ok13['elapsed']:.3f}s")
    for rec in (fast01, fast02, ok01, slow02, slow20, ok21, ok23, ok13):
        assert rec["result"] == "ok" and rec["reply"].endswith(f" {MIB4}"), rec
    for slow in (slow02, slow20):  # both directions of the link
        assert 0.28 <= slow["elapsed"] < 10, slow
    for ok in (ok01, ok21, ok23, ok13):
        assert ok["elapsed"] * 2 < slow02["elapsed"], (ok, slow02)
    h2.clear_link_limit(h0)  # either end clears both
    assert "tbf" not in run_qdiscs(h0.ns, "l2") + run_qdiscs(h2.ns, "l0")
    again = connect1(h0, f"node2:{PORT}", nbytes=MIB4)
    assert again["elapsed"] * 2 < slow02["elapsed"], (again, slow02)


def test_mesh_host_rate_limit_slows_all_its_links(make_cluster: Callable[..., Cluster]) -> None:
    c = make_cluster(4, topology="mesh")
    h0, h1, h2, h3 = c
    for h in c:
        start_server(h, PORT)
    h1.rate_limit("100mbit")  # a slow node: every link of node1, both directions
    to1, to2 = connect(h0, f"node1:{PORT}", f"node2:{PORT}", nbytes=MIB4)
    from1, = connect(h1, f"node3:{PORT}", nbytes=MIB4)
    from3, = connect(h3, f"node1:{PORT}", nbytes=MIB4)
    print(f"\nmesh node1 limited 100mbit, 4 MiB: node0->node1 {to1['elapsed']:.3f}s "
          f"node1->node3 {from1['elapsed']:.3f}s node3->node1 {from3['elapsed']:.3f}s "
          f"node0->node2 {to2['elapsed']:.3f}s")
    for slow in (to1, from1, from3):
        assert slow["result"] == "ok", slow
        assert 0.28 <= slow["elapsed"] < 10, slow
    assert to2["elapsed"] * 2 < to1["elapsed"], (to2, to1)
    h1.clear_rate_limit()
    assert not any("tbf" in run_qdiscs(h.ns, dev) for h in c for dev in h.uplinks)


def test_mesh_link_down_and_up_restores_route(make_cluster: Callable[..., Cluster]) -> None:
    c = make_cluster(3, topology="mesh")
    h0, h1, h2 = c
    start_server(h1, PORT)
    start_server(h2, PORT)
    h0.link_down(h0.link_dev(h1))
    cut, other = connect(h0, f"node1:{PORT}", f"node2:{PORT}", timeout=0.7)
    assert cut["result"] in ("ENETUNREACH", "EHOSTUNREACH", "timeout"), cut  # no detour via node2
    assert other["result"] == "ok", other
    h0.link_up(h0.link_dev(h1))  # the kernel dropped the host route with the link: re-added
    assert connect1(h0, f"node1:{PORT}", timeout=5)["result"] == "ok"


# --------------------------------------------------------------------------- cleanup

# Starts a grandchild in its own session (escaping the caller's process
# group, as torchrun's workers do), prints its pid, then sleeps.
ESCAPER = (
    "import subprocess, time; "
    "p = subprocess.Popen(['sleep', '300'], start_new_session=True); "
    "print(p.pid, flush=True); time.sleep(300)"
)


@pytest.mark.parametrize("exc_type", [RuntimeError, KeyboardInterrupt])
def test_cleanup_when_body_raises(netns_available: None, exc_type: type) -> None:
    pids: list[int] = []
    with pytest.raises(exc_type):
        with Cluster(2) as c:
            for h in c:
                p = h.popen_python(ESCAPER, stdout=subprocess.PIPE, text=True)
                assert p.stdout is not None
                pids += [p.pid, int(p.stdout.readline())]
                pids.append(h.popen(["sleep", "300"]).pid)
            h.popen("sleep 300 & sleep 300")  # a shell tree, no pid known
            assert all(ns in list_namespaces() for ns in c.namespaces)
            raise exc_type("boom")
    assert not [ns for ns in list_namespaces() if ns.startswith(c.id + "-")]
    assert not [ns for ns in c.namespaces if (ETC_NETNS / ns).exists()]
    assert not [pid for pid in pids if proc_alive(pid)]
    c.close()  # idempotent


def test_run_timeout_kills_escaped_children(cluster2: Cluster) -> None:
    t0 = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired) as info:
        cluster2[0].run_python(ESCAPER, timeout=1.0)
    assert time.monotonic() - t0 < 5  # not stuck on the pipe the grandchild holds
    out = info.value.output or ""
    grandchild = int(out.split()[0])
    time.sleep(0.1)
    assert not proc_alive(grandchild)
    assert cluster2[0].pids() == []


def test_kill_all_keeps_cluster_up(cluster2: Cluster) -> None:
    h0, h1 = cluster2
    server = start_server(h1, PORT)
    sleeper = h0.popen(["sleep", "300"])
    cluster2.kill_all()
    assert server.wait(5) == -signal.SIGKILL
    assert sleeper.wait(5) == -signal.SIGKILL
    assert h0.pids() == [] and h1.pids() == []
    start_server(h1, PORT)
    assert connect1(h0, f"node1:{PORT}")["result"] == "ok"


def test_closed_cluster_refuses_to_run(netns_available: None) -> None:
    with Cluster(1) as c:
        pass
    with pytest.raises(NetnsError):
        c[0].popen(["true"])


# A process that builds a cluster with a process in it, then lingers; killed
# with SIGKILL it leaves everything behind, which is what sweep_stale is for.
CRASHER = r"""
import sys
sys.path.insert(0, sys.argv[1])
import netns
c = netns.Cluster(2, prefix=sys.argv[2], sweep=False).start()
c[0].popen(["sleep", "300"])
print(" ".join(c.namespaces), flush=True)
import time; time.sleep(300)
"""

# Same, but exits normally without closing: the atexit hook must clean up.
FORGETFUL = r"""
import sys
sys.path.insert(0, sys.argv[1])
import netns
c = netns.Cluster(2, prefix=sys.argv[2], sweep=False).start()
c[0].popen(["sleep", "300"])
print(" ".join(c.namespaces), flush=True)
"""


# A prefix of our own, so that concurrent test runs never sweep each other's fakes.
TEST_PREFIX = f"t{os.getpid()}"


def test_atexit_hook_cleans_up(netns_available: None) -> None:
    res = subprocess.run([sys.executable, "-c", FORGETFUL, str(Path(__file__).parent), TEST_PREFIX],
                         capture_output=True, text=True, timeout=60, check=True)
    names = res.stdout.split()
    assert len(names) == 3
    assert not set(names) & set(list_namespaces())
    assert not [ns for ns in names if (ETC_NETNS / ns).exists()]


def test_sweep_stale_removes_dead_runs_only(netns_available: None) -> None:
    crasher = subprocess.Popen([sys.executable, "-c", CRASHER, str(Path(__file__).parent),
                                TEST_PREFIX],
                               stdout=subprocess.PIPE, text=True, start_new_session=True)
    assert crasher.stdout is not None
    stale = crasher.stdout.readline().split()
    assert len(stale) == 3
    stale_sleepers = [pid for ns in stale for pid in _pids_in(ns)]
    assert stale_sleepers
    live = f"{TEST_PREFIX}-{os.getpid()}-9999-h0"  # creator (us) alive: must survive
    subprocess.run(["ip", "netns", "add", live], check=True)
    try:
        assert sweep_stale(TEST_PREFIX) == []  # crasher still running
        os.kill(crasher.pid, signal.SIGKILL)
        crasher.wait(10)
        removed = sweep_stale(TEST_PREFIX)
        assert sorted(removed) == sorted(stale)
        assert not set(stale) & set(list_namespaces())
        assert not [ns for ns in stale if (ETC_NETNS / ns).exists()]
        time.sleep(0.1)
        assert not [pid for pid in stale_sleepers if proc_alive(pid)]
        assert live in list_namespaces(TEST_PREFIX)
    finally:
        crasher.kill()
        crasher.wait()
        crasher.stdout.close()
        subprocess.run(["ip", "netns", "del", live], check=False)


def _pids_in(ns: str) -> list[int]:
    out = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout
    return [int(tok) for tok in out.split()]
