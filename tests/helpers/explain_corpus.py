"""Every log the explain corpus holds, as inputs to ``explain`` (for the checks that run
explain on all of them: the prefilter's equivalence, ``bench/explain_speed.py``).

Held-out logs are listed like the others but flagged: whoever uses them may explain them and
compare the outputs programmatically, never print or read them (tests/data/explain/README.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tests.helpers.paths import DATA

EXPLAIN = DATA / "explain"


@dataclass(frozen=True)
class CorpusInput:
    """One input explain is run on: a log file or a run directory."""

    id: str
    path: Path
    heldout: bool


def corpus_inputs() -> list[CorpusInput]:
    """The dev and held-out logs, each recorded run (whole, its console alone, its
    --log-dir tree alone) and every file of tests/data/logs."""
    out = [CorpusInput(f"{split}/{p.stem}", p, split == "heldout")
           for split in ("dev", "heldout") for p in sorted((EXPLAIN / split).glob("*.log"))]
    for run in sorted(p for p in (EXPLAIN / "runs").iterdir() if p.is_dir()):
        out.append(CorpusInput(f"runs/{run.name}", run, False))
        out.extend(CorpusInput(f"runs/{run.name}/{part.name}", part, False)
                   for part in (run / "console.log", run / "logs") if part.exists()
                   and (part.is_file() or any(f.stat().st_size for f in part.rglob("*.log"))))
    logs = DATA / "logs"
    out.extend(CorpusInput(f"logs/{p.relative_to(logs)}", p, False)
               for p in sorted(logs.rglob("*")) if p.is_file() and p.name != "CORPUS.json")
    return out
