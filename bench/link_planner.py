"""The link planner at scale, on generated link matrices: rounds, pair tests, verdicts.

Pure simulation (no processes): every node has a 25 GB/s path to the fabric; each measured
direction gets independent noise of +-30% (what CPU-bound figures show on these machines,
see MEASURING.md). Cases: a healthy mesh (many seeds: nothing may be named), one slow node
(every path x0.2), one slow link on a pair the plan measures (x0.1), and one slow link on a
pair the plan does not measure (reported as not measured: by design, see pairing.py). The
planner's rounds are played as the worker plays them, then ddpcheck.judgements.links judges.
Target: at most 2 log2(N) + 8 rounds; exactly the injected fault named.

Usage: python -m bench.link_planner [--nodes 1024] [--seeds 20]
"""

from __future__ import annotations

import argparse
import math
import random
from collections.abc import Callable

from ddpcheck.cluster import pairing
from ddpcheck.judgements import links

Speed = Callable[[int, int], float]


def play(n: int, speed: Speed, rng: random.Random) -> tuple[int, int, list]:
    """(rounds, pair tests, problems) for one cluster."""
    matrix: dict[tuple[int, int], float] = {}

    def measure(rounds: list[pairing.Round]) -> None:
        for r in rounds:
            for a, b in r:
                matrix[(a, b)] = speed(a, b) * rng.uniform(0.7, 1.3)
                matrix[(b, a)] = speed(b, a) * rng.uniform(0.7, 1.3)

    first = pairing.initial_rounds(n)
    measure(first)
    more = pairing.followup_rounds(n, matrix)
    measure(more)
    named = {(f"n{a}", f"n{b}"): v for (a, b), v in matrix.items()}
    problems = links.judge_links(named)
    return len(first) + len(more), sum(map(len, first + more)), problems


def case(n: int, name: str, speed: Speed, seed: int) -> tuple[int, int, list[str]]:
    rounds, pairs, problems = play(n, speed, random.Random(seed))
    return rounds, pairs, [f"{p.code} {','.join(p.hosts)}" for p in problems]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, nargs="+", default=[64, 512, 1024])
    ap.add_argument("--seeds", type=int, default=20)
    args = ap.parse_args()
    for n in args.nodes:
        target = 2 * math.log2(n) + 8
        planned = pairing.initial_rounds(n)
        on_plan = planned[0][len(planned[0]) // 2]  # a ring link in the middle
        measured = {frozenset(p) for r in planned for p in r}
        off_plan = next((a, b) for a in range(3, n) for b in range(a + 5, n)
                        if frozenset((a, b)) not in measured)
        slow_node = n // 3
        cases = {
            "healthy": lambda a, b: 25.0,
            f"slow node n{slow_node}":
                lambda a, b, x=slow_node: 25.0 * (0.2 if x in (a, b) else 1),
            f"slow link n{on_plan[0]}-n{on_plan[1]}":
                lambda a, b, p=set(on_plan): 25.0 * (0.1 if {a, b} == p else 1),
            f"slow link n{off_plan[0]}-n{off_plan[1]} (not planned)":
                lambda a, b, p=set(off_plan): 25.0 * (0.1 if {a, b} == p else 1),
        }
        print(f"N = {n}: target <= {target:.0f} rounds; full matrix would be "
              f"{n - 1 if n % 2 == 0 else n} rounds, {n * (n - 1) // 2} pair tests")
        for name, speed in cases.items():
            runs = [case(n, name, speed, s) for s in range(args.seeds if name == "healthy" else 3)]
            rounds = sorted({r for r, _, _ in runs})
            pairs = sorted({p for _, p, _ in runs})
            named = sorted({x for _, _, ps in runs for x in ps}) or ["nothing"]
            print(f"  {name:34s} rounds {rounds}  pair tests {pairs}  over {len(runs)} seeds "
                  f"named: {'; '.join(named)}")


if __name__ == "__main__":
    main()
