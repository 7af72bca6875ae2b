"""Tests for ddpcheck.node.netprobe: resolution, TCP connect, bind check and their diagnoses.

Real probes only touch loopback (and a bind on a non-local address, which fails locally);
timeouts are not provoked here, their mapping is tested on constructed results.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest

from ddpcheck import diagnoses
from ddpcheck.node import netprobe
from ddpcheck.node.netprobe import BindResult, ConnectResult, describe_bind, describe_connect
from tests.helpers.paths import ROOT

NEW_CODES = ("endpoint-refused", "endpoint-unreachable", "endpoint-no-route",
             "endpoint-unresolvable", "endpoint-connect-failed", "endpoint-port-in-use",
             "endpoint-bind-failed", "socket-ifname-unreachable")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(8)
    yield s
    s.close()


def test_codes_registered_and_registration_is_idempotent():
    catalogue = diagnoses.load_catalogue()  # some of them live in node.socketifname
    for code in NEW_CODES:
        assert code in catalogue
    same = netprobe.ENDPOINT_REFUSED
    again = diagnoses.register(same.code, same.summary, same.cause, same.fix)
    assert again is netprobe.ENDPOINT_REFUSED
    with pytest.raises(ValueError):  # a conflicting redefinition is refused, not dropped
        diagnoses.register("endpoint-refused", "other", "other", "other")
    assert diagnoses.CATALOGUE["endpoint-refused"] is netprobe.ENDPOINT_REFUSED


def test_never_imports_torch():
    code = "import sys, ddpcheck.node.netprobe; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True,
                   cwd=str(ROOT))


# --- resolve --------------------------------------------------------------------------------
def test_resolve_localhost_is_loopback():
    r = netprobe.resolve("localhost")
    assert r.ok and r.loopback and "127.0.0.1" in r.addresses and r.error == ""


def test_resolve_ip_literal():
    r = netprobe.resolve("127.0.0.1")
    assert r.addresses == ("127.0.0.1",) and r.loopback


def test_resolve_unresolvable_name():
    r = netprobe.resolve("nonexistent.invalid")
    assert not r.ok and not r.loopback and r.error


def test_a_resolver_that_does_not_answer_is_given_up_on(monkeypatch):
    answer = threading.Event()

    def silent_dns(*_args, **_kw):  # a nameserver that does not answer holds getaddrinfo
        answer.wait(30)
        raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")

    monkeypatch.setattr(netprobe.socket, "getaddrinfo", silent_dns)
    t0 = time.monotonic()
    r = netprobe.resolve("master.example", deadline_s=0.3)
    answer.set()  # the abandoned lookup ends on its own; nobody reads its answer
    assert time.monotonic() - t0 < 2
    assert not r.ok and "did not answer within 0.3 s" in r.error and "resolv.conf" in r.error


# --- tcp_connect ----------------------------------------------------------------------------
def test_connect_refused():
    r = netprobe.tcp_connect("127.0.0.1", free_port(), 2.0)
    assert r.outcome == "refused" and r.address == "127.0.0.1"
    assert "ECONNREFUSED" in r.error and r.elapsed < 2.0


def test_connect_ok(listener):
    port = listener.getsockname()[1]
    r = netprobe.tcp_connect("localhost", port, 2.0)
    assert r.ok and r.outcome == "ok" and r.address == "127.0.0.1" and r.error == ""


def test_connect_from_source_address(listener):
    port = listener.getsockname()[1]
    assert netprobe.tcp_connect("127.0.0.1", port, 2.0, source_addr="127.0.0.1").ok


def test_connect_from_non_local_source_is_an_error(listener):
    port = listener.getsockname()[1]
    r = netprobe.tcp_connect("127.0.0.1", port, 2.0, source_addr="192.0.2.123")
    assert r.outcome == "error" and "EADDRNOTAVAIL" in r.error


def test_connect_resolve_failed():
    r = netprobe.tcp_connect("nonexistent.invalid", 29500, 2.0)
    assert r.outcome == "resolve-failed" and r.address == "" and r.error


def test_grace_retries_refused_until_it_expires():
    r = netprobe.connect_with_grace("127.0.0.1", free_port(), 1.0, grace=0.3, interval=0.05)
    assert r.outcome == "refused" and r.attempts > 1 and r.elapsed >= 0.3


def test_grace_succeeds_once_the_host_starts_listening():
    port = free_port()
    server = socket.socket()

    def start() -> None:
        time.sleep(0.3)
        server.bind(("127.0.0.1", port))
        server.listen(1)

    thread = threading.Thread(target=start)
    thread.start()
    try:
        r = netprobe.connect_with_grace("127.0.0.1", port, 1.0, grace=5.0, interval=0.05)
    finally:
        thread.join()
        server.close()
    assert r.ok and r.attempts > 1


def test_grace_returns_at_once_for_other_outcomes(listener):
    r = netprobe.connect_with_grace("nonexistent.invalid", 29500, 1.0, grace=30.0)
    assert r.outcome == "resolve-failed" and r.attempts == 1
    r = netprobe.connect_with_grace("127.0.0.1", listener.getsockname()[1], 1.0, grace=30.0)
    assert r.ok and r.attempts == 1


# --- bind_check -----------------------------------------------------------------------------
def test_bind_free_port():
    port = free_port()
    r = netprobe.bind_check(port)
    assert r.ok and r.port == port and r.addr == "0.0.0.0" and r.holder == ""
    assert describe_bind(r, "gpu-a") is None


@pytest.mark.parametrize("addr", ["0.0.0.0", "127.0.0.1"])
def test_bind_names_the_holder(listener, addr):
    port = listener.getsockname()[1]
    r = netprobe.bind_check(port, addr)
    assert not r.ok and r.errno_name == "EADDRINUSE"
    assert r.holder_pid == os.getpid()
    assert r.holder.startswith(f"pid {os.getpid()} (")
    p = describe_bind(r, "gpu-a")
    assert p is not None and p.code == "endpoint-port-in-use" and p.hosts == ("gpu-a",)
    assert f"cannot listen on {addr}:{port} on node gpu-a: in use by pid {os.getpid()}" \
        in p.observed
    assert p.fix.startswith(f"stop pid {os.getpid()}")


def test_bind_non_local_address():
    r = netprobe.bind_check(free_port(), "192.0.2.123")
    assert not r.ok and r.errno_name == "EADDRNOTAVAIL" and r.holder_pid is None
    p = describe_bind(r, "gpu-b")
    assert p is not None and p.code == "endpoint-bind-failed"
    assert "192.0.2.123 is not an address of node gpu-b" in p.cause


def test_describe_bind_unknown_holder():
    r = BindResult(False, 29500, "0.0.0.0", "EADDRINUSE: Address already in use", "EADDRINUSE")
    p = describe_bind(r, "gpu-a")
    assert p is not None and "ss -ltnp 'sport = :29500'" in p.observed
    assert "--rdzv-endpoint HOST:29501" in p.fix


# --- describe_connect -----------------------------------------------------------------------
def test_describe_connect_ok_is_none():
    assert describe_connect(ConnectResult("ok", "10.0.0.1", 0.01), "gpu-a", 29500, "b") is None


def test_describe_connect_timeout():
    p = describe_connect(ConnectResult("timeout", "10.0.0.1", 3.0, "no reply within 3 s"),
                         "gpu-a", 29500, "gpu-b")
    assert p is not None and p.code == "endpoint-unreachable" and p.hosts == ("gpu-b",)
    assert p.observed == ("TCP connect to gpu-a:29500 (10.0.0.1) timed out after 3.0 s "
                          "(no reply: packets dropped) from node gpu-b")
    assert "open TCP port 29500" in p.fix and "network all nodes reach" in p.fix


def test_describe_connect_refused_after_grace():
    r = ConnectResult("refused", "10.0.0.1", 30.2, "ECONNREFUSED: Connection refused", 61)
    p = describe_connect(r, "gpu-a", 29500, "gpu-b")
    assert p is not None and p.code == "endpoint-refused"
    assert p.observed == ("TCP connect to gpu-a:29500 (10.0.0.1) refused: nothing listening "
                          "(retried for 30.2 s) from node gpu-b")
    assert "--node-rank" in p.cause and "--rdzv-endpoint" in p.fix


@pytest.mark.parametrize("outcome,error,code", [
    ("no-route", "EHOSTUNREACH: No route to host", "endpoint-no-route"),
    ("unreachable", "ENETUNREACH: Network is unreachable", "endpoint-no-route"),
    ("error", "EPERM: Operation not permitted", "endpoint-connect-failed"),
])
def test_describe_connect_errors(outcome, error, code):
    p = describe_connect(ConnectResult(outcome, "10.0.0.1", 0.1, error), "10.0.0.1", 29500, "n2")
    assert p is not None and p.code == code
    assert p.observed == f"TCP connect to 10.0.0.1:29500 failed: {error} from node n2"


def test_describe_connect_unresolvable():
    r = ConnectResult("resolve-failed", "", 0.1, "[Errno -2] Name or service not known")
    p = describe_connect(r, "gpu-a", 29500, "gpu-b")
    assert p is not None and p.code == "endpoint-unresolvable"
    assert p.observed == "cannot resolve gpu-a on node gpu-b: [Errno -2] Name or service not known"


def test_describe_real_refused_probe():
    port = free_port()
    p = describe_connect(netprobe.tcp_connect("localhost", port, 1.0), "localhost", port, "me")
    assert p is not None and p.code == "endpoint-refused"
    assert p.observed.startswith(f"TCP connect to localhost:{port} (127.0.0.1) refused")


def test_the_holder_is_named_by_pid_user_and_executable_never_its_command_line(listener):
    import getpass
    import sys

    r = netprobe.bind_check(listener.getsockname()[1], "0.0.0.0")
    exe = os.path.realpath(sys.executable)
    assert r.holder == f"pid {os.getpid()} (user {getpass.getuser()}, {exe})"
    assert "pytest" not in r.holder  # the command line (tokens, passwords) is never shown
