"""Every rank-side stage at R ranks on N nodes, simulated: store operations and bytes per rank.

Simulated ranks are greenlets in one thread (``GreenStore`` of tests/helpers/fast_store.py:
a rank parks in a store wait until the key is set; 8,192 OS threads spent the run in kernel
hand-offs on this loaded 2-core machine), each with its own ``World``
(ddpcheck.worker.world) on a counting view (tests/helpers/counting_store.py) of the store.
Each rank runs the session as the plugin does: the hello
(layout), the collection check, every probe followed by its agreement (``probe_decision``),
and the final gather of its own event log (``results.RankLog`` records, with the real
``Recorder`` measurements of the probes). The store-facing parts are the real code:

- rendezvous: the four probes of checks/test_rendezvous.py, called as they are;
- node: the NCCL stack gather (checks/test_node.py), called as it is;
- collectives: the broadcast roots of ``worker.subgroups.broadcast_roots`` (counted);
- bandwidth: the NIC reference (``node.nics.world_reference``, as under NCCL, for the sweep
  and the cross-node figure); the link stage (``play_link_rounds`` and ``judge_links`` of
  checks/test_links.py, whose transfers run ``worker.timing.link_gbps`` with its real store
  handshakes); the intra/cross-node busbw verdict (``judge_busbw``); the straggler verdict
  (``judge_stragglers``, judged on rank 0);
- ddp: the sampler-identity probe's gather (its payload from ``job_identity``); the
  scaling table's gather;
- checkpoint: the checkpoint probe, called as it is (rank 0 saves, every rank loads).

Collectives are stood in for (no data moves; each call is counted): barriers, the p2p
batches of a link transfer, broadcasts, all-reduces. Link rates and work times are modelled
(one slow node with slow links, one straggler node) so the verdicts and the follow-up link
plan are those of a world with a fault. Every stage runs even after a failure (the worst
case for cost). Prints per R the most operations and KiB read by a non-zero rank, rank 0's
operations and MiB read, and the wall time; the last line is for 8,192 ranks.

Usage: python -m bench.world_scale --ranks 8192 --nodes 1024 [--report DIR]
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import os
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import checks.test_collectives  # noqa: F401  (the module whose broadcast roots are counted)
import checks.test_links as links_probe
from checks import test_checkpoint, test_node, test_rendezvous
from ddpcheck import results
from ddpcheck.cluster import pairing
from ddpcheck.diagnoses import ProblemFound
from ddpcheck.node import ncclstack, nics
from ddpcheck.report import junit
from ddpcheck.report.as_json import to_json
from ddpcheck.report.build import build_report
from ddpcheck.report.text import render_text
from ddpcheck.scheduler.jobidentity import job_identity
from ddpcheck.stages import STAGES
from ddpcheck.worker import subgroups, timing
from ddpcheck.worker.agreement import decode_hosts, encode_hosts, odd_collections, probe_decision
from ddpcheck.worker.recorder import Recorder
from ddpcheck.worker.settings import WorkerSettings
from ddpcheck.worker.world import World
from tests.helpers.counting_store import CountingStore
from tests.helpers.fast_store import GreenStore

REAL = {"nccl_view": test_node._nccl_view, "driver": test_node._driver_version,
        "rounds": pairing.initial_rounds, "facts": ncclstack.stack_facts}
PROBES = 28  # test functions in checks/ (each one agreement)
FAST_GBPS, SLOW_GBPS, STEP_S = 12.0, 3.0, 0.020


class StandIn:
    """The collectives and communicators, counted per kind; no data moves."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self._lock = threading.Lock()

    def note(self, kind: str, n: int = 1) -> None:
        with self._lock:
            self.calls[kind] += n

    def barrier(self, group: Any = None) -> None:
        self.note("barrier")

    def batch_isend_irecv(self, ops: list) -> list:
        self.note("p2p batch")
        return []

    @staticmethod
    def P2POp(*args: Any, **kwargs: Any) -> None:  # noqa: N802 (torch's name)
        return None

    irecv = isend = None


