"""Ranks running different torch releases, told by their tracebacks' own frames.

Runs wherever ``ddpcheck explain`` runs (no torch). A Python traceback names each frame's
file, line and function and prints the code line under it. The same torch function with the
same code line at different line numbers in two ranks' (or two files') tracebacks means two
different copies of that torch file: the ranks run different torch releases. Recorded:
runs/s30b-netns-torch-versions-differ (node0 torch 2.5.1, node1 2.13): node0's
``errors/__init__.py", line 355, in wrapper`` / ``return f(*args, **kwargs)`` beside node1's
``line 367`` of the same; node0's gloo (2.5.1) cannot read the address node1 published
(``DistNetworkError: failed to format addr, unknown family=0``) and node1 waits out its store
key. torch.distributed promises no compatibility across releases (the store's and gloo's
messages change: torch/csrc/distributed/c10d/TCPStore*.cpp, ProcessGroupGloo.cpp), so the
mismatch is where such a job's failure comes from: a fact (two copies of one file) that
leads its symptoms.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ddpcheck.diagnoses import load_catalogue
from ddpcheck.explain.causality import CAUSE, Explained
from ddpcheck.explain.reader import Record

TORCH_FRAME = re.compile(r'^\s*File "(?P<prefix>[^"]*[/\\](?:site|dist)-packages)[/\\]'
                         r'(?P<file>torch[/\\][^"]+\.py)", line (?P<line>\d+), in (?P<func>\S+)')


# Two split frames at least: one code line at two line numbers can also be two functions of
# one name in one file that happen to share a line (two decorators' ``wrapper`` in one module
# returning ``func(*args, **kwargs)``); a different release moves every frame below an edit.
SPLIT_FRAMES = 2


def different_releases(records: Sequence[Record]) -> Explained | None:
    """The first torch frame whose function and code line sit at two line numbers in two
    ranks' or two files' tracebacks, when another frame is split so too, as a
    version-mismatch (None otherwise). One pass, one entry per distinct frame."""
    by_key: dict[tuple[str, str, str], tuple[int, Record]] = {}
    split: list[tuple[tuple[str, str, str], tuple[int, Record], tuple[int, Record]]] = []
    split_keys: set[tuple[str, str, str]] = set()
    previous: Record | None = None
    frame: tuple[re.Match[str], Record] | None = None
    for r in records:
        if frame is not None and previous is not None and r.source == previous.source \
                and r.rank == frame[1].rank and r.text.strip():
            m, at = frame
            key = (m["file"].replace("\\", "/"), m["func"], r.text.strip())
            line = int(m["line"])
            seen = by_key.setdefault(key, (line, at))
            other = seen[1]
            if (seen[0] != line and key not in split_keys
                    and (other.source, other.rank) != (at.source, at.rank)):
                split_keys.add(key)
                split.append((key, seen, (line, at)))
                if len(split) >= SPLIT_FRAMES:
                    key, a, b = split[0]
                    # a condition from the start, not an event: at its file's first line
                    start = next(x for x in records if x.source == b[1].source)
                    return _hint(key, a, b, start)
        frame = None
        if 'File "' in r.text and (m := TORCH_FRAME.match(r.text)):
            frame = (m, r)
        previous = r
    return None


def _hint(key: tuple[str, str, str], a: tuple[int, Record], b: tuple[int, Record],
          start: Record) -> Explained:
    file, func, code = key
    where = [f"{r.source}" + (f" rank {r.rank}" if r.rank is not None else "") + f": line {n}"
             for n, r in (a, b)]
    ranks = tuple(sorted({r.rank for _, r in (a, b) if r.rank is not None}))
    hosts = tuple(sorted({r.host for _, r in (a, b) if r.host}))
    problem = load_catalogue()["version-mismatch"].problem(
        f"{file} in {func} ({code[:80]}) at two lines: {where[0]}; {where[1]}",
        cause=f"the ranks run different torch releases: the same code of {file} sits at line "
              f"{a[0]} in one rank's traceback and {b[0]} in another's; torch.distributed's "
              "store and gloo messages differ across releases, so the ranks cannot form or "
              "use one process group",
        fix="install the same torch release on every node (the same container image or "
            "venv); compare python -c 'import torch; print(torch.__version__)' on each",
        ranks=ranks, hosts=hosts)
    return Explained(problem, start, True, "ddpcheck run --nodes N (preflight compares "
                     "every node's versions)", (f"{a[1].source}:{a[1].lineno}",
                                                f"{b[1].source}:{b[1].lineno}"), CAUSE)
