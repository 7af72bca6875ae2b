"""Out-of-distribution checks for ``ddpcheck explain`` built from the development logs only.

Used by tests/unit/explain/test_engine.py and bench/explain_robustness.py. Each check changes
a development case the way unseen logs differ from it and says what explain answers then:

- drop: the lines that decided the answer are blanked (a cause printed in words no rule
  knows); explain must abstain or find no failure, never name another cause;
- code-out: every rule of the confirmed code is left out; the same, at the rule level;
- family-out: every rule of the confirmed code's family is left out;
- strip: launcher prefixes and timestamps removed (a user's copy-paste); same answer;
- interleave: ranks' lines mixed in another order (each rank's own order kept); same answer;
- noise: a healthy development log (NCCL INFO, warnings, progress) added as one more file;
  the answer stays, or explain abstains, never another cause.

Never reads a held-out case: the corpus's held-out set stays an unseen measure.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from ddpcheck.explain.engine import Explanation, explain_texts
from ddpcheck.explain.families import FAMILIES, PATTERNS
from ddpcheck.explain.inputs import read_inputs
from ddpcheck.explain.matching import Pattern
from tests.helpers.paths import DATA

Texts = list[tuple[str, str]]
OUTCOMES = ("same", "abstain", "none", "wrong")
PREFIX = re.compile(r"^\s*(?:\[(?:rank|default)\d+\]:\s?|\d{1,5}: |\[\d+,\d+\]<std\w+>:)")
TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?|"
                       r"\b[IWEF]\d{4} \d\d:\d\d:\d\d(?:\.\d+)?")
MAX_DROPS = 12  # rounds of blanking the deciding lines (evidence lists are cut at a few)


@dataclass(frozen=True)
class DevCase:
    """A development (or old tuned) case explain gets right: its texts and confirmed code."""

    id: str
    cause: str
    texts: tuple[tuple[str, str], ...]


def first_cause(e: Explanation) -> str:
    causes = [p.code for p in e.problems if not p.consequence_of]
    return causes[0] if causes else "none"


def outcome(e: Explanation, want: str) -> str:
    if first_cause(e) == want:
        return "same"
    if e.exit_code == 0:
        return "none"
    return "abstain" if e.undetermined else "wrong"


def _read_dev() -> list[dict]:
    """The manifest entries of the dev cases rule writers have read (a batch nobody has read
    yet stays out)."""
    from bench.explain_score import UNREAD_BATCHES  # bench imports this module

    corpus = DATA / "explain"
    return [c for m in sorted(corpus.glob("corpus-*.json"))
            for c in json.loads(m.read_text())["cases"]
            if c["split"] == "dev" and c.get("batch", "") not in UNREAD_BATCHES]


def dev_cases() -> Iterator[DevCase]:
    """Every dev and old case with a confirmed failure that explain names today."""
    entries = [(c["id"], c["cause"], DATA / "explain" / c["file"]) for c in _read_dev()]
    logs = DATA / "logs"
    entries += [(c["file"], c["expected"], logs / c["file"])
                for c in json.loads((logs / "CORPUS.json").read_text())["logs"]]
    for cid, cause, path in entries:
        texts = read_inputs([str(path)], None).logs
        e = explain_texts(texts)
        if cause != "none" and not e.undetermined and first_cause(e) == cause:
            yield DevCase(cid, cause, tuple(texts))


def healthy_texts() -> list[tuple[str, str]]:
    """The development set's healthy logs (confirmed cause "none"), each as one text."""
    paths = [DATA / "explain" / c["file"] for c in _read_dev() if c["cause"] == "none"]
    return [(f"healthy-{path.name}", text) for path in paths
            for _, text in read_inputs([str(path)], None).logs]


def with_noise(case: DevCase, noise: tuple[str, str]) -> Explanation:
    return explain_texts([noise, *case.texts])


def drop_deciding_lines(case: DevCase) -> Explanation:
    """Blank the lines that gave the answer until it changes."""
    names = [n for n, _ in case.texts]
    lines = [t.splitlines() for _, t in case.texts]
    e = explain_texts(case.texts)
    for _ in range(MAX_DROPS):
        causes = [x for x in e.found if not x.problem.consequence_of]
        if not causes or causes[0].problem.code != case.cause:
            break
        dropped = False
        for where in causes[0].evidence:
            src, _, num = where.rpartition(":")
            if src in names and num.isdigit() and int(num) <= len(lines[names.index(src)]):
                lines[names.index(src)][int(num) - 1] = ""
                dropped = True
        if not dropped:
            break
        e = explain_texts([(n, "\n".join(ls)) for n, ls in zip(names, lines, strict=True)])
    return e


def without(case: DevCase, patterns: Sequence[Pattern]) -> Explanation:
    return explain_texts(case.texts, patterns=patterns)


def code_out(case: DevCase) -> Explanation:
    return without(case, [p for p in PATTERNS if p.code != case.cause])


def family_of(code: str) -> str:
    for fam in FAMILIES:
        if any(p.code == code for p in fam.PATTERNS):
            return fam.__name__.rsplit(".", 1)[-1]
    return ""


def family_out(case: DevCase) -> Explanation:
    fam = next((f for f in FAMILIES if f.__name__.endswith("." + family_of(case.cause))), None)
    gone = {id(p) for p in fam.PATTERNS} if fam else set()
    return without(case, [p for p in PATTERNS if id(p) not in gone])


def stripped(case: DevCase) -> Explanation:
    return explain_texts([(n, "\n".join(TIMESTAMP.sub("", PREFIX.sub("", line))
                                        for line in t.splitlines()))
                          for n, t in case.texts])


def has_rank_prefixes(case: DevCase) -> bool:
    return any(PREFIX.match(line) for _, t in case.texts for line in t.splitlines())


def interleaved(case: DevCase, seed: int = 1) -> Explanation:
    """Each rank's lines in their order, the ranks mixed at random (lines without a prefix
    are one more stream)."""
    rnd = random.Random(seed)
    out: Texts = []
    for name, text in case.texts:
        streams: dict[str, list[str]] = {}
        for line in text.splitlines():
            m = PREFIX.match(line)
            streams.setdefault(m.group(0) if m else "", []).append(line)
        pools = [s for s in streams.values() if s]
        merged: list[str] = []
        while pools:
            pool = rnd.choice(pools)
            merged.append(pool.pop(0))
            pools = [s for s in pools if s]
        out.append((name, "\n".join(merged)))
    return explain_texts(out)


def tally(cases: Sequence[DevCase], check) -> dict[str, list[str]]:
    """Outcome -> the ids that had it."""
    got: dict[str, list[str]] = {o: [] for o in OUTCOMES}
    for case in cases:
        got[outcome(check(case), case.cause)].append(case.id)
    return got
