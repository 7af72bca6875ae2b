"""Python tracebacks in a log: the exception that ended a rank, and the user's frame.

Runs wherever ``ddpcheck explain`` runs. A traceback is ``Traceback (most recent call
last):``, ``File "path", line N, in func`` frames, then the exception line; in a chained
traceback ("During handling ...", "The above exception was the direct cause ...") the last
one is what ended the process. The user's frame is the innermost one outside Python's and
the libraries' own files (site-packages, dist-packages, the standard library). Ranks'
lines may interleave: each rank's records are read on their own.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from ddpcheck.explain import prefilter
from ddpcheck.explain.reader import Record

START = re.compile(r"Traceback \(most recent call last\):")
FRAME = re.compile(r'^\s*File "(?P<path>[^"]+)", line (?P<line>\d+), in (?P<func>\S+)')
EXCEPTION = re.compile(r"^\s*(?P<type>(?:[\w]+\.)*\w*(?:Error|Exception|Interrupt|Exit|"
                       r"Warning|Failure))(?::\s?(?P<msg>.*))?$")
# Exceptions that wrap whatever failed below them (the launcher's summary, NCCL's and gloo's
# error summaries, a subprocess wrapper, a forwarded signal, a timeout): never a failure of
# their own, whatever precedes them.
WRAPPER = re.compile(r"ChildFailedError|CalledProcessError|SignalException|DistBackendError|"
                     r"NCCL error|nccl\w*Error|Gloo |gloo|enforce fail|ProcessGroup|"
                     r"Connection (?:reset|closed)|KeyboardInterrupt|SystemExit|"
                     r"ProcessRaisedException|ProcessExitedException|DistNetworkError|"
                     r"DistStoreError|TimeoutError|timed out|Timeout|[Ww]arning|"
                     # torch/_utils.py ExceptionWrapper.reraise: "Caught {type} {where}.\n
                     # Original {traceback}", where = "in DataLoader worker process N"
                     # (utils/data/_utils/worker.py) or "in pin memory thread for device N":
                     # the worker's own exception follows (runs/shm-too-small)
                     r"Caught \w+ in (?:DataLoader worker process|pin memory thread)|"
                     # utils/data/dataloader.py ``_try_get_data`` (torch 1.13 to 2.13):
                     # "raise RuntimeError('DataLoader worker (pid(s) {}) exited unexpectedly')
                     # from e", e being the worker's death (signal_handling.py: "DataLoader
                     # worker (pid N) is killed by signal: Bus error. It is possible that
                     # dataloader's workers are out of shared memory": runs-torch1.13/
                     # shm-too-small)
                     r"DataLoader worker \(pid\(s\) [\d, ]+\) exited unexpectedly")
# An exception line pasted without its traceback: "module.Type: message" at a line's start.
BARE = re.compile(r"^\s*(?:[a-z_]\w*\.)*[A-Z]\w*(?:Error|Exception): \S")
LIBRARY = re.compile(r"site-packages|dist-packages|/lib/python\d|<frozen |\\lib\\")
# torch/multiprocessing/spawn.py (ProcessRaisedException): the parent re-raises the child's
# traceback under "-- Process N terminated with the following error:"; N is the spawned
# process index, the rank mp.spawn passes as the function's first argument.
SPAWNED = re.compile(r"^\s*-- Process (?P<rank>\d+) terminated with the following error:")
# The public collective a rank was in: the innermost frame of torch/distributed/
# distributed_c10d.py whose function is not a private helper or c10d_logger's wrapper.
C10D_FRAME = re.compile(r"distributed[/\\]distributed_c10d\.py$")
# A wait that ends in autograd's engine (torch/autograd/graph.py _engine_run_backward, 2.x;
# torch/autograd/__init__.py backward, 1.x: "Variable._execution_engine.run_backward") is the
# gradient all_reduce DDP runs inside backward: its Reducer launches each bucket's allreduce
# from autograd hooks (torch/nn/parallel/distributed.py builds the C++ Reducer, torch/csrc/
# distributed/c10d/reducer.cpp; FSDP's reduce-scatter runs there too), so a rank timed out
# in loss.backward() was in that collective
# (runs/s30b-ddp-uneven-inputs: rank 0 in backward, rank 1 already in the final barrier).
AUTOGRAD_FRAME = re.compile(r"torch[/\\]autograd[/\\](?:graph|__init__)\.py$")
AUTOGRAD_FUNCS = frozenset({"_engine_run_backward", "backward"})
BACKWARD = "backward (its gradient all_reduce)"


@dataclass(frozen=True)
class Crash:
    """The last exception of one rank's traceback, with where the user's code was."""

    rank: int | None
    exception: str  # "RuntimeError: ..."
    user_frame: str  # "train.py:42 in main", or "" when every frame is a library's
    record: Record  # the exception line
    collective: str = ""  # "all_reduce": the torch.distributed call the rank was in, if any


def crashes(records: Sequence[Record]) -> list[Crash]:
    """One Crash per traceback, per rank, in log order."""
    out: list[Crash] = []
    open_: dict[int | None, str | None] = {}  # rank -> user frame so far (None: no traceback)
    coll: dict[int | None, str] = {}  # rank -> innermost torch.distributed collective so far
    spawned: int | None = None  # mp.spawn's "-- Process N terminated ..." before a traceback
    begin = 0
    texts = [r.text for r in records]
    starts = prefilter.lines_with(texts, [prefilter.literals(START)])  # None: every line
    if starts is not None:  # before the first traceback only "-- Process N" lines count
        if not starts:
            return out
        begin = min(starts)
        spawns = prefilter.lines_with(texts, [prefilter.literals(SPAWNED)])
        for k in sorted(spawns) if spawns is not None else range(begin):
            if k < begin and (m := SPAWNED.match(texts[k])) and records[k].rank is None:
                spawned = int(m["rank"])
    for r in itertools.islice(records, begin, None):
        text = r.text
        if (m := SPAWNED.match(text)) and r.rank is None:
            spawned = int(m["rank"])
            continue
        if r.rank is None and spawned is not None:
            r = Record(r.source, r.lineno, r.text, spawned, r.host, r.time)
        if START.search(text):
            open_[r.rank], coll[r.rank] = "", ""
            continue
        if r.rank not in open_ or open_[r.rank] is None:
            continue
        if m := FRAME.match(text):
            if C10D_FRAME.search(m["path"]) and not m["func"].startswith("_") and \
                    m["func"] != "wrapper":
                coll[r.rank] = m["func"]
            elif AUTOGRAD_FRAME.search(m["path"]) and m["func"] in AUTOGRAD_FUNCS:
                coll[r.rank] = BACKWARD
            elif not LIBRARY.search(m["path"]):
                open_[r.rank] = f"{m['path']}:{m['line']} in {m['func']}"
            continue
        if m := EXCEPTION.match(text):
            out.append(Crash(r.rank, text.strip()[:300], open_[r.rank] or "", r,
                             coll.get(r.rank, "")))
            open_[r.rank] = None
            if r.rank == spawned:
                spawned = None
    return out


def summary(records: Sequence[Record]) -> str:
    """The earliest rank's last exception and its user frame, for an abstention's quote."""
    found = crashes(records)
    if not found:
        return ""
    # A wrapper (ChildFailedError, ProcessRaisedException, a timeout) reports another
    # failure: the first exception that is not one is the one to quote.
    own = [c for c in found if not WRAPPER.search(c.exception)]
    first = min(own or found, key=lambda c: c.record.order)
    where = f" (user code: {first.user_frame})" if first.user_frame else ""
    rank = f"rank {first.rank}: " if first.rank is not None else ""
    return (f"{rank}{first.exception}{where} "
            f"[{first.record.source}:{first.record.lineno}]")


# The caret lines Python 3.11+ prints under a frame's code ("    ^^^^^^^^^^").
CARETS = re.compile(r"^\s*[\^~]+\s*$")


def cut_short(records: Sequence[Record]) -> str:
    """Where a traceback pasted without its exception line stopped: ``path:line in func:
    code`` of the innermost frame of a rank's traceback that is the last thing that rank
    printed; "" when every traceback ends in its exception (or other lines follow it)."""
    last: dict[int | None, tuple[Record, str] | None] = {}  # rank -> (frame, its code line)
    for r in records:
        text = r.text
        if m := FRAME.match(text):
            last[r.rank] = (r, "")
            continue
        at = last.get(r.rank)
        if at is None or not text.strip() or CARETS.match(text):
            continue
        frame, code = at
        last[r.rank] = None if code or EXCEPTION.match(text) or BARE.match(text) else \
            (frame, text.strip())
    cut = [at for at in last.values() if at is not None]
    if not cut:
        return ""
    frame, code = min(cut, key=lambda at: at[0].order)
    m = FRAME.match(frame.text)
    assert m is not None
    return (f"{m['path']}:{m['line']} in {m['func']}" + (f": {code[:160]}" if code else "")
            + f" [{frame.source}:{frame.lineno}]")


class Matcher(Protocol):
    """What ``unclaimed`` needs of a pattern: its compiled regex."""

    @property
    def regex(self) -> re.Pattern[str]: ...


def job_crashes(records: Sequence[Record]) -> list[Crash]:
    """The job's processes' crashes: torchrun's own traceback (launcher/api.py ``launch_agent``
    raises ChildFailedError) reports the workers' failures and is no process of the job."""
    return [c for c in crashes(records) if "ChildFailedError" not in c.exception]


