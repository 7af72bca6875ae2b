"""A job on Windows that asks for NCCL: torch's Windows builds have none.

Runs wherever ``ddpcheck explain`` runs. torch's distributed documentation ("Backends"):
Windows builds support every backend but NCCL, so ``init_process_group("nccl")`` there
raises "Distributed package doesn't have NCCL built in" (distributed_c10d.py, once the
store has connected). Users paste the lines before that error as often as the error:
Lightning's start-up, c10d's Winsock retries, the frames of the call.

Read from the structure of the log, not from one message:

- the process is a Windows one: its own paths (``C:\\...\\site-packages\\...``), torch's
  Windows build tree in c10d's warnings (``C:\\actions-runner\\_work\\pytorch\\pytorch\\
  builder\\windows\\...``), or Winsock error numbers (``system error: 10049 - The requested
  address is not valid in its context.``: WSA codes exist only on Windows);
- the job asks for NCCL: in words (``backend nccl``, ``backend: nccl``, ``backend='nccl'``),
  or Lightning's default: on a CUDA device (``GPU available: True (cuda), used: True``) its
  ``_get_default_process_group_backend_for_device`` returns "nccl" whatever the OS, and the
  ranks entered init (``Initializing distributed: GLOBAL_RANK: ...``);
- no line says the world formed with another backend (``distributed_backend=gloo``, rank
  0's ``All distributed processes registered``).

The words make it cause-grade (the call cannot succeed); Lightning's default makes it a hint
(a user may have set ``process_group_backend="gloo"``): any cause-grade line in the log,
e.g. a store that failed first, comes first.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ddpcheck.diagnoses import BACKEND_UNAVAILABLE
from ddpcheck.explain.causality import CAUSE, HINT, Explained
from ddpcheck.explain.reader import Record

WINDOWS = re.compile(r"\b[A-Za-z]:\\(?:[^\\\s\"]+\\)*?(?:site-packages|envs|Python\d*|"
                     r"actions-runner)\\|\\builder\\windows\\pytorch\\|"
                     r"system error: 100\d\d - ")
ASKED = re.compile(r"(?i)\bbackend(?: is|[ =:]+)\s*['\"]?nccl\b")
CUDA_USED = re.compile(r"GPU available: True(?: \(cuda\))?, used: True")
ENTERED = re.compile(r"(?i)initializing (?:ddp|distributed): GLOBAL_RANK: \d+")
OTHER_BACKEND = re.compile(r"distributed_backend=(?!nccl)\w+|All distributed processes "
                           r"registered|\bbackend(?: is|[ =:]+)\s*['\"]?(?:gloo|mpi|ucc)\b",
                           re.I)
NEXT = "ddpcheck run --backend gloo (works on every torch build)"
CAUSE_TEXT = ("the job runs on Windows, whose torch builds have no NCCL (torch supports every "
              "backend but NCCL there), and it asks for NCCL{how}: init_process_group fails "
              "with \"Distributed package doesn't have NCCL built in\" once the store connects")
FIX = ("use the gloo backend on Windows (init_process_group(backend=\"gloo\"); Lightning: "
       "Trainer(strategy=DDPStrategy(process_group_backend=\"gloo\")); Accelerate/DeepSpeed: "
       "their backend setting), or run the job on Linux or WSL2, where torch has NCCL")


def windows_nccl(found: Sequence[Explained], records: Sequence[Record]) -> list[Explained]:
    """Add ``backend-unavailable`` when a Windows process asks for NCCL (in words: cause;
    as Lightning's CUDA default: hint), unless explain already named it."""
    if any(e.problem.code == BACKEND_UNAVAILABLE.code for e in found):
        return list(found)
    windows = next((r for r in records if WINDOWS.search(r.text)), None)
    if windows is None or any(OTHER_BACKEND.search(r.text) for r in records):
        return list(found)
    asked = next((r for r in records if ASKED.search(r.text)), None)
    entered = next((r for r in records if ENTERED.search(r.text)), None)
    default = entered if any(CUDA_USED.search(r.text) for r in records) else None
    if (asked or default) is None:
        return list(found)
    seen: Record = asked or default  # type: ignore[assignment]
    how = "" if asked else " (Lightning's default backend on a CUDA device)"
    mark = WINDOWS.search(windows.text)
    problem = BACKEND_UNAVAILABLE.problem(
        f"a Windows process ({mark[0].strip() if mark else ''} at {windows.source}:"
        f"{windows.lineno}) asks for NCCL: {seen.text.strip()[:160]}",
        cause=CAUSE_TEXT.format(how=how), fix=FIX,
        ranks=(seen.rank,) if seen.rank is not None else ())
    evidence = tuple(f"{r.source}:{r.lineno}" for r in sorted({windows, seen},
                                                                key=lambda r: r.order))
    return [*found, Explained(problem, seen, True, NEXT, evidence, CAUSE if asked else HINT)]
