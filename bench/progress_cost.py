"""Cost of the progress lines: ``ddpcheck run`` with progress beside ``ddpcheck run -q``.

Both are measured beside a bare torchrun (2 gloo ranks, init + barrier), as in
run_vs_bare_torchrun.py, interleaved A B C A B C ... so machine noise hits all alike.
Progress goes to a pipe (the plain, timestamped form a Slurm .out or CI log gets); with
``--live`` to a pseudo-terminal (the live line, redrawn every 0.2 s). Prints medians,
min-max, each run-to-bare ratio and the progress/quiet ratio. Target: within noise.

Usage: python -m bench.progress_cost [--pairs 3] [--live]
"""

from __future__ import annotations

import argparse
import os
import pty
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


def timed(argv: list[str], cwd: str, live: bool = False) -> tuple[float, int]:
    """Wall time and the number of stderr lines (progress lines) of one run."""
    start = time.perf_counter()
    if live:
        leader, follower = pty.openpty()
        done = subprocess.run(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=follower)
        os.close(follower)
        os.close(leader)
        lines = -1
    else:
        done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True)
        lines = len(done.stderr.splitlines())
    elapsed = time.perf_counter() - start
    if done.returncode not in (0, 1):  # 1: NOT READY (e.g. a noisy straggler) still timed
        sys.exit(f"{argv[:4]} failed ({done.returncode})")
    return elapsed, lines


def summary(name: str, xs: list[float]) -> str:
    return (f"{name:<24} median {statistics.median(xs):5.1f} s "
            f"(min {min(xs):.1f}, max {max(xs):.1f})")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--live", action="store_true", help="progress to a pseudo-terminal")
    args = ap.parse_args()
    runs: dict[str, list[float]] = {"progress": [], "quiet (-q)": [], "bare torchrun": []}
    with tempfile.TemporaryDirectory() as tmp:
        bare_py = Path(tmp) / "bare.py"
        bare_py.write_text(BARE)
        ours = [sys.executable, "-m", "ddpcheck", "run", "--nproc-per-node", "2",
                "--backend", "gloo"]
        bare = [sys.executable, "-m", "torch.distributed.run", "--standalone",
                "--nproc-per-node", "2", str(bare_py)]
        for i in range(args.pairs):
            t, lines = timed(ours, tmp, args.live)
            runs["progress"].append(t)
            runs["quiet (-q)"].append(timed([*ours, "-q"], tmp)[0])
            runs["bare torchrun"].append(timed(bare, tmp)[0])
            print(f"round {i + 1}: " + ", ".join(f"{k} {v[-1]:.1f} s" for k, v in runs.items())
                  + (f"  ({lines} progress lines)" if lines >= 0 else ""), flush=True)
    for k, v in runs.items():
        print(summary(k, v))
    med = {k: statistics.median(v) for k, v in runs.items()}
    print(f"ratio to bare torchrun: progress {med['progress'] / med['bare torchrun']:.2f}x, "
          f"quiet {med['quiet (-q)'] / med['bare torchrun']:.2f}x")
    print(f"progress / quiet: {med['progress'] / med['quiet (-q)']:.3f} (target: within the "
          f"min-max spread of either)")


if __name__ == "__main__":
    main()
