"""Network-only mode on many namespace hosts: time to verdict, connections, store operations.

One ``ddpcheck run --stages preflight`` per host (needs root, ip, iptables), all on one
bridge, node0 hosting the rendezvous. Each launcher imports torch (for the c10d store), and
on these 2 shared cores N concurrent imports take minutes, a cost real nodes pay in
parallel: so ``--rdzv-timeout`` covers the start-up, and the figure that matters is the time
from the last node joining (its card posted, wall clock) to the verdict on every host.
Two cases: healthy, and one host rejecting every incoming TCP connection except the
rendezvous port (iptables REJECT, so peers see "refused"): that host must be named, alone.
Every namespace and process is removed at the end, even on Ctrl-C.

Usage: sudo python -m bench.netonly_scale --hosts 32 64 [--rdzv-timeout 300]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from tests.cluster.hosts import PORT, finish_all, start_runs
from tests.cluster.netns import Cluster


def run_case(n: int, rdzv_timeout: float, refuse: int | None) -> dict:
    with Cluster(n) as cluster, tempfile.TemporaryDirectory() as tmp:
        if refuse is not None:  # everything but the rendezvous port is refused
            cluster[refuse].iptables("-A", "INPUT", "!", "-i", "lo", "-p", "tcp", "--syn", "!",
                                     "--dport", str(PORT), "-j", "REJECT", "--reject-with",
                                     "tcp-reset")
        runs = start_runs(cluster.hosts, Path(tmp), "--stages", "preflight", "--rdzv-timeout",
                          str(rdzv_timeout), "--timeout", str(rdzv_timeout + 60),
                          results=True, output="none")
        start = time.time()
        codes = finish_all(runs, timeout=rdzv_timeout + 120)
        wall = time.time() - start
        reports = [r.report() for r in runs if r.has_report()]
    return summarize(n, refuse, codes, reports, wall)


def summarize(n: int, refuse: int | None, codes: list[int], reports: list[dict],
              wall: float) -> dict:
    figs = [r.get("network", {}) for r in reports]
    joined = [f["joined_at"] for f in figs if "joined_at" in f]
    done = [f.get("peer_verdict_at", f.get("checkin_verdict_at", 0)) for f in figs]
    host_ops = figs[0].get("store_ops", 0) if figs else 0
    named = {(p["code"], tuple(p["hosts"])) for r in reports for p in r["problems"]}
    return {
        "hosts": n, "fault": f"node{refuse} refuses incoming" if refuse is not None else "none",
        "reports": len(reports), "exit codes": sorted(set(codes)),
        "verdict after last join (s)": round(max(done) - max(joined), 2) if joined else None,
        "join spread (s)": round(max(joined) - min(joined), 1) if joined else None,
        "connections out per node": _stat([f.get("connections_out", 0) for f in figs]),
        "connections in per node": _stat([f.get("connections_in", 0) for f in figs[1:]]),
        "store ops per node (non-host)": _stat([f.get("store_ops", 0) for f in figs[1:]]),
        "store ops (host)": host_ops, "named": sorted(named), "wall (s)": round(wall, 1),
    }


def _stat(values: list[int]) -> str:
    if not values:
        return "-"
    return f"median {statistics.median(values):g}, max {max(values)}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, nargs="+", default=[32, 64])
    ap.add_argument("--rdzv-timeout", type=float, default=300.0)
    ap.add_argument("--healthy-only", action="store_true")
    args = ap.parse_args()
    for n in args.hosts:
        cases = [None] if args.healthy_only else [None, n // 2 + 1]
        for refuse in cases:
            print(json.dumps(run_case(n, args.rdzv_timeout, refuse)), flush=True)


if __name__ == "__main__":
    main()
