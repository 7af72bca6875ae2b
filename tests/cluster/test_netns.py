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
SERVER = r"""
import selectors, socket, sys, time
sel = selectors.DefaultSelector()
for port in sys.argv[1:]:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", int(port)))
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
# {"target", "result": "ok" | "timeout" | errno name, "reply", "elapsed"}.
CLIENT = r"""
import errno, json, socket, sys, time
timeout, nbytes = float(sys.argv[1]), int(sys.argv[2])
out = []
for target in sys.argv[3:]:
    host, port = target.rsplit(":", 1)
    rec = {"target": target, "reply": None}
    t0 = time.monotonic()
    try:
        s = socket.create_connection((host, int(port)), timeout=timeout)
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


def start_server(host: Host, *ports: int) -> subprocess.Popen:
    proc = host.popen_python(SERVER, *map(str, ports), stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready", f"server on {host.name} did not start"
    return proc


def connect(host: Host, *targets: str, nbytes: int = 0, timeout: float = 1.0) -> list[dict]:
    res = host.run_python(CLIENT, str(timeout), str(nbytes), *targets, timeout=60)
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