def model_rate(slow_host: str) -> Callable[..., float]:
    """link_gbps with its real store handshakes, returning a modelled rate (GB/s)."""
    real = links_probe.link_gbps

    def rate(rank, src, dst, trials, device, store, key) -> float:
        real(rank, src, dst, trials, device, store, key)
        return SLOW_GBPS if slow_host in key.split("/")[-1].split("-") else FAST_GBPS
    return rate


_LAYOUTS: dict[str, tuple[dict[int, str], subgroups.Layout]] = {}
_LAYOUT_LOCK = threading.Lock()


def shared_layout(runs: list[list]) -> tuple[dict[int, str], subgroups.Layout]:
    """The hello's layout decoded once and shared by the simulated ranks: each real rank
    holds its own O(R) copy, but R threads holding one each would hold O(R^2)."""
    key = json.dumps(runs)
    with _LAYOUT_LOCK:
        if key not in _LAYOUTS:
            hosts = decode_hosts(runs)
            _LAYOUTS[key] = (hosts, subgroups.layout(SimpleNamespace(
                world_size=len(hosts), hosts_by_rank=hosts)))
        return _LAYOUTS[key]


class Rank:
    """One simulated rank: the plugin's session, in order, on real World calls."""

    def __init__(self, w: World, settings: WorkerSettings, stand_in: StandIn, slow: int):
        self.w, self.settings, self.stand_in, self.slow = w, settings, stand_in, slow
        self.log = results.RankLog(None, w.rank)
        self.counter = 0

    def run(self) -> None:
        w = self.w
        me = {"host": w.host, "local_rank": w.local_rank, "node_rank": w.node_rank, "pid": 1}
        self.log.write(results.Start(rank=w.rank, world_size=w.world_size, backend="gloo",
                                     **me))
        decision, missing = w.decide("hello", me, lambda ex: {"coordinator": "n0", "hosts":
                                     encode_hosts({r: v["host"] for r, v in ex.values.items()})})
        w.hosts_by_rank = shared_layout(decision["hosts"])[0]
        self.log.write(results.Hello(ranks={w.rank: me}, missing=tuple(missing)))
        digest = hashlib.sha256(b"checks").hexdigest()[:16]
        w.decide("collection", {"digest": digest, "count": PROBES}, odd_collections)
        lay = shared_layout(decision["hosts"])[1]
        steps: list[tuple[str, Callable[[Recorder], Any]]] = [
            ("rendezvous", lambda r: test_rendezvous.test_world_forms_with_the_expected_size(
                w, self.settings, r)),
            ("rendezvous", lambda r: test_rendezvous.test_each_host_has_distinct_local_ranks(w)),
            ("rendezvous", lambda r: test_rendezvous.test_all_ranks_run_the_same_stack(w, r)),
            ("rendezvous", lambda r: test_rendezvous.test_distributed_settings_agree(w)),
            ("node", lambda r: test_node.test_all_ranks_load_the_same_nccl_plugin_and_driver(
                w, r)),
            ("collectives", lambda r: self.stand_in.note(
                "broadcast", len(subgroups.broadcast_roots(w.world_size, lay.leaders)))),
            ("bandwidth", lambda r: nics.world_reference(w, "sweep", w.local_world_size)),
            ("bandwidth", lambda r: self.links(lay, r)),
            ("bandwidth", lambda r: self.busbw(lay, r)),
            ("bandwidth", lambda r: self.straggler(r)),
            ("ddp", lambda r: self.sampler()),
            ("ddp", lambda r: w.gather("scaling", [])),
            ("checkpoint", lambda r: test_checkpoint.test_checkpoint_saved_by_rank_0_loads_on_every_rank(w, self.settings, r)),  # noqa: E501
        ]
        for stage, step in steps:
            self.probe(stage, step)
        for _ in range(PROBES - len(steps)):  # the probes whose only store use is agreement
            self.probe("collectives", lambda r: None)
        self.log.write(results.End(blocked_by=None))
        w.gather("events", self.log.records())

    def probe(self, stage: str, step: Callable[[Recorder], Any]) -> None:
        rec, status, problems = Recorder(), results.PASS, ()
        try:
            step(rec)
        except ProblemFound as exc:
            status = results.FAIL  # located as the plugin's _locate does
            problems = tuple(p.where(stage=p.stage or stage) for p in exc.problems)
        except pytest.skip.Exception:
            status = results.SKIP
        self.counter += 1
        decision, _ = self.w.decide(f"probe/{self.counter}",
                                    {"status": status, "breaks_world": False}, probe_decision)
        agreed = results.FAIL if decision and decision["fail"] else status
        self.log.write(results.Probe(nodeid=f"checks/{stage}::p{self.counter}",
                                     name=f"p{self.counter}", stage=stage, status=status,
                                     agreed=agreed, duration=0.1, figure=rec.figure,
                                     measurements=rec.measurements, problems=tuple(problems)))

    def sampler(self) -> None:
        """The sampler probe's gather (its shards then go through an all_gather)."""
        ident = job_identity(os.environ)
        ident["order"] = "0123456789abcdef"
        self.w.gather("sampler-identity", ident)
        self.stand_in.note("all_gather", 2)

    def links(self, lay: subgroups.Layout, rec: Recorder) -> None:
        start = time.monotonic()
        mine, played = links_probe.play_link_rounds(self.w, lay, None,
                                                    self.settings.slow_link_ratio)
        links_probe.judge_links(self.w, lay, mine, played, self.settings.slow_link_ratio, rec,
                                start)

    def busbw(self, lay: subgroups.Layout, rec: Recorder) -> None:
        host = self.w.hosts_by_rank[self.w.rank]
        leader = lay.ranks[host][0] == self.w.rank
        intra = {host: 150.0} if leader else {}
        inter = 20.0 if self.w.rank == 0 else None
        self.stand_in.note("all_reduce", 2 * 3 + 2)
        nics.world_reference(self.w, "cross", 1)  # as under NCCL (judge_busbw asks for it)
        links_probe.judge_busbw(self.w, lay, intra, inter, rec)

    def straggler(self, rec: Recorder) -> None:
        self.stand_in.note("all_reduce", links_probe.STRAGGLER_ITERS)
        late = STEP_S * 1.5 if self.w.node_rank == self.slow else STEP_S
        work = [late + 1e-4 * ((self.w.rank * 7 + i) % 5) for i in range(
            links_probe.STRAGGLER_ITERS)]
        links_probe.judge_stragglers(self.w, work, rec)


