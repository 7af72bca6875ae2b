"""What torchrun's own teardown did to a worker that would not end: its SIGKILL is no OOM.

Runs inside ``ddpcheck explain`` (a pure reader of log lines), before the ordering
(``firstfailure.refine``). Source: torch/distributed/elastic/multiprocessing/api.py, the
subprocess context's ``_close`` (torch 1.9 to 2.13): when a worker fails, the agent sends every
worker still running its death signal ("Sending process N closing signal SIGTERM"), waits up to
30 s for each, and for each one still alive logs

    Unable to shutdown process N via 15, forcefully exiting via 9

(``via Signals.SIGTERM ... via Signals.SIGKILL`` where Python formats the enum by name, before
3.11; torch 1.x spells it "exitting") and then kills it with SIGKILL. torchrun's summary then
shows that worker as "exitcode : -9 (pid: N)" / "Signal 9 (SIGKILL) received by PID N": the
line a SIGKILL rule reads as the kernel's OOM killer (``launcher.combine_killed``).

A worker that outlives SIGTERM for 30 s was alive and not running its default handler: stopped
(SIGSTOP, Ctrl-Z, a debugger or tracer attached), blocked in the kernel (uninterruptible I/O,
state D, e.g. a hung network filesystem), or stuck in native code under a Python SIGTERM
handler that never gets to run. Which of these, the log cannot say. When the other ranks timed
out in a collective and that worker printed no error of its own, it is the rank they waited
for: a collective timeout whose cause is that rank (a real run, tests/data/explain/runs/
s30-rank-sigstop: rank 1 stopped by SIGSTOP, rank 0's gloo "Timed out waiting 5000ms for recv",
rank 1 "exitcode : -9" 30 s later). Otherwise the kill is only shown as what it is, the
teardown's: a symptom, not a cause.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from ddpcheck.diagnoses import load_catalogue
from ddpcheck.explain import tracebacks
from ddpcheck.explain.causality import CAUSE, SYMPTOM, Explained
from ddpcheck.explain.reader import Record

FORCED = re.compile(r"Unable to shutdown process (?P<pid>\d+) via \S+?, forcefully exit+ing "
                    r"via (?:9|(?:Signals\.)?SIGKILL)\b")
# The pid a SIGKILL line names: the summary's "exitcode  : -9 (pid: N)" and "Signal 9 (SIGKILL)
# received by PID N", the agent's "failed (exitcode: -9) local_rank: 0 (pid: N)".
PID = re.compile(r"\(pid: (\d+)\)|received by PID (\d+)")
KILLED = frozenset({"host-out-of-memory", "rank-killed"})
WAIT = "collective-timeout"


def forced_pids(records: Sequence[Record]) -> frozenset[str]:
    """The workers torchrun killed with SIGKILL after they outlived its SIGTERM."""
    return frozenset(m["pid"] for r in records if (m := FORCED.search(r.text)))


def _pids(e: Explained) -> set[str]:
    return {a or b for a, b in PID.findall(e.problem.observed)}


def refine(found: list[Explained], records: Sequence[Record]) -> list[Explained]:
    """A SIGKILL of a worker torchrun itself killed is no OOM: the rank the others waited for
    in a timed-out collective when that rank raised nothing; else a symptom."""
    forced = forced_pids(records)
    if not forced:
        return found
    torn = [e for e in found if e.problem.code in KILLED and not e.problem.consequence_of
            and "SIGKILL" in e.problem.observed and (pids := _pids(e)) and pids <= forced]
    if not torn:
        return found
    stuck = sorted({rk for e in torn for rk in e.problem.ranks})
    raised = {c.rank for c in tracebacks.crashes(records)}
    waits = [e for e in found if e.problem.code == WAIT and not e.problem.consequence_of
             and e.problem.ranks and not set(e.problem.ranks) & set(stuck)]
    if not stuck or set(stuck) & raised or len(waits) != 1:
        return [_as_teardown(e) if e in torn else e for e in found]
    wait = waits[0]
    who = ", ".join(map(str, stuck))
    pids = ", ".join(sorted({p for e in torn for p in _pids(e)}))
    waiters = ", ".join(map(str, wait.problem.ranks))
    problem = load_catalogue()[WAIT].problem(
        f"rank {who} (pid {pids}) did not end on torchrun's SIGTERM within its 30 s and was "
        f"killed by torchrun itself ('Unable to shutdown process {pids} ... forcefully "
        f"exiting via 9'), while rank {waiters} timed out waiting | {wait.problem.observed}",
        cause=f"rank {who} never arrived in the collective rank {waiters} waited in, and it "
              "printed no error: it was alive but not running, stopped (SIGSTOP, Ctrl-Z, a "
              "debugger or tracer attached), blocked in the kernel (uninterruptible I/O on a "
              "hung filesystem), or stuck in native code; its SIGKILL (exitcode -9) is "
              "torchrun's teardown, not the OOM killer",
        fix=f"find what rank {who}'s process was doing while the others waited: on its host, "
            "ps -o pid,stat,wchan -p PID (T: stopped, D: in the kernel) and py-spy dump --pid "
            "PID while it hangs; resume or stop whatever stops it (a debugger, kill -STOP, a "
            "job suspended by the scheduler), and check the filesystems it reads",
        ranks=tuple(stuck), hosts=tuple(sorted({h for e in torn for h in e.problem.hosts})))
    evidence = tuple(e.evidence[0] for e in torn if e.evidence)
    return [replace(wait, problem=problem, root=True, grade=CAUSE, pinned=True,
                    next_run=f"while rank {who} hangs again: ps -o pid,stat,wchan and py-spy "
                    "dump --pid on its host; ddpcheck run --nodes N names a stopped rank",
                    evidence=(*evidence, *wait.evidence)[:4]) if e is wait
            else _as_teardown(e, WAIT) if e in torn else e for e in found]


def _as_teardown(e: Explained, of: str = "") -> Explained:
    """The kill shown as torchrun's: rank-killed, a symptom (or a consequence of ``of``)."""
    problem = load_catalogue()["rank-killed"].problem(
        f"{e.problem.observed} | torchrun killed it itself after it outlived SIGTERM for 30 s",
        cause="torchrun's teardown: the worker did not end on SIGTERM (stopped, blocked in "
              "the kernel, or stuck in native code), so the agent sent SIGKILL; not the OOM "
              "killer", ranks=e.problem.ranks, hosts=e.problem.hosts).where(consequence_of=of)
    return replace(e, problem=problem, grade=SYMPTOM, root=not of)
