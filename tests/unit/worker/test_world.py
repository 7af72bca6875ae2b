"""Tests for worker.world: agreement through the store with deadlines, and the world's setup.

The other ranks of the world are simulated by writing their keys into an in-process
HashStore; no process group is created.
"""

from __future__ import annotations

import json
import os
import platform
import threading
import time
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from ddpcheck.worker import world as world_module
from ddpcheck.worker.world import (
    World,
    connect,
    first_line,
    node_facts,
    resolve_backend,
)


def world3(timeout: float = 0.3) -> World:
    """Rank 0 of a 3-rank world whose store is an in-process HashStore."""
    return World(rank=0, world_size=3, local_rank=0, local_world_size=3, node_rank=0,
                 host="node0", backend="gloo", timeout=timeout, store=dist.HashStore())


def publish_as(world: World, rank: int, key: str, payload: object) -> None:
    world.store.set(f"{key}/{rank}", json.dumps(payload))


# --- World.exchange ---------------------------------------------------------------------------

def test_exchange_returns_every_ranks_value_in_rank_order() -> None:
    w = world3(timeout=10)
    publish_as(w, 2, "hello", {"host": "node2"})
    publish_as(w, 1, "hello", {"host": "node1"})
    start = time.monotonic()
    got = w.exchange("hello", {"host": "node0"})
    assert time.monotonic() - start < 1.0  # nobody missing: no waiting for the deadline
    assert list(got.values) == [0, 1, 2]
    assert got.values == {0: {"host": "node0"}, 1: {"host": "node1"}, 2: {"host": "node2"}}
    assert got.missing == ()
    assert w.lost == set()


def test_exchange_waits_for_a_rank_that_publishes_late() -> None:
    w = world3(timeout=10)
    publish_as(w, 1, "k", 1)
    timer = threading.Timer(0.1, publish_as, (w, 2, "k", 2))
    timer.start()
    try:
        got = w.exchange("k", 0)
    finally:
        timer.cancel()
    assert (got.values, got.missing) == ({0: 0, 1: 1, 2: 2}, ())


def test_a_missing_rank_is_listed_after_the_deadline_and_then_lost() -> None:
    w = world3(timeout=0.2)
    publish_as(w, 1, "probe/1", {"status": "PASS"})
    start = time.monotonic()
    got = w.exchange("probe/1", {"status": "PASS"})
    assert time.monotonic() - start >= 0.2
    assert got.missing == (2,)
    assert list(got.values) == [0, 1]
    assert w.lost == {2}


def test_a_lost_rank_is_not_waited_for_again() -> None:
    w = world3(timeout=0.3)
    for key in ("probe/1", "probe/2"):
        publish_as(w, 1, key, "rank 1")  # rank 2 never publishes
    start = time.monotonic()
    assert w.exchange("probe/1", "rank 0").missing == (2,)
    assert time.monotonic() - start >= 0.3  # waited once, for the deadline
    start = time.monotonic()
    got = w.exchange("probe/2", "rank 0")
    assert time.monotonic() - start < 0.15  # not again
    assert (got.values, got.missing) == ({0: "rank 0", 1: "rank 1"}, (2,))


def test_a_lost_rank_stays_missing_even_when_it_publishes_late() -> None:
    w = world3(timeout=0.1)
    w.exchange("probe/1", "x")
    assert w.lost == {1, 2}
    publish_as(w, 1, "probe/2", "late but here")
    assert w.exchange("probe/2", "x").missing == (1, 2)


def test_an_explicit_timeout_overrides_the_worlds() -> None:
    w = world3(timeout=30)
    start = time.monotonic()
    assert w.exchange("k", 0, timeout=0.1).missing == (1, 2)
    assert time.monotonic() - start < 2.0


def test_payloads_that_json_cannot_encode_are_sent_as_text() -> None:
    w = World(0, 1, 0, 1, 0, "node0", "gloo", 1.0, dist.HashStore())
    got = w.exchange("k", {"dir": Path("/shared/ckpt"), "dtype": torch.float32})
    assert got.values == {0: {"dir": "/shared/ckpt", "dtype": "torch.float32"}}


# --- connect --------------------------------------------------------------------------------

def test_connect_without_master_addr_is_a_world_of_one_on_a_hash_store() -> None:
    w = connect(env={"DDPCHECK_BACKEND": "gloo"}, timeout=5)
    assert (w.rank, w.world_size, w.local_rank, w.local_world_size, w.node_rank) == (
        0, 1, 0, 1, 0)
    assert w.backend == "gloo" and w.timeout == 5
    assert isinstance(w.store, dist.PrefixStore)
    assert isinstance(w.store.underlying_store, dist.HashStore)
    assert w.hosts_by_rank == {0: w.host}
    assert w.exchange("hello", "me").values == {0: "me"}


def test_connect_reads_the_torchrun_layout() -> None:
    env = {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1",
           "GROUP_RANK": "0", "DDPCHECK_BACKEND": "auto"}
    w = connect(env=env, timeout=5)
    assert (w.world_size, w.backend) == (1, resolve_backend("auto"))


# --- small helpers --------------------------------------------------------------------------

def test_auto_backend_is_gloo_without_cuda() -> None:
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: auto means nccl here")
    assert resolve_backend("auto") == "gloo"
    assert resolve_backend("") == "gloo"