def simulate(ranks: int, nodes: int, workdir: Path) -> dict[str, Any]:
    """Run R simulated ranks on N nodes; the store tallies, the collectives, rank 0's log."""
    per_node = ranks // nodes
    green = GreenStore()
    counting = CountingStore(green)
    stand_in = StandIn()
    slow = nodes // 3
    settings = WorkerSettings(checkpoint_dir=workdir / f"ckpt{ranks}", probe_timeout=600.0)
    # What each real rank computes for itself alone, computed once for all the threads:
    # its own /proc/self/maps and driver (the NCCL stack probe), the link plan of N nodes.
    test_node._nccl_view = functools.cache(REAL["nccl_view"])
    test_node._driver_version = functools.cache(REAL["driver"])
    pairing.initial_rounds = functools.cache(REAL["rounds"])
    facts = functools.cache(lambda: REAL["facts"](*test_node._nccl_view()[:1], os.environ,
                                                  test_node._driver_version(),
                                                  *test_node._nccl_view()[1:]))
    test_node.ncclstack = SimpleNamespace(stack_facts=lambda *a: facts(),
                                          compare_stacks=ncclstack.compare_stacks)
    links_probe.dist = stand_in
    links_probe.link_gbps = model_rate(f"{slow * per_node}")
    timing.dist = stand_in
    timing.exchange = lambda sends, recvs: stand_in.note("p2p batch")
    timing.MIN_P2P_BYTES = timing.MAX_P2P_BYTES = 1
    sims = [Rank(World(r, ranks, r % per_node, per_node, r // per_node, f"n{r // per_node}",
                       "gloo", 600.0, counting.client(f"rank{r}")), settings, stand_in, slow)
            for r in range(ranks)]
    errors: list[BaseException] = []

    def run(sim: Rank) -> None:
        try:
            sim.run()
        except BaseException as exc:  # reported after the last rank
            errors.append(exc)
    start = time.monotonic()
    green.run([functools.partial(run, s) for s in sims])
    secs = time.monotonic() - start
    if errors:
        raise errors[0]
    links_probe.link_gbps = timing.link_gbps
    others = [f"rank{r}" for r in range(1, ranks)]
    return {"ranks": ranks, "nodes": nodes, "seconds": secs,
            "other_ops": max(counting.ops_of(w) for w in others),
            "other_kib": max(counting.read[w] for w in others) / 1024,
            "rank0_ops": counting.ops_of("rank0"),
            "rank0_mib": counting.read["rank0"] / (1 << 20),
            "total_ops": counting.total(),
            "collectives": dict(stand_in.calls),
            "events": {s.w.rank: s.log.events for s in sims}}


