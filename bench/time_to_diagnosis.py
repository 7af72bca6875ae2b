"""Time to diagnosis on namespace hosts: ddpcheck vs bare torchrun, same faults.

Two faults on a 2-host cluster made of network namespaces (needs root, ip, iptables):
  1. the rendezvous port is dropped by iptables on the host node;
  2. the second node never starts.
For each, ``ddpcheck run --nodes 2`` is timed to its report (the time until the affected
node prints its diagnosis), and a bare ``torchrun --nnodes 2 --rdzv-backend c10d`` doing
init_process_group + barrier is timed on the same setup, stopped at a cap (say so).
Targets: dropped port diagnosed in < 15 s; missing node named within --rdzv-timeout + 5 s.

Usage: sudo python -m bench.time_to_diagnosis [--cap 120] [--rdzv-timeout 10]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.cluster.hosts import PORT, start_runs
from tests.cluster.netns import Cluster

BARE = ("import torch.distributed as dist\ndist.init_process_group('gloo')\n"
        "dist.barrier()\ndist.destroy_process_group()\n")


def timed(procs: list[subprocess.Popen], cap: float) -> tuple[list[float | None], list]:
    """Seconds until each process exits (None if still running at the cap, then killed)."""
    start, ends = time.monotonic(), [None] * len(procs)
    while time.monotonic() - start < cap and None in ends:
        for i, p in enumerate(procs):
            if ends[i] is None and p.poll() is not None:
                ends[i] = time.monotonic() - start
        time.sleep(0.1)
    for p in procs:
        if p.poll() is None:
            p.kill()
    return ends, [p.returncode for p in procs]


def ddpcheck(hosts, tmp: Path, rdzv_timeout: float, cap: float):
    runs = start_runs(hosts, tmp, "--rdzv-timeout", str(rdzv_timeout), nodes=2,
                      tag=str(time.monotonic_ns()), output="none")
    ends, _ = timed([r.proc for r in runs], cap)
    return ends, [r.codes() if r.has_report() else [] for r in runs]


def bare(hosts, tmp: Path, cap: float):
    script = tmp / "bare.py"
    script.write_text(BARE)
    procs = [h.popen([sys.executable, "-m", "torch.distributed.run", "--nnodes", "2",
                      "--nproc-per-node", "1", "--rdzv-backend", "c10d", "--rdzv-endpoint",
                      f"node0:{PORT}", "--rdzv-id", "bench", str(script)],
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for h in hosts]
    return timed(procs, cap)[0]


def show(label: str, ends) -> str:
    return ", ".join(f"node{i}: {e:.1f} s" if e is not None else f"node{i}: still running at "
                     "the cap (stopped)" for i, e in enumerate(ends))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cap", type=float, default=120.0)
    ap.add_argument("--rdzv-timeout", type=float, default=10.0)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d, Cluster(2) as c:
        tmp = Path(d)
        c[0].drop_port(PORT)
        ends, codes = ddpcheck(c.hosts, tmp, args.rdzv_timeout, args.cap)
        print(f"dropped port  ddpcheck: {show('', ends)}  problems: {codes}")
        print(f"dropped port  torchrun: {show('', bare(c.hosts, tmp, args.cap))}")
        c[0].clear_firewall()
        ends, codes = ddpcheck(c.hosts[:1], tmp, args.rdzv_timeout, args.cap)
        print(f"missing node  ddpcheck: {show('', ends)}  problems: {codes} "
              f"(target: rdzv-timeout {args.rdzv_timeout:g} s + 5 s)")
        print(f"missing node  torchrun: {show('', bare(c.hosts[:1], tmp, args.cap))}")


if __name__ == "__main__":
    main()
