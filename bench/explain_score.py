"""How often ``ddpcheck explain`` names the confirmed root cause: right / abstained / wrong.

Reads every ``corpus-*.json`` manifest in the corpus directories (default
``tests/data/explain``; ``--corpus DIR`` as often as needed, e.g. a collector's worktree) and
the old ``tests/data/logs/CORPUS.json`` as its own "old (tuned)" set, runs the real explain
engine on each log (the command's own input reader: directories, gzip) and prints the score
for the development set, the held-out set and each family.

- right: the first root cause is the confirmed code (cause "none": explain exits 0);
- abstained: explain says it cannot tell the root cause (``Explanation.undetermined``: its
  verdict is UNEXPLAINED or ROOT CAUSE UNDETERMINED, i.e. the first cause is ``unexplained``, a
  generic code such as ``nccl-error``, or a symptom such as ``collective-timeout``) and that
  code is not the confirmed one;
- wrong: any other first cause, a confident wrong answer (or "no failure" on a failed job).

Cases whose manifest entry carries ``"batch"`` (e.g. ``stop24``) were collected after the rules
were written: their score is printed again on its own, per split. Their held-out part is the
measure of logs no rule writer has read; their dev part is read and tuned on like any dev case,
except in a batch of ``UNREAD_BATCHES`` (collected during this stop's rule writing), whose dev
part is neither in the dev lines nor listed by ``--show-dev-misses``: the whole batch is a
fresh measure, printed in its batch section.

Held-out cases are scored, never printed: only their counts appear, per family. Nothing here
may show a held-out log (that would end the held-out set's use as a measure).
Target on the held-out set: at least 85% right, at most 3% wrong.

``--dev-only`` scores the read dev cases alone: rule writers run it, so that the held-out
figures are looked at only when a stop's work is scored, not after each rule.

Usage: python -m bench.explain_score [--corpus DIR ...] [--no-old] [--show-dev-misses]
       [--dev-only]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ddpcheck.explain.engine import explain_inputs
from ddpcheck.explain.inputs import read_inputs
from ddpcheck.explain.stores import TWINS
from tests.helpers.paths import DATA

VERDICTS = ("right", "abstained", "wrong")
# The master's store's codes and the c10d rendezvous endpoint's: one cause (a port held, a
# name unknown), told apart only by the launcher's flags. Wrong answers that swap the two
# are counted on their own line (still wrong).
TWIN_PAIRS = {frozenset((a, b)) for a, (b, *_) in TWINS.items()}
# Batches no rule writer has read yet, dev part included: scored (both splits are a fresh
# measure), never listed by --show-dev-misses. A batch leaves this tuple when rule writers
# start to read its dev part; from then on only its held-out part is unread.
# stop27 was, until scored unread at stop 27 (11 / 5 / 0 before and after the stop-27 audits);
# stop28 until scored unread at stop 28 (16 / 6 / 3 before and after the stop-28 audits);
# stop29 until scored unread at stop 29 (15 / 8 / 5 of 28 before the stop-29 rule merges,
# 16 / 7 / 5 after); stop33 until scored unread at stop 33 (11 / 6 / 1 of 18, held-out part
# 5 / 2 / 0, with the stop-33 real-run rules of commit e7710f1); stop33b until scored unread
# at stop 33 (4 / 8 / 1 of 13, held-out part 2 / 2 / 0, with main at db53cca); stop33c until
# scored unread at stop 33 (10 / 4 / 1 of 15, held-out part 5 / 2 / 1, with main at 31f9384)
UNREAD_BATCHES: tuple[str, ...] = ()


@dataclass(frozen=True)
class Case:
    """One scored log: its set, family, confirmed cause and where it lies."""

    id: str
    split: str  # "dev", "heldout" or "old (tuned)"
    family: str
    cause: str
    path: Path
    batch: str = ""  # "stop24": collected after the rules were written, read by no rule writer


def load_cases(dirs: list[Path], old: bool) -> list[Case]:
    cases: list[Case] = []
    seen: set[str] = set()
    for d in dirs:
        for manifest in sorted(d.glob("corpus-*.json")):
            for c in json.loads(manifest.read_text())["cases"]:
                if c["id"] in seen:
                    continue
                seen.add(c["id"])
                cases.append(Case(c["id"], c["split"], c.get("family", "?"), c["cause"],
                                  d / c["file"], c.get("batch", "")))
    if old:
        logs = DATA / "logs"
        for c in json.loads((logs / "CORPUS.json").read_text())["logs"]:
            cases.append(Case(c["file"], "old (tuned)", c["file"].split("/")[0],
                              c["expected"], logs / c["file"]))
    return cases


# The evidence audit (tests/data/explain/EVIDENCE-*.json, written by auditors who write no
# rules): for each miss, whether its log shows the confirmed cause at all, and why not.
NO_EVIDENCE = ("symptom-only", "cut-short", "outside-log", "label-doubt")


def load_evidence(dirs: list[Path]) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for d in dirs:
        for path in sorted(d.glob("EVIDENCE-*.json")):
            found.update(json.loads(path.read_text())["cases"])
    return found


def evidence_lines(counts: Counter[str], misses: Counter[str]) -> list[str]:
    """What the audit says of one set's misses, and the right share among the cases whose
    log can show the cause (every miss whose log cannot is left out of the denominator)."""
    audited = sum(misses[k] for k in ("shows", *NO_EVIDENCE))
    if not audited:
        return []
    n, lacking = sum(counts.values()), sum(misses[k] for k in NO_EVIDENCE)
    why = ", ".join(f"{k} {misses[k]}" for k in NO_EVIDENCE if misses[k])
    out = [f"  evidence audit of its {audited} audited misses (of {n - counts['right']}): "
           f"the log shows the cause in {misses['shows']}, not in {lacking} ({why})"]
    if audited == n - counts["right"]:
        decidable, sure = n - lacking, misses["shows wrong"]
        out.append(f"  right among the {decidable} cases whose log can show the cause: "
                   f"{counts['right']} ({100 * counts['right'] / decidable:.1f}%), wrong "
                   f"{sure} ({100 * sure / decidable:.1f}%); a confident wrong answer on a log "
                   f"that cannot show the cause: {counts['wrong'] - sure}")
    return out


def judge(case: Case) -> tuple[str, str]:
    """(verdict, the first cause explain gave) for one case."""
    explanation = explain_inputs(read_inputs([str(case.path)], None))
    causes = [p.code for p in explanation.problems if not p.consequence_of]
    got = causes[0] if causes else "none"
    if got == case.cause or (case.cause == "none" and explanation.exit_code == 0):
        return "right", got
    if explanation.undetermined:
        return "abstained", got
    return "wrong", got


def _hedged(case: Case) -> bool:
    """A right answer given as an abstention (the confirmed code shown as a symptom)."""
    return explain_inputs(read_inputs([str(case.path)], None)).undetermined


def line(name: str, counts: Counter[str]) -> str:
    n = sum(counts.values())
    cells = "  ".join(f"{v} {counts[v]:3d} ({100 * counts[v] / n:5.1f}%)" for v in VERDICTS)
    return f"  {name:<26} n={n:3d}  {cells}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", action="append", type=Path, default=None,
                    help="a directory holding corpus-*.json (default tests/data/explain)")
    ap.add_argument("--no-old", action="store_true", help="leave out tests/data/logs")
    ap.add_argument("--show-dev-misses", action="store_true",
                    help="list each dev case that is not right (never a held-out one)")
    ap.add_argument("--dev-only", action="store_true",
                    help="score only the dev cases read by rule writers (no held-out figure, "
                         "no unread batch): what a rule writer runs while writing rules")
    args = ap.parse_args(argv)
    dirs = args.corpus or [DATA / "explain"]
    cases = load_cases(dirs, not args.no_old)
    if args.dev_only:
        cases = [c for c in cases if c.split == "dev" and c.batch not in UNREAD_BATCHES]
    t0 = time.monotonic()
    by_split: dict[str, Counter[str]] = defaultdict(Counter)
    by_family: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    by_batch: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    misses: list[str] = []
    hedged: Counter[str] = Counter()  # right, but as an abstention that shows that code
    twins: Counter[str] = Counter()  # wrong, by naming the other store's code
    evidence = load_evidence(dirs)
    audit: dict[str, Counter[str]] = defaultdict(Counter)  # per split: the misses' evidence
    for case in cases:
        verdict, got = judge(case)
        if verdict == "right" and got != "none" and case.split != "heldout":
            hedged[case.split] += _hedged(case)
        if not (case.split == "dev" and case.batch in UNREAD_BATCHES):
            # dev means read and tuned on: an unread batch's dev part counts only below
            by_split[case.split][verdict] += 1
            by_family[(case.split, case.family)][verdict] += 1
            twins[case.split] += verdict == "wrong" and frozenset((got, case.cause)) in TWIN_PAIRS
            if verdict != "right" and case.id in evidence:
                shows = bool(evidence[case.id]["log_shows_cause"])
                audit[case.split]["shows" if shows else evidence[case.id]["why"]] += 1
                audit[case.split]["shows wrong"] += shows and verdict == "wrong"
        if case.batch:
            by_batch[(case.batch, case.split)][verdict] += 1
            by_batch[(case.batch, "all")][verdict] += 1
        if case.split == "dev" and verdict != "right" and case.batch not in UNREAD_BATCHES:
            misses.append(f"  {verdict:<9} {case.id}: want {case.cause}, got {got}")
    elapsed = time.monotonic() - t0
    print(f"explain score over {len(cases)} cases from "
          f"{', '.join(str(d) for d in dirs)}{'' if args.no_old else ' + tests/data/logs'} "
          f"({elapsed:.1f} s)")
    for split in ("dev", "heldout", "old (tuned)"):
        if split not in by_split:
            continue
        print(f"\n{split}:")
        print(line("ALL", by_split[split]))
        if hedged[split]:
            print(f"  (of the right: {hedged[split]} hedged, ROOT CAUSE UNDETERMINED showing the "
                  "confirmed code as a symptom)")
        if twins[split]:
            print(f"  (of the wrong: {twins[split]} name the other store's twin of the confirmed "
                  "code: master-* for endpoint-* or back)")
        for text in evidence_lines(by_split[split], audit[split]):
            print(text)
        for (s, family), counts in sorted(by_family.items()):
            if s == split:
                print(line(family, counts))
    for batch in sorted({b for b, _ in by_batch}):
        unread = ("no rule writer has read any of it" if batch in UNREAD_BATCHES
                  else "its held-out part read by no rule writer")
        print(f"\nbatch {batch} (collected after the rules were written; {unread}):")
        for split in ("dev", "heldout", "all"):
            if (batch, split) in by_batch:
                print(line(split, by_batch[(batch, split)]))
    held = by_split.get("heldout")
    if held:
        n = sum(held.values())
        ok = held["right"] / n >= 0.85 and held["wrong"] / n <= 0.03
        print(f"\nheld-out target (>=85% right, <=3% wrong): {'MET' if ok else 'NOT MET'}")
    if args.show_dev_misses and misses:
        print("\ndev misses:\n" + "\n".join(misses))
    return 0


if __name__ == "__main__":
    sys.exit(main())