def line(f: dict[str, Any]) -> str:
    return (f"{f['ranks']} ranks on {f['nodes']} nodes: per rank at most {f['other_ops']} "
            f"store ops and {f['other_kib']:.1f} KiB read; rank 0: {f['rank0_ops']} ops, "
            f"{f['rank0_mib']:.1f} MiB; simulated in {f['seconds']:.1f} s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=8192)
    ap.add_argument("--nodes", type=int, default=1024)
    ap.add_argument("--smaller", type=int, nargs="*", default=[64, 512, 2048],
                    help="smaller worlds printed first, same ranks per node")
    ap.add_argument("--details", action="store_true", help="collectives and totals per size")
    ap.add_argument("--report", type=Path, help="write the largest world's report here")
    args = ap.parse_args()
    if args.ranks % args.nodes:
        sys.exit("bench.world_scale: --ranks must be a multiple of --nodes")
    per_node = args.ranks // args.nodes
    with tempfile.TemporaryDirectory() as tmp:
        for r in [*args.smaller, args.ranks]:
            f = simulate(r, max(r // per_node, 1), Path(tmp))
            if args.details:
                print(f"  total ops {f['total_ops']}, collectives "
                      f"{json.dumps(f['collectives'], sort_keys=True)}")
            if args.report and r == args.ranks:  # before the last line, which scripts read
                write_report(f, args.report)
            print(line(f), flush=True)


def write_report(f: dict[str, Any], out: Path) -> None:
    """The report of the largest simulated world, as the launcher writes it: text, JSON and
    JUnit, from every simulated rank's events (sizes printed above the last line)."""
    out.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    report = build_report(f["events"], STAGES, [], elapsed=f["seconds"],
                          expected_world=f["ranks"])
    text = render_text(report)
    (out / "report.txt").write_text(text)
    (out / "report.json").write_text(json.dumps(to_json(report), default=str))
    junit.write(out / "junit.xml", report, f["events"])
    print(f"report of {f['ranks']} ranks on {f['nodes']} nodes in {out}: text "
          f"{len(text.splitlines())} lines, JSON {(out / 'report.json').stat().st_size >> 10} "
          f"KiB, JUnit {(out / 'junit.xml').stat().st_size >> 10} KiB, built in "
          f"{time.monotonic() - start:.1f} s", flush=True)


if __name__ == "__main__":
    main()
