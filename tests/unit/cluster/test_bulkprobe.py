"""Tests for cluster.bulkprobe: payload exchanges on loopback, a target that stops answering,
and a target that refuses what no prober sends."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest

from ddpcheck.cluster.bulkprobe import HEADER, MAGIC, MAX_SIZE, BulkResult, exchange, serve
from ddpcheck.cluster.peerprobe import Listener


@pytest.fixture
def listener() -> Iterator[Listener]:
    lst = Listener("127.0.0.1")
    yield lst
    lst.close()


def test_every_size_goes_both_ways_to_a_listener(listener: Listener) -> None:
    got = exchange("127.0.0.1", listener.port, time.monotonic() + 10)
    assert got.outcome == "ok" and got.largest_ok == 2 << 20 and got.failed_size == 0
    deadline = time.monotonic() + 5
    while listener.exchanges < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert listener.exchanges == 1 and listener.accepted == 0


def test_a_connect_only_probe_is_served_as_one(listener: Listener) -> None:
    socket.create_connection(("127.0.0.1", listener.port), timeout=2).close()
    deadline = time.monotonic() + 5
    while listener.accepted < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert listener.accepted == 1 and listener.exchanges == 0


def _silent_after(first: int) -> tuple[socket.socket, threading.Event]:
    """A target that answers payloads up to ``first`` bytes, then reads and never answers
    (as a path that drops large frames looks from the prober)."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    done = threading.Event()

    def run() -> None:
        conn, _ = srv.accept()
        while not done.is_set():
            head = conn.recv(HEADER.size, socket.MSG_WAITALL)
            if len(head) < HEADER.size:
                break
            _, size = HEADER.unpack(head)
            left = size
            while left:
                left -= len(conn.recv(min(left, 1 << 16)))
            if size <= first:
                conn.sendall(bytes(size))
        done.wait(10)
        conn.close()

    threading.Thread(target=run, daemon=True).start()
    return srv, done


def test_a_large_payload_that_never_returns_is_a_stall_after_the_small_one() -> None:
    srv, done = _silent_after(1 << 10)
    try:
        began = time.monotonic()
        got = exchange("127.0.0.1", srv.getsockname()[1], time.monotonic() + 1.0)
        assert 0.9 <= time.monotonic() - began < 3
    finally:
        done.set()
        srv.close()
    assert got.outcome == "stalled" and got.largest_ok == 1 << 10
    assert got.failed_size == 64 << 10 and got.sent == 64 << 10 and got.received == 0


def test_a_refused_connection_is_an_error_with_the_reason() -> None:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    got = exchange("127.0.0.1", port, time.monotonic() + 2)
    assert got.outcome == "error" and "ConnectionRefusedError" in got.error


def test_the_target_refuses_a_size_no_prober_sends() -> None:
    a, b = socket.socketpair()
    rounds: list[int] = []
    t = threading.Thread(target=lambda: rounds.append(serve(b)))
    t.start()
    a.sendall(HEADER.pack(MAGIC, MAX_SIZE + 1))
    t.join(5)
    assert rounds == [0] and a.recv(1) == b""
    a.close()


def test_results_cross_as_dicts() -> None:
    r = BulkResult("stalled", 1024, 65536, 65536, 0, 4.0)
    assert BulkResult.from_dict({**r.to_dict(), "dev": "eth0", "mtu": 9000}) == r


def test_settle_waits_for_a_connection_still_being_served(listener: Listener) -> None:
    """The counts are read when the decision arrives: a connection whose serving thread has
    not yet read the end of the stream is waited for (a loaded node read 0 exchanges of 1)."""
    conn = socket.create_connection(("127.0.0.1", listener.port), timeout=2)
    deadline = time.monotonic() + 5
    while not listener._serving_now and time.monotonic() < deadline:
        time.sleep(0.01)
    threading.Timer(0.3, conn.close).start()  # the peer ends its connect probe a bit later
    start = time.monotonic()
    listener.settle(5.0)
    assert listener.accepted == 1 and 0.2 < time.monotonic() - start < 4


def test_settle_gives_up_at_its_deadline_on_a_peer_that_never_ends(listener: Listener) -> None:
    conn = socket.create_connection(("127.0.0.1", listener.port), timeout=2)
    try:
        deadline = time.monotonic() + 5
        while not listener._serving_now and time.monotonic() < deadline:
            time.sleep(0.01)
        start = time.monotonic()
        listener.settle(0.3)
        assert time.monotonic() - start < 2 and listener.accepted == 0
    finally:
        conn.close()
