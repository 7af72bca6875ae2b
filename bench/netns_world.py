"""A real world as large as this machine allows: 4 namespace hosts x 4 ranks, every stage.

One ``ddpcheck run --nproc-per-node 4`` per host (needs root, ip, iptables; see
tests/cluster/netns.py), node0 hosting the rendezvous, a checkpoint directory every host
sees (the namespaces share the file system). Prints, from each host's JSON report: the
exit code and verdict, every stage's status and duration on the rank-0 node, the links
measured, the straggler and busbw figures, and the wall time. Every namespace and process
is removed at the end, even on Ctrl-C.

Usage: sudo python -m bench.netns_world [--hosts 4] [--nproc 4] [--timeout 900]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from tests.cluster.hosts import finish_all, start_runs
from tests.cluster.netns import Cluster


def run(hosts: int, nproc: int, timeout: float, stages: str = "",
        probe_timeout: float = 240.0) -> dict:
    with Cluster(hosts) as cluster, tempfile.TemporaryDirectory() as tmp:
        ckpt = Path(tmp) / "ckpt"
        ckpt.mkdir()
        start = time.time()
        runs = start_runs(cluster.hosts, Path(tmp), "--nproc-per-node", str(nproc),
                          "--checkpoint-dir", str(ckpt), "--timeout", str(timeout),
                          "--probe-timeout", str(probe_timeout),
                          *(("--stages", stages) if stages else ()),
                          results=True, output="none")
        codes = finish_all(runs, timeout=timeout + 60)
        wall = time.time() - start
        reports = [r.report() for r in runs if r.has_report()]
    first = reports[0] if reports else {}
    m = first.get("measurements", {})
    return {
        "hosts": hosts, "ranks": hosts * nproc, "exit codes": codes,
        "verdicts": sorted({r.get("verdict", "") for r in reports}),
        "stages": {s["name"]: s["status"] for s in first.get("stages", [])},
        "problems": sorted({(p["code"], p.get("observed", "")[:160])
                            for p in first.get("problems", [])}),
        "links measured": len(m.get("link_matrix", {})),
        "slowest link GB/s": min(m.get("link_matrix", {}).values(), default=None),
        "intra-node busbw GB/s": m.get("intra_node_busbw"),
        "cross-node busbw GB/s": m.get("cross_node_busbw"),
        "straggler ranks recorded": len(m.get("straggler_work_ms", {})),
        "wall (s)": round(wall, 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=4)
    ap.add_argument("--nproc", type=int, default=4)
    ap.add_argument("--timeout", type=float, default=900.0)
    ap.add_argument("--stages", default="", help="as ddpcheck run --stages (default: all)")
    ap.add_argument("--probe-timeout", type=float, default=240.0,
                    help="16 gloo ranks on 2 shared cores: the 16 MiB sweep alone passes 40 s")
    args = ap.parse_args()
    print(json.dumps(run(args.hosts, args.nproc, args.timeout, args.stages,
                         args.probe_timeout), default=str), flush=True)


if __name__ == "__main__":
    main()
