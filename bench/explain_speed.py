"""How fast ``ddpcheck explain`` reads a long log, with the literal prefilter off and on.

Builds a synthetic console log of ``--lines`` lines: training output of 8 ranks with
torchrun's ``[defaultN]:`` prefixes (step lines, NCCL INFO channel lines, progress bars),
and the real failure lines of a recorded run (``tests/data/explain/runs/<--run>/console.log``)
at its end, as a long job's console has them. Explains it (``explain_inputs(read_inputs(...))``,
reading included) with ``ddpcheck.explain.prefilter`` off and on, alternately (off on off
on ...: machine noise hits both alike), and prints each one's median seconds (min-max), lines
per second and the off/on ratio, and whether both said the same.

``--gates`` compares, the same way, the per-line gates and the shared search index
(``prefilter.GATES``) off and on, the prefilter on in both: the code before them and after.

``--check`` also compares explain's whole output (JSON, text, exit code) with the prefilter
and the gates off and on for every corpus input (tests/helpers/explain_corpus.py), held-out
logs included: it prints counts only, and the ids of differing non-held-out inputs (never a
held-out log).

Usage: python -m bench.explain_speed [--lines 50000] [--rounds 3] [--run mismatch-op] [--gates]
       [--check]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from ddpcheck.explain import prefilter
from ddpcheck.explain.engine import Explanation, explain_inputs
from ddpcheck.explain.inputs import read_inputs
from tests.helpers.explain_corpus import EXPLAIN, corpus_inputs

RANKS = 8


def noise(n: int, seed: int = 0) -> list[str]:
    """Lines a healthy 8-rank job prints: mostly steps, some NCCL INFO and progress bars."""
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        r, kind = rnd.randrange(RANKS), rnd.random()
        if kind < 0.05:
            out.append(f"[default{r}]:node0{r // 4}:{4000 + r}:{5000 + r} [{r % 4}] NCCL INFO "
                       f"Channel {i % 32:02d}/0 : {r}[{r % 4}] -> {(r + 1) % RANKS}"
                       f"[{(r + 1) % 4}] via P2P/IPC")
        elif kind < 0.07:
            out.append(f"[default{r}]:  {i % 100:3d}%|#####     | {i % 100}/100 "
                       f"[00:{i % 60:02d}<00:10, 3.2it/s]")
        else:
            out.append(f"[default{r}]:2026-11-24 06:{i // 600 % 60:02d}:{i % 60:02d} rank {r}: "
                       f"step {i} loss {rnd.random():.4f} lr 3.0e-04 grad_norm "
                       f"{rnd.random() * 3:.3f} tokens/s {rnd.randrange(40000, 50000)}")
    return out


def synthetic_log(lines: int, run: str) -> str:
    """The run's console with ``lines`` lines of training output after its first two."""
    real = (EXPLAIN / "runs" / run / "console.log").read_text().splitlines()
    return "\n".join([*real[:2], *noise(max(lines - len(real), 0)), *real[2:]]) + "\n"


def output(ex: Explanation) -> str:
    """All explain says: every problem, evidence, the verdict, the exit code."""
    return json.dumps(ex.to_json(), sort_keys=True) + ex.render_text() + str(ex.exit_code)


def explained(path: str, on: bool, switch: str = "ENABLED") -> tuple[float, str]:
    """Explain ``path`` with ``prefilter.<switch>`` (ENABLED, GATES or both: "ALL") on or off."""
    for name in ("ENABLED", "GATES") if switch == "ALL" else (switch,):
        setattr(prefilter, name, on)
    try:
        start = time.perf_counter()
        ex = explain_inputs(read_inputs([path], None))
        return time.perf_counter() - start, output(ex)
    finally:
        prefilter.ENABLED = prefilter.GATES = True


def speed(lines: int, rounds: int, run: str, switch: str = "ENABLED") -> bool:
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "console.log"
        log.write_text(synthetic_log(lines, run))
        n = len(log.read_text().splitlines())
        times: dict[str, list[float]] = {"off": [], "on": []}
        said: dict[str, set[str]] = {"off": set(), "on": set()}
        for i in range(rounds):
            for mode in ("off", "on"):
                t, out = explained(str(log), mode == "on", switch)
                times[mode].append(t)
                said[mode].add(out)
            print(f"round {i + 1}: off {times['off'][-1]:.2f} s, on {times['on'][-1]:.2f} s",
                  flush=True)
    print(f"\nsynthetic log: {n} lines (8 ranks' training output + the failure of run {run})")
    what = "prefilter" if switch == "ENABLED" else "gates    "
    for mode in ("off", "on"):
        xs = times[mode]
        med = statistics.median(xs)
        print(f"  {what} {mode:<3}  median {med:6.2f} s (min {min(xs):.2f}, max "
              f"{max(xs):.2f})  {n / med:9.0f} lines/s")
    ratio = statistics.median(times["off"]) / statistics.median(times["on"])
    same = said["off"] == said["on"] and len(said["on"]) == 1
    print(f"  off/on: {ratio:.1f}x faster; same output off and on: {'yes' if same else 'NO'}")
    return same


def check() -> bool:
    """Explain's whole output off and on (the prefilter and the gates), on every corpus
    input: counts and dev ids only."""
    inputs = corpus_inputs()
    differ = [c for c in inputs if explained(str(c.path), False, "ALL")[1]
              != explained(str(c.path), True, "ALL")[1]]
    held = sum(c.heldout for c in inputs)
    print(f"\nequivalence, prefilter and gates off vs on, whole output: {len(inputs)} inputs "
          f"({held} held out, compared only): {len(differ)} differ "
          f"({sum(c.heldout for c in differ)} held out)")
    for c in differ:
        if not c.heldout:
            print(f"  differs: {c.id}")
    return not differ


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lines", type=int, default=50_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--run", default="mismatch-op", help="a run of tests/data/explain/runs")
    ap.add_argument("--gates", action="store_true",
                    help="compare the gates off and on (prefilter.GATES) instead")
    ap.add_argument("--check", action="store_true",
                    help="also compare off and on on every corpus input (counts only)")
    args = ap.parse_args(argv)
    ok = speed(args.lines, args.rounds, args.run, "GATES" if args.gates else "ENABLED")
    if args.check:
        ok = check() and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
