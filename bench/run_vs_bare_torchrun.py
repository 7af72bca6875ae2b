"""Wall time of ``ddpcheck run`` (2 CPU ranks, all stages) beside a bare torchrun.

The bare torchrun runs 2 gloo ranks that only do init_process_group + barrier: the floor
any distributed job pays on this machine. Runs are interleaved (A B A B ...) so machine
noise hits both alike; prints medians, min-max and the ratio. Target: ratio under 3.

Usage: python -m bench.run_vs_bare_torchrun [--pairs 3]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BARE = """
import torch.distributed as dist
dist.init_process_group("gloo")
dist.barrier()
dist.destroy_process_group()
"""


def timed(argv: list[str], cwd: str) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"{argv[:4]} failed ({done.returncode}):\n{done.stdout[-2000:]}"
                 f"{done.stderr[-2000:]}")
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        bare_py = Path(tmp) / "bare.py"
        bare_py.write_text(BARE)
        bare = [sys.executable, "-m", "torch.distributed.run", "--standalone",
                "--nproc-per-node", "2", str(bare_py)]
        ours = [sys.executable, "-m", "ddpcheck", "run", "--nproc-per-node", "2",
                "--backend", "gloo"]
        a, b = [], []
        for i in range(args.pairs):
            a.append(timed(ours, tmp))
            b.append(timed(bare, tmp))
            print(f"pair {i + 1}: ddpcheck run {a[-1]:.1f} s, bare torchrun {b[-1]:.1f} s")
    ma, mb = statistics.median(a), statistics.median(b)
    print(f"ddpcheck run   median {ma:.1f} s (min {min(a):.1f}, max {max(a):.1f})")
    print(f"bare torchrun  median {mb:.1f} s (min {min(b):.1f}, max {max(b):.1f})")
    print(f"ratio          {ma / mb:.2f}x (target < 3x)")


if __name__ == "__main__":
    main()
