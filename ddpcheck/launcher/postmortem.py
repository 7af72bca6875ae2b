"""Turn what the launcher saw of torchrun into diagnoses: killed, stopped, exited, deadline.

Runs in the launcher after torchrun has ended (or been ended). Pure over the rank events,
the exit files written by each worker wrapper, the launch outcome and torchrun's log tail,
so the user never sees a bare torchrun error.
"""

from __future__ import annotations

from dataclasses import dataclass

from ddpcheck.diagnoses import (
    CONSEQUENCE,
    LAUNCH_FAILED,
    PROBE_TIMEOUT,
    RANK_EXITED,
    RANK_KILLED,
    RANK_UNRESPONSIVE,
    ROOT_CAUSE,
    RUN_DEADLINE,
    RUN_INTERRUPTED,
    Problem,
    register,
)
from ddpcheck.judgements.readiness import SESSION_ERROR
from ddpcheck.launcher.launch import LaunchOutcome
from ddpcheck.ranges import format_ranks
from ddpcheck.results import End, Event, ExitStatus, Probe, ProbeStart, Start

WATCHDOG_ABORT = register(
    "watchdog-abort", "NCCL's watchdog aborted ranks after a collective timed out",
    "a collective did not complete within the process group's timeout on these ranks: another "
    "rank never entered it (stopped, killed, slower, or in a different collective) or the "
    "link between them hung; torchrun sets TORCH_NCCL_ASYNC_ERROR_HANDLING, so the watchdog "
    "takes every waiting rank down with SIGABRT",
    "act on the other problems (the rank that did not arrive); if there are none, rerun with "
    "NCCL_DEBUG=INFO and TORCH_NCCL_DUMP_ON_TIMEOUT=1 to see which rank and collective hung")
# What NCCL's watchdog prints before it aborts (ProcessGroupNCCL.cpp, torch 2.x); recorded in
# tests/data/logs/watchdog/allgather-sglang-1693.log (sgl-project/sglang#1693).
WATCHDOG_WORDS = ("Watchdog caught collective operation timeout",
                  "taking the entire process down", "detected by watchdog")


def aborted_by_watchdog(ex: ExitStatus, events: list[Event]) -> bool:
    """SIGABRT from NCCL's watchdog: said so in its last lines, or SIGABRT on an NCCL rank."""
    if ex.signal_name != "SIGABRT":
        return False
    nccl = any(isinstance(e, Start) and e.backend == "nccl" for e in events)
    return nccl or any(w in ln for ln in ex.tail for w in WATCHDOG_WORDS)


@dataclass(frozen=True)
class Activity:
    """Where a rank's log stops: its stage, the probe, and whether it was inside that probe
    (started, no result) or after it (the last probe with a result)."""

    stage: str = "startup"
    probe: str = ""
    inside: bool = False

    def describe(self) -> str:
        if self.inside:
            return f"during probe {self.probe} (stage {self.stage})"
        return f"in stage {self.stage}" + (f", after {self.probe}" if self.probe else "")


def activity(events: list[Event]) -> Activity:
    """What the rank was doing when its log stops."""
    last_start: ProbeStart | None = None
    for e in events:
        if isinstance(e, ProbeStart):
            last_start = e
        elif isinstance(e, Probe) and last_start and e.nodeid == last_start.nodeid:
            last_start = None
    if last_start:
        return Activity(last_start.stage or "?", last_start.nodeid.split("::")[-1], True)
    done = [e for e in events if isinstance(e, Probe)]
    return Activity(done[-1].stage or "?", done[-1].name) if done else Activity()


def last_activity(events: list[Event]) -> tuple[str, str]:
    """(stage, probe) the rank was in when its log stops: a started probe with no result."""
    a = activity(events)
    return a.stage, a.probe if a.inside or not a.probe else f"after {a.probe}"


def _pid(events: list[Event]) -> int | None:
    return next((e.pid for e in events if isinstance(e, Start)), None)


def _where(events: list[Event]) -> tuple[str, str]:
    a = activity(events)
    return a.stage, a.describe()


