"""How ``ddpcheck explain`` answers development cases changed the way unseen logs differ.

Prints, per check (tests/helpers/explain_perturb.py: drop the deciding lines, leave out the
confirmed code's rules or its family's, strip prefixes and timestamps, interleave ranks, add
a healthy log beside it),
how many cases keep their answer, abstain, find no failure, or get a confident wrong cause,
and lists the wrong ones. A proxy for the held-out "wrong" rate that never reads a held-out
case. Usage: python -m bench.explain_robustness
"""

from __future__ import annotations

import sys
import time

from tests.helpers import explain_perturb as perturb

CHECKS = {
    "drop the deciding lines": perturb.drop_deciding_lines,
    "leave the code's rules out": perturb.code_out,
    "leave the family's rules out": perturb.family_out,
    "strip prefixes/timestamps": perturb.stripped,
}


def main() -> int:
    t0 = time.monotonic()
    cases = list(perturb.dev_cases())
    print(f"{len(cases)} development cases explain names today")
    checks = dict(CHECKS)
    prefixed = [c for c in cases if perturb.has_rank_prefixes(c)]
    for name, check in checks.items():
        got = perturb.tally(cases, check)
        print(f"  {name:<30} " + "  ".join(f"{o} {len(got[o]):3d}" for o in perturb.OUTCOMES))
        for cid in got["wrong"]:
            print(f"      wrong: {cid}")
    noises = perturb.healthy_texts()
    got = {o: [] for o in perturb.OUTCOMES}
    for noise in noises:
        for o, ids in perturb.tally(cases, lambda c, n=noise: perturb.with_noise(c, n)).items():
            got[o] += [f"{i} + {noise[0]}" for i in ids]
    print(f"  {'add a healthy log beside it':<30} " + "  ".join(
        f"{o} {len(got[o]):3d}" for o in perturb.OUTCOMES) + f"  ({len(noises)} healthy logs)")
    for cid in got["wrong"]:
        print(f"      wrong: {cid}")
    got = perturb.tally(prefixed, perturb.interleaved)
    print(f"  {'interleave ranks':<30} " + "  ".join(f"{o} {len(got[o]):3d}"
                                                    for o in perturb.OUTCOMES)
          + f"  (of {len(prefixed)} with rank prefixes)")
    print(f"({time.monotonic() - t0:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
