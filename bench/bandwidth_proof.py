"""Proof that ddpcheck's bandwidth figures and verdicts are right, on namespace hosts.

Needs root, ip, tc (token bucket; netem is not in these kernels). Hosts are joined by a
full mesh of veth links, so a tc limit on one link slows exactly that link. Prints:

1. point-to-point GB/s measured by ddpcheck's pairwise-link probe on a 2-host link
   limited to 100 Mbit/s .. 2 Gbit/s, beside the imposed rate (target: within 10%);
2. ddpcheck's all-reduce busbw (16 MiB) beside an independent plain torch.distributed
   timing loop, run side by side A B A B on the same 2 hosts (target: within 10%);
3. with 4 hosts: one link limited -> the problems ddpcheck reports (target: exactly that
   link); one node limited on all its links -> (target: exactly that node);
4. the pairwise stage's wall time with 2, 3 and 4 hosts (target: linear growth).

Usage: sudo python -m bench.bandwidth_proof [--rates 100mbit,300mbit,1gbit,2gbit]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.cluster.hosts import PORT, finish_all, start_runs
from tests.cluster.netns import Cluster, parse_rate

PLAIN_LOOP = """
import os, statistics, time, torch, torch.distributed as dist
dist.init_process_group("gloo")
n = dist.get_world_size()
t = torch.ones((16 << 20) // 4)
for _ in range(3):
    dist.all_reduce(t)
trials = []
for _ in range(5):
    dist.barrier()
    start = time.perf_counter()
    for _ in range(3):
        dist.all_reduce(t)
    trials.append((time.perf_counter() - start) / 3)
busbw = (16 << 20) / statistics.median(trials) / 1e9 * 2 * (n - 1) / n
if dist.get_rank() == 0:
    print(f"BUSBW {busbw:.4f}")
dist.destroy_process_group()
"""


def ddpcheck_run(cluster, tmp: Path, stages: str, tag: str) -> dict:
    runs = start_runs(cluster.hosts, tmp, "--nproc-per-node", "1", "--stages", stages,
                      "--probe-timeout", "60", "--timeout", "400", tag=tag, output="none")
    finish_all(runs, timeout=450)
    return runs[0].report()


def plain_busbw(cluster, tmp: Path) -> float:
    script = tmp / "plain.py"
    script.write_text(PLAIN_LOOP)
    procs = [h.popen([sys.executable, "-m", "torch.distributed.run", "--nnodes", "2",
                      "--nproc-per-node", "1", "--rdzv-backend", "c10d", "--rdzv-endpoint",
                      f"node0:{PORT + 1}", "--rdzv-id", "plain", str(script)],
                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
             for h in cluster.hosts]
    outs = [p.communicate(timeout=300)[0] for p in procs]
    return next(float(line.split()[1]) for out in outs for line in out.splitlines()
                if line.startswith("BUSBW"))


def sweep_busbw_16mib(report: dict) -> float:
    return next(r["busbw"] for r in report["measurements"]["allreduce_sweep"]
                if r["size"] == 16 << 20)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rates", default="100mbit,300mbit,1gbit,2gbit")
    ap.add_argument("--pairs", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        print("1. point-to-point vs the imposed tc rate (2 hosts, both directions)")
        with Cluster(2, topology="mesh") as c:
            for rate in args.rates.split(","):
                c[0].rate_limit_link(c[1], rate)
                m = ddpcheck_run(c, tmp, "bandwidth", f"rate{rate}")["measurements"]
                imposed = parse_rate(rate) / 8 / 1e9
                for k, v in m["link_matrix"].items():
                    print(f"   {rate:>8}: {k} {v:.4f} GB/s, imposed {imposed:.4f} GB/s, "
                          f"ratio {v / imposed:.3f}")
            c[0].clear_link_limit(c[1])
            print("2. ddpcheck busbw (16 MiB) vs a plain torch.distributed loop, A B A B")
            ours, plain = [], []
            for i in range(args.pairs):
                ours.append(sweep_busbw_16mib(ddpcheck_run(c, tmp, "bandwidth", f"bw{i}")))
                plain.append(plain_busbw(c, tmp))
                print(f"   pair {i + 1}: ddpcheck {ours[-1]:.3f} GB/s, plain loop "
                      f"{plain[-1]:.3f} GB/s")
            mo, mp = statistics.median(ours), statistics.median(plain)
            print(f"   medians: ddpcheck {mo:.3f}, plain {mp:.3f}, ratio {mo / mp:.3f}")
        print("3. verdicts on 4 hosts")
        with Cluster(4, topology="mesh") as c:
            for h in c.hosts:  # the network sets the figures, not which "host" got a core
                h.rate_limit("1gbit")
            c[0].rate_limit_link(c[2], "200mbit")
            r = ddpcheck_run(c, tmp, "bandwidth", "onelink")
            print("   node0<->node2 limited:", [(p["code"], p["hosts"]) for p in r["problems"]])
            c[0].rate_limit_link(c[2], "1gbit")
            c[3].rate_limit("200mbit")
            r = ddpcheck_run(c, tmp, "bandwidth", "onenode")
            print("   node3 limited:       ", [(p["code"], p["hosts"]) for p in r["problems"]])
        print("4. pairwise stage wall time")
        for n in (2, 3, 4):
            with Cluster(n, topology="mesh") as c:
                r = ddpcheck_run(c, tmp, "bandwidth", f"wall{n}")
                print(f"   {n} hosts: {r['measurements']['links_wall_s']:.2f} s "
                      f"({n - 1 if n % 2 == 0 else n} rounds)")


if __name__ == "__main__":
    main()
