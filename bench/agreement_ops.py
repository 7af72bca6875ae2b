"""Store operations of the real agreement and final gather, per rank, at R simulated ranks.

Simulated ranks (threads) run ddpcheck.worker.world.World's own agreement code through a counting
store (tests/helpers/counting_store.py) wrapping a real c10d HashStore: the hello (layout), the
collection check, AGREEMENTS probe decisions and the final gather of each rank's events,
as a run does. Prints operations per rank per agreement, rank 0's share, bytes a non-zero
rank reads, the total per run and per rank, and the wall time. Target: linear in R
overall (constant per rank).

Usage: python -m bench.agreement_ops [--ranks 64 512 8192] [--agreements 39]
"""

from __future__ import annotations

import argparse
import threading
import time

import torch.distributed as dist

from ddpcheck.worker.agreement import encode_hosts, probe_decision
from ddpcheck.worker.world import World
from tests.helpers.counting_store import CountingStore

PER_NODE = 8


def one_rank(w: World, agreements: int, events: list[dict]) -> None:
    """What the plugin does on each rank, in order, with the real World calls."""
    me = {"host": w.host, "local_rank": w.local_rank, "node_rank": w.node_rank, "pid": 1}
    w.decide("hello", me, lambda ex: {"coordinator": w.host, "hosts": encode_hosts(
        {r: v["host"] for r, v in ex.values.items()})})
    w.decide("collection", {"digest": "abc", "count": agreements},
             lambda ex: {"odd": [r for r, v in ex.values.items() if v["digest"] != "abc"]})
    for i in range(agreements):
        w.decide(f"probe/{i}", {"status": "PASS", "breaks_world": False}, probe_decision)
    w.gather("events", events)


def simulate(ranks: int, agreements: int) -> tuple[CountingStore, float]:
    store = CountingStore(dist.HashStore())
    worlds = [World(r, ranks, r % PER_NODE, PER_NODE, r // PER_NODE, f"n{r // PER_NODE}",
                    "gloo", 120.0, store.client(f"rank{r}")) for r in range(ranks)]
    events = [{"event": "probe", "name": f"test_{i}", "status": "PASS"} for i in range(30)]
    start = time.monotonic()
    threads = [threading.Thread(target=one_rank, args=(w, agreements, events)) for w in worlds]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return store, time.monotonic() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, nargs="+", default=[64, 512, 8192])
    ap.add_argument("--agreements", type=int, default=39)
    args = ap.parse_args()
    rounds = args.agreements + 3  # hello, collection, the probes, the gather
    print(f"{rounds} agreement rounds per run (hello, collection, {args.agreements} probes, "
          "gather)")
    print(" ranks  ops/rank/round  rank0 ops/round  other rank KiB read/run  ops/run  "
          "ops/run/rank  seconds")
    for r in args.ranks:
        store, secs = simulate(r, args.agreements)
        total = store.total()
        rank0 = store.ops_of("rank0")
        others = [w for w in store.ops if w != "rank0"]
        kib = max(store.bytes[w] for w in others) / 1024 if others else 0.0
        print(f"{r:6d}  {total / r / rounds:14.2f}  {rank0 / rounds:15.1f}  {kib:23.1f}  "
              f"{total:7d}  {total / r:12.1f}  {secs:7.1f}")


if __name__ == "__main__":
    main()
