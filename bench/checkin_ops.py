"""Store operations of the real check-in and peer-probe verdict, per node, at N nodes.

Simulated nodes (threads) run ddpcheck.cluster.lifecycle's own steps through a counting store
(tests/helpers/counting_store.py) wrapping a real c10d HashStore; only the TCP connects of the peer
probes are simulated. Prints operations per node (mean, worst non-host, the host), the keys
the host reads and the wall time; healthy and with one node refusing every connection.
Target: linear in N overall, so constant per node (the host: one counter poll per pause,
bounded by time, plus O(N) keys read in a few multi_gets).

Usage: python -m bench.checkin_ops [--nodes 64 512 1024]
"""

from __future__ import annotations

import argparse

from tests.helpers import simnodes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, nargs="+", default=[64, 512, 1024])
    args = ap.parse_args()
    print("nodes  fault           ops/node  worst node  host ops  host keys  total ops  "
          "named                          seconds")
    for n in args.nodes:
        for refusing in (None, f"node{n // 2 + 1:04d}"):
            got = simnodes.simulate(n, refusing=refusing)
            mean, worst, host = got.ops_per_node()
            named = sorted({f"{p.code} {','.join(p.hosts)}" for st in got.states
                            for p in st.problems}) or ["nothing"]
            fault = f"{refusing} refuses" if refusing else "healthy"
            print(f"{n:5d}  {fault:15s} {mean:8.2f}  {worst:10d}  {host:8d}  "
                  f"{got.store.keys['node0000']:9d}  {got.store.total():9d}  "
                  f"{'; '.join(named):30s} {got.seconds:7.2f}")


if __name__ == "__main__":
    main()