def diagnose_ranks(events: dict[int, list[Event]], exits: dict[int, ExitStatus],
                   outcome: LaunchOutcome, hosts: dict[int, str],
                   local: set[int] | None = None) -> list[Problem]:
    """One problem per rank that did not finish, from its exit file and process state.

    ``local`` are this node's ranks (those with a rank file here): one of them without an
    exit file lost its worker wrapper, which only a kill does.
    """
    problems = []
    pid_rank = {e.pid: r for r, evs in events.items() for e in evs if isinstance(e, Start)}
    for pid in outcome.stopped_pids:
        rank = pid_rank.get(pid)
        if rank is None:
            continue
        stage, where = _where(events.get(rank, []))
        problems.append(RANK_UNRESPONSIVE.problem(
            f"rank {rank} (pid {pid}) on {hosts.get(rank, '?')} is stopped (state T, e.g. "
            f"SIGSTOP or a debugger) {where}; ddpcheck ended it after the other ranks finished",
            cause="the process was suspended (kill -STOP, Ctrl-Z, a debugger or a frozen "
                  "container) and stopped answering its peers",
            fix=f"resume or kill pid {pid} on {hosts.get(rank, '?')} (kill -CONT {pid}); "
                "find who suspends it (job suspend, debugger) and rerun",
            ranks=[rank], hosts=[hosts.get(rank, "?")], stage=stage, role=ROOT_CAUSE))
    unfinished = {r: ex for r, ex in sorted(exits.items())
                  if not ex.finished and ex.pid not in outcome.stopped_pids}
    # NCCL's watchdog aborts every rank left waiting in a hung collective: what they saw of
    # the rank that did not arrive, never a kill of their own (one problem for all of them).
    aborted = {r: ex for r, ex in unfinished.items()
               if aborted_by_watchdog(ex, events.get(r, []))}
    unfinished = {r: ex for r, ex in unfinished.items() if r not in aborted}
    # A rank ended by SIGTERM after another rank failed was torn down by torchrun (or by us):
    # a consequence, not a cause. Report it only when nothing else explains the failure.
    causes = {r: ex for r, ex in unfinished.items() if ex.signal_name != "SIGTERM"}
    if not causes and (problems or aborted or outcome.deadline_hit or outcome.interrupted):
        unfinished = {}  # ended by us, or by torchrun after the watchdog's abort
    for rank, ex in (causes or unfinished).items():
        problems.append(_exit_problem(rank, hosts.get(rank, "?"), ex,
                                      activity(events.get(rank, []))))
    if aborted:
        problems.append(_watchdog_problem(aborted, events, hosts))
    problems += _session_errors(exits, hosts, exclude=set(causes or unfinished))
    if not (outcome.deadline_hit or outcome.interrupted or outcome.killed_after_end):
        problems += _lost_wrappers(events, exits, outcome, hosts, local or set())
    return problems


def _watchdog_problem(aborted: dict[int, ExitStatus], events: dict[int, list[Event]],
                      hosts: dict[int, str]) -> Problem:
    ranks = sorted(aborted)
    stage, where = _where(events.get(ranks[0], []))
    said = next((ln.strip() for r in ranks for ln in aborted[r].tail
                 if WATCHDOG_WORDS[0] in ln), "")
    return WATCHDOG_ABORT.problem(
        f"rank {format_ranks(ranks)} ended by SIGABRT from NCCL's watchdog {where}"
        + (f"; it said: {said[:300]}" if said else ""),
        ranks=ranks, hosts=sorted({hosts.get(r, "?") for r in ranks}), stage=stage,
        role=CONSEQUENCE)


def _lost_wrappers(events: dict[int, list[Event]], exits: dict[int, ExitStatus],
                   outcome: LaunchOutcome, hosts: dict[int, str], local: set[int]
                   ) -> list[Problem]:
    """Local ranks whose wrapper (ddpcheck.worker) never wrote the exit file: it was killed."""
    out = []
    for rank in sorted(local - set(exits)):
        pid = _pid(events.get(rank, []))
        if pid in outcome.stopped_pids:
            continue
        host = hosts.get(rank, "?")
        stage, where = _where(events.get(rank, []))
        out.append(RANK_KILLED.problem(
            f"rank {rank} on {host}: its worker process (ddpcheck.worker, the parent of pid "
            f"{pid}) ended without recording the rank's exit {where}; {outcome.launcher} "
            f"exited with code {outcome.returncode}",
            cause="the worker process was killed (the OOM killer, a scheduler limit, or "
                  "someone), taking the rank with it or leaving it orphaned",
            ranks=[rank], hosts=[host], stage=stage))
    return out


