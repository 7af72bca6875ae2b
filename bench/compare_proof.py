"""Proof that ``ddpcheck compare`` finds a slowed link and stays quiet on healthy pairs.

Needs root, ip, tc. Three namespace hosts joined by a full mesh of veth links, each a
1 Gbit/s tc token bucket. Runs ``ddpcheck run --json`` (stages rendezvous, bandwidth) on
every host N+1 times on the healthy mesh and compares each consecutive pair (target: no
regression in any of the N pairs), then slows node0 <-> node2 to 300 Mbit/s, runs again and
compares with the first healthy run (target: the regressed links are exactly node0 <-> node2).

Usage: sudo python -m bench.compare_proof [--pairs 5]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.cluster.hosts import finish_all, start_runs
from tests.cluster.netns import Cluster

ARGS = ["--nproc-per-node", "1", "--stages", "rendezvous,bandwidth", "--rdzv-timeout", "40",
        "--probe-timeout", "30", "--timeout", "200"]


def run_once(cluster: Cluster, out: Path) -> Path:
    runs = start_runs(cluster.hosts, out.parent, *ARGS, tag=out.stem, output="none")
    finish_all(runs, timeout=300)
    return runs[0].json_path  # node0 hosts the rendezvous and rank 0: the whole report


def compare(a: Path, b: Path) -> tuple[int, list[str]]:
    done = subprocess.run([sys.executable, "-m", "ddpcheck", "compare", str(a), str(b)],
                          capture_output=True, text=True, timeout=60)
    worse = [line.split("  ")[0] for line in done.stdout.splitlines()
             if line.rstrip().endswith("REGRESSION")]
    return done.returncode, worse


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--keep", metavar="DIR", help="keep the reports here")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp, Cluster(3, topology="mesh") as cluster:
        tmp = args.keep or tmp
        Path(tmp).mkdir(parents=True, exist_ok=True)
        for h in cluster.hosts:
            h.rate_limit("1gbit")
        runs = [run_once(cluster, Path(tmp) / f"healthy{i}") for i in range(args.pairs + 1)]
        quiet = 0
        for i in range(args.pairs):
            code, worse = compare(runs[i], runs[i + 1])
            verdict = json.loads(runs[i + 1].read_text())["verdict"]
            print(f"healthy pair {i + 1}: exit {code}, regressions {worse or 'none'}; "
                  f"run: {verdict}", flush=True)
            quiet += code == 0
        cluster[0].rate_limit_link(cluster[2], "300mbit")
        slow = run_once(cluster, Path(tmp) / "slow")
        code, worse = compare(runs[0], slow)
        links = sorted(w for w in worse if w.startswith("link "))
        verdict = json.loads(slow.read_text())["verdict"]
        print(f"slowed node0<->node2: exit {code}, regressed links {links}, all {worse}; "
              f"run: {verdict}")
    print(f"healthy pairs without regression: {quiet}/{args.pairs} (target {args.pairs}/"
          f"{args.pairs}); slowed link found: "
          f"{links == ['link node0 -> node2', 'link node2 -> node0']} (target True)")


if __name__ == "__main__":
    main()