Frames = dict[tuple[int | None, str], Crash]  # (rank, exception) -> its crash with a frame
# A traceback names an exception class with its module ("torch.AcceleratorError: ..."),
# torchelastic's error.json message with its bare name (``type(e).__name__``, in
# torch/distributed/elastic/multiprocessing/errors/error_handler.py): the same exception.
_MODULE = re.compile(r"^(?:[A-Za-z_]\w*\.)+(?=[A-Za-z_]\w*(?::|$))")


def _bare(exception: str) -> str:
    return _MODULE.sub("", exception, count=1)


def user_frames(records: Sequence[Record]) -> Frames:
    """Each rank's exceptions whose traceback shows the user's frame (read once per log)."""
    out: Frames = {}
    for c in crashes(records):
        if c.user_frame:
            out.setdefault((c.rank, _bare(c.exception)), c)
    return out


def framed(crash: Crash, frames: Frames) -> Crash:
    """The same exception of the same rank where its traceback shows the user's frame (a
    bare copy, such as error.json's message, has none), else ``crash`` itself."""
    return crash if crash.user_frame else frames.get((crash.rank, _bare(crash.exception)),
                                                     crash)


def unclaimed(records: Sequence[Record], patterns: Sequence[Matcher]) -> list[Crash]:
    """Exceptions no pattern explains and nothing wraps: a failure of its own, which a hint
    (a SIGKILL, a warning) may have followed. The first of each rank, earliest first."""
    bare = [Crash(r.rank, r.text.strip()[:300], "", r)
            for r in prefilter.records_for(records, BARE) if BARE.match(r.text)]
    first: dict[int | None, Crash] = {}
    ordered = sorted([*crashes(records), *bare], key=lambda c: c.record.order)
    claimed = [any(p.regex.search(c.record.text) for p in patterns) for c in ordered]
    chained = {(r.source, r.lineno) for r in prefilter.records_for(records, DIRECT_CAUSE)
               if DIRECT_CAUSE.match(r.text)}
    for k, crash in enumerate(ordered):
        text = crash.record.text
        if crash.rank in first or WRAPPER.search(text) or claimed[k] or (
                chained and _raised_into_claimed(k, ordered, claimed, chained)):
            continue
        first[crash.rank] = crash
    return list(first.values())


