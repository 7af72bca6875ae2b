"""Tests for ddpcheck.cluster.store: opening torch's TCPStore (and giving up on a squatter),
torch's hostname rule, gathering keys with a deadline (one wait, one multi_get, naming who
is missing) and holding the store until the readers are done, with counted store ops."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest
import torch.distributed as dist

from ddpcheck.cluster import board, store
from ddpcheck.cluster.checkin import NodeCard
from tests.helpers.counting_store import CountingStore
from tests.helpers.spawned import free_port


@pytest.fixture(autouse=True)
def _quiet_c10d(monkeypatch: pytest.MonkeyPatch) -> None:
    # store sets it with setdefault; owning it here keeps the test process's env unchanged
    monkeypatch.setenv("TORCH_CPP_LOG_LEVEL", "ERROR")


def card(host: str) -> NodeCard:
    return NodeCard(host, 2, "job-1", 4, pid=1000 + len(host))


def test_check_in_through_a_tcp_store_on_loopback() -> None:
    port = free_port()
    host = store.host_store(port, timeout=5)
    client = store.join_store("127.0.0.1", port, timeout=5)
    a, b = card("a"), card("b")
    board.publish(host, a)
    board.publish(client, b)
    decision = board.Board(host, a).collect(time.monotonic() + 5)
    board.publish_decision(host, decision)
    got = board.await_decision(client, time.monotonic() + 5)
    assert got is not None and got.problems == [] and [n[0] for n in got.nodes] == ["a", "b"]


@pytest.fixture
def squatter() -> Iterator[int]:
    """A plain socket listening on a loopback port: TCP connects succeed, no store answers."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    before = set(threading.enumerate())
    yield int(sock.getsockname()[1])
    sock.close()  # resets the abandoned client's connection, so its thread ends
    for thread in set(threading.enumerate()) - before:
        thread.join(10)


def test_join_store_gives_up_on_a_squatter_within_its_timeout(squatter: int) -> None:
    start = time.monotonic()
    with pytest.raises(TimeoutError, match="no c10d store answered within 2 s"):
        store.join_store("127.0.0.1", squatter, timeout=1)
    assert time.monotonic() - start < 1 + 1 + 0.5


def test_torch_recognises_this_machine_by_name_and_not_a_stranger() -> None:
    assert store.torch_would_host(socket.gethostname())
    assert store.torch_would_host("localhost")
    assert not store.torch_would_host("192.0.2.1")  # TEST-NET-1: never this machine


# --- gather_keys -----------------------------------------------------------------------------

def test_gather_reads_every_present_key_with_one_wait_and_one_multi_get() -> None:
    counted = CountingStore(dist.HashStore())
    view = counted.client("reader")
    for r in range(5):
        counted.store.set(f"k/{r}", f"v{r}")
    got, missing = store.gather_keys(view, {r: f"k/{r}" for r in range(5)}, 1.0)
    assert got == {r: f"v{r}".encode() for r in range(5)} and missing == []
    assert counted.ops["reader"] == {"wait": 1, "multi_get": 1}


def test_gather_names_the_missing_keys_at_the_deadline() -> None:
    counted = CountingStore(dist.HashStore())
    view = counted.client("reader")
    counted.store.set("k/0", "here")
    start = time.monotonic()
    got, missing = store.gather_keys(view, {0: "k/0", 1: "k/1", 2: "k/2"}, 0.2)
    assert 0.15 < time.monotonic() - start < 2
    assert got == {0: b"here"} and missing == [1, 2]
    assert counted.ops["reader"] == {"wait": 1, "check": 3, "multi_get": 1}


def test_gather_of_nothing_touches_no_store() -> None:
    counted = CountingStore(dist.HashStore())
    assert store.gather_keys(counted.client("r"), {}, 1.0) == ({}, [])
    assert counted.total() == 0


def test_gather_returns_a_key_set_while_it_waits() -> None:
    shared = dist.HashStore()
    later = threading.Timer(0.1, lambda: shared.set("late", "yes"))
    later.start()
    got, missing = store.gather_keys(shared, {"x": "late"}, 5.0)
    later.join()
    assert got == {"x": b"yes"} and missing == []


# --- hold ------------------------------------------------------------------------------------

def test_hold_returns_once_every_reader_has_added_itself() -> None:
    shared = dist.HashStore()
    shared.add("read", 2)
    start = time.monotonic()
    store.hold(shared, "read", 2, wait=5.0)
    assert time.monotonic() - start < 1


def test_hold_gives_up_at_its_deadline() -> None:
    shared = dist.HashStore()
    shared.add("read", 1)
    start = time.monotonic()
    store.hold(shared, "read", 3, wait=0.3, pause=0.05)
    assert 0.25 < time.monotonic() - start < 2