def _session_errors(exits: dict[int, ExitStatus], hosts: dict[int, str],
                    exclude: set[int]) -> list[Problem]:
    """Ranks whose pytest session failed as a whole (collection, import, usage errors)."""
    out = []
    for rank, ex in sorted(exits.items()):
        if rank in exclude or not ex.session_error:
            continue
        host = hosts.get(rank, "?")
        tail = _evidence(ex)
        fix = ""
        if ex.probes_missing:
            fix = ("the workers' python cannot import ddpcheck's probes: install ddpcheck with "
                   "`pip install .` (or `pip install ddpcheck`) into the environment that runs "
                   "torchrun on every node, and do not set PYTHONPATH to a source checkout")
        out.append(SESSION_ERROR.problem(
            f"pytest ended with exit code {ex.returncode} ({ex.session_error})"
            f"{tail}", fix=fix, ranks=[rank], hosts=[host],
            stage="startup"))
    return out


def _evidence(ex: ExitStatus, limit: int = 4) -> str:
    """The last lines the rank printed, as evidence in the observed text."""
    lines = [ln.strip() for ln in ex.tail if ln.strip()][-limit:]
    return ("; its last output: " + " | ".join(lines)) if lines else ""


def _exit_problem(rank: int, host: str, ex: ExitStatus, at: Activity) -> Problem:
    where, stage = at.describe(), at.stage
    if ex.signal_name:
        hint = " (the OOM killer sends SIGKILL)" if ex.signal_name == "SIGKILL" else ""
        return RANK_KILLED.problem(
            f"rank {rank} (pid {ex.pid}) on {host} was killed by {ex.signal_name}"
            f"{hint} {where}", ranks=[rank], hosts=[host], stage=stage)
    if ex.returncode == 1 and at.inside:
        return PROBE_TIMEOUT.problem(
            f"rank {rank} on {host} exited {where}: the probe ran past its deadline and "
            "pytest-timeout ended the process", ranks=[rank], hosts=[host], stage=stage)
    return RANK_EXITED.problem(f"rank {rank} (pid {ex.pid}) on {host} exited with code "
                               f"{ex.returncode} {where}{_evidence(ex)}", ranks=[rank],
                               hosts=[host], stage=stage)


def diagnose_launch(events: dict[int, list[Event]], outcome: LaunchOutcome, timeout: float,
                    log_tail: str) -> list[Problem]:
    """Problems of the run as a whole: the deadline, or torchrun failing before any rank."""
    problems = []
    if outcome.interrupted:
        problems.append(RUN_INTERRUPTED.problem(
            f"ddpcheck received {outcome.interrupted} after {outcome.elapsed:.1f} s and ended "
            f"{outcome.launcher}; stages after that point did not run"))
    if outcome.deadline_hit:
        silent = [r for r, evs in events.items() if not any(isinstance(e, End) for e in evs)]
        problems.append(RUN_DEADLINE.problem(
            f"the run did not end within its deadline of {timeout:.4g} s (--timeout)"
            + (f"; ranks still running: {', '.join(map(str, silent))}" if silent else "")))
    if not events and not outcome.deadline_hit and not outcome.interrupted:
        lines = [ln for ln in log_tail.strip().splitlines() if ln.strip()][-3:]
        problems.append(LAUNCH_FAILED.problem(
            f"{outcome.launcher} exited with code {outcome.returncode} before any rank started"
            + (": " + " | ".join(ln.strip()[:200] for ln in lines) if lines else "")))
    return problems


def torchrun_failed(events: dict[int, list[Event]], outcome: LaunchOutcome,
                    log_tail: str) -> list[Problem]:
    """torchrun failed after the ranks started, and nothing else explains it (the last word)."""
    if (not events or outcome.returncode in (0, None) or outcome.deadline_hit
            or outcome.interrupted or outcome.killed_after_end):
        return []
    lines = [ln for ln in log_tail.strip().splitlines()
             if "exitcode" in ln or "Error" in ln or "error" in ln][-3:]
    return [LAUNCH_FAILED.problem(
        f"{outcome.launcher} exited with code {outcome.returncode} after the ranks started"
        + (": " + " | ".join(ln.strip()[:200] for ln in lines) if lines else ""),
        cause="torchrun saw a worker or its own agent fail",
        fix="rerun with -v to see torchrun's output")]