# CPython's separator for ``raise X from e`` (Lib/traceback.py): the exception above it is the
# direct cause of the one below, which ended the process.
DIRECT_CAUSE = re.compile(r"^\s*The above exception was the direct cause of the following "
                          r"exception:\s*$")
CHAIN_GAP = 2  # the blank line CPython prints before the separator, and one spare


def _raised_into_claimed(k: int, ordered: Sequence[Crash], claimed: Sequence[bool],
                         chained: set[tuple[str, int]]) -> bool:
    """Whether crash ``k`` is the direct cause (``raise ... from e``, its separator within
    ``CHAIN_GAP`` lines under it) of the next exception of its stream, which a pattern
    explains: the library translated it into the failure a rule reads (torchrun's
    ``int('gpu')`` ValueError raised into "Cuda is not available.": a real run,
    runs/s32c-nproc-gpu-on-cpu-host). A wrapper or an unexplained successor keeps it."""
    here = ordered[k].record
    if not any((here.source, here.lineno + g) in chained for g in range(1, CHAIN_GAP + 2)):
        return False
    after = next((j for j in range(k + 1, len(ordered))
                  if ordered[j].record.source == here.source
                  and ordered[j].record.lineno > here.lineno  # (a BARE copy of this line)
                  and ordered[j].rank == ordered[k].rank), None)
    return after is not None and claimed[after]