def test_an_explicit_backend_is_kept() -> None:
    assert resolve_backend("nccl") == "nccl"
    assert resolve_backend("gloo") == "gloo"


def test_node_facts_are_the_ones_compared_across_ranks() -> None:
    facts = node_facts()
    assert set(facts) == {"host", "torch", "cuda", "nccl", "arch", "python", "pid"}
    assert facts["torch"] == torch.__version__
    assert facts["arch"] == platform.machine()
    assert facts["python"] == platform.python_version()
    assert facts["pid"] == os.getpid()
    json.dumps(facts)
    if not torch.cuda.is_available():
        assert facts["nccl"] is None


def test_first_line_of_an_error() -> None:
    assert first_line(RuntimeError("first\nsecond")) == "first"
    assert first_line(KeyError()) == "KeyError"
    assert len(first_line(RuntimeError("x" * 1000))) == 300


# --- rank 0 as coordinator: the other ranks obey its published result -------------------------

def ranks_sharing(n: int, timeout: float = 5.0) -> list[World]:
    """n Worlds on one in-process store, one per simulated rank (run them in threads)."""
    store = dist.HashStore()
    return [World(rank=r, world_size=n, local_rank=r, local_world_size=n, node_rank=0,
                  host=f"h{r}", backend="gloo", timeout=timeout, store=store)
            for r in range(n)]


def run_all(worlds: list[World], call) -> list:
    out: list = [None] * len(worlds)

    def one(i: int) -> None:
        out[i] = call(worlds[i])
    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(worlds))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return out


def test_every_rank_gets_every_value_through_rank_0() -> None:
    worlds = ranks_sharing(4)
    got = run_all(worlds, lambda w: w.exchange("k", {"r": w.rank}))
    for ex in got:
        assert ex.values == {r: {"r": r} for r in range(4)} and ex.missing == ()


def test_gather_gives_the_values_to_rank_0_only() -> None:
    worlds = ranks_sharing(3)
    got = run_all(worlds, lambda w: w.gather("g", w.rank * 10))
    assert got[0].values == {0: 0, 1: 10, 2: 20}
    assert got[1].values == {1: 10} and got[2].values == {2: 20}


def test_every_rank_obeys_rank_0s_decision_and_learns_who_was_missing() -> None:
    worlds = ranks_sharing(4, timeout=0.5)
    live = worlds[:3]  # rank 3 never arrives
    got = run_all(live, lambda w: w.decide(
        "d", w.rank == 2, lambda ex: any(ex.values.values())))
    assert got == [(True, (3,))] * 3
    assert all(w.lost == {3} for w in live)


# The others' extra wait for rank 0's result, shortened here: these tests check that they
# stop waiting for a lost rank 0 (within timeout + grace), not the grace's value.
SHORT_RESULT_GRACE_S = 0.3


def test_without_rank_0_the_others_name_it_and_stop_waiting_for_it(monkeypatch) -> None:
    monkeypatch.setattr(world_module, "RESULT_GRACE_S", SHORT_RESULT_GRACE_S)
    worlds = ranks_sharing(3, timeout=0.2)
    start = time.monotonic()
    got = run_all(worlds[1:], lambda w: w.decide("d", 1, lambda ex: "never"))
    assert got == [(None, (0,))] * 2
    assert time.monotonic() - start < 0.2 + SHORT_RESULT_GRACE_S + 2.0
    start = time.monotonic()
    assert run_all(worlds[1:], lambda w: w.exchange("e", 1).missing) == [(0,), (0,)]
    assert time.monotonic() - start < 0.5, "a lost coordinator is not waited for again"


def test_decide_each_gives_every_rank_its_own_part_only() -> None:
    worlds = ranks_sharing(4)
    store = worlds[0].store
    got = run_all(worlds, lambda w: w.decide_each(
        "plan", w.rank, lambda ex: {r: {"pairs": [v, v + 1]} for r, v in ex.values.items()}))
    assert [part for part, _ in got] == [{"pairs": [r, r + 1]} for r in range(4)]
    assert not store.check(["plan/result"]), "no world-sized key that every rank reads"


def test_decide_each_names_the_missing_ranks_to_rank_0_and_gives_them_nothing() -> None:
    worlds = ranks_sharing(3, timeout=0.3)
    got = run_all(worlds[:2], lambda w: w.decide_each("p", 1, lambda ex: {r: r for r in
                                                                           ex.values}))
    assert got == [(0, (2,)), (1, ())]
    assert worlds[0].lost == {2}


def test_without_rank_0_decide_each_names_it(monkeypatch) -> None:
    monkeypatch.setattr(world_module, "RESULT_GRACE_S", SHORT_RESULT_GRACE_S)
    worlds = ranks_sharing(2, timeout=0.1)
    assert run_all(worlds[1:], lambda w: w.decide_each("p", 1, lambda ex: {})) == [(None, (0,))]


def test_agreement_deadlines_grow_with_the_world() -> None:
    small = World(rank=0, world_size=2, local_rank=0, local_world_size=2, node_rank=0,
                  host="h", backend="gloo", timeout=10.0, store=dist.HashStore())
    large = World(rank=0, world_size=8192, local_rank=0, local_world_size=8, node_rank=0,
                  host="h", backend="gloo", timeout=10.0, store=dist.HashStore())
    assert small.deadline() < 10.1
    assert large.deadline() > 25.0 and large.deadline(1.0) > 16.0
