"""``ddpcheck run`` end to end on this node: preflight, torchrun, report, exit code.

Runs in the launcher. Always ends with a report: preflight problems stop the run before
torchrun (the stages are then reported as blocked by preflight), and every torchrun
failure is turned into a diagnosis by postmortem.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import time
from pathlib import Path

from ddpcheck import results
from ddpcheck.cluster import ending, lifecycle
from ddpcheck.cluster.lifecycle import ClusterState
from ddpcheck.diagnoses import Problem
from ddpcheck.launcher.config import NETWORK_ONLY, Config, new_run_id
from ddpcheck.launcher.fdlimit import open_files_problems
from ddpcheck.launcher.launch import (
    LaunchOutcome,
    default_results_dir,
    raise_interrupted,
    run_torchrun,
    torchrun_argv,
    worker_env,
)
from ddpcheck.launcher.postmortem import diagnose_launch, diagnose_ranks, torchrun_failed
from ddpcheck.launcher.preflight import auto_nproc, node_preflight
from ddpcheck.launcher.progress import Progress, read_appended
from ddpcheck.launcher.spawn import run_spawned
from ddpcheck.launcher.spawnplan import SpawnPlan
from ddpcheck.node.nccl import parse_nccl_debug_transport
from ddpcheck.report.as_json import to_json
from ddpcheck.report.build import (
    Report,
    StageResult,
    build_report,
    hosts_of_events,
    mark_consequences,
    merge_problems,
)
from ddpcheck.report.text import render_text
from ddpcheck.scheduler.contradictions import shape_problems
from ddpcheck.scheduler.detect import JobEnv
from ddpcheck.stages import PREFLIGHT
from ddpcheck.verdicts.readiness import Expected


def run(cfg: Config, job: JobEnv) -> int:
    start = time.monotonic()
    env = dict(os.environ)
    results_dir = (cfg.results_dir or default_results_dir()).resolve()
    results_dir.mkdir(parents=True, exist_ok=True)
    nproc = cfg.nproc_per_node or auto_nproc()
    shape = _shape_problems(cfg, job, nproc)
    pre = node_preflight(cfg, env, nproc) + shape
    plan = SpawnPlan(cfg, nproc, socket.gethostname()) if cfg.launch != "torchrun" else None
    world = plan.world_size if plan else nproc * cfg.nodes
    if plan:  # the master, the init file and the rank layout, before any rank starts
        pre += plan.pre_checks()
    if cfg.stages != NETWORK_ONLY:
        pre += open_files_problems(world, nproc, socket.gethostname())
    st = ClusterState()
    # A job-level contradiction (same on every node) is reported by each node on its own:
    # checking in would only add noise (two launchers on one node fighting for the port).
    if cfg.nodes > 1 and not shape:
        st = lifecycle.connect(cfg, env, nproc, pre, start + cfg.rdzv_timeout, job.nodes,
                               **(plan.checkin_hooks() if plan else {}))
        pre = merge_problems([*pre, *st.problems])
    elif cfg.nodes > 1:
        lifecycle.announce_stop(cfg, shape)  # the endpoint node says why, then stops
    if cfg.stages == NETWORK_ONLY:
        return _network_only(cfg, st, pre, results_dir, nproc, start)
    if pre:
        report = build_report({}, cfg.stages, pre, time.monotonic() - start, world)
        report.nodes = sorted({c.host for c in st.cards} | {socket.gethostname()})
        _prepend_preflight(report, results.FAIL)
        st.close()
        return _finish(cfg, report, results_dir, nproc)
    try:
        outcome, log_tail = _launch(cfg, results_dir, nproc, start, plan)
    finally:
        st.close()
    report = _judge(cfg, st, results_dir, nproc, outcome, log_tail, start, world, plan)
    code = _finish(cfg, report, results_dir, nproc)
    return 128 + signal.Signals[outcome.interrupted] if outcome.interrupted else code


def _judge(cfg: Config, st: ClusterState, results_dir: Path, nproc: int,
           outcome: LaunchOutcome, log_tail: str, start: float, world: int,
           plan: SpawnPlan | None = None) -> Report:
    """This node's report after torchrun; on several nodes, the whole run's one verdict.

    The rank-0 node collects every node's outcome before judging and publishes its
    verdict; the other nodes adopt it (or say they could not learn it), so no node says
    READY while another saw a failure.
    """
    events = results.rank_events(results_dir)
    exits = results.exit_statuses(results_dir)
    problems = diagnose_launch(events, outcome, cfg.timeout, log_tail)
    local = _local_ranks(results_dir) | set(exits)
    # exit files are this node's: a rank that died before its first event is still placed
    hosts = {**{r: socket.gethostname() for r in exits}, **hosts_of_events(events)}
    problems += diagnose_ranks(events, exits, outcome, hosts, _local_ranks(results_dir))
    problems = problems or torchrun_failed(events, outcome, log_tail)
    if plan:  # no agent: a world that never formed is named from the ranks' own lines
        problems = plan.explain_exits(exits, problems)
    rank0_here = 0 in local
    multi = cfg.nodes > 1 and st.me is not None
    if multi and rank0_here:
        problems += ending.collect_outcomes(st)
    expected = (Expected.whole(world) if rank0_here or cfg.nodes == 1
                else Expected.node_part(world, local, nproc))
    evidence = [*_exit_tails(exits), *log_tail.splitlines()[-6:]]
    report = build_report(events, cfg.stages, problems, time.monotonic() - start,
                          world, expected, evidence)
    _prepend_preflight(report, results.PASS)
    transport = parse_nccl_debug_transport(_tail(results_dir / "torchrun.log", 1 << 20))
    if transport:  # only with NCCL_DEBUG=INFO: NET/Socket where IB was expected is common
        report.notes.append(f"NCCL's network transport (from NCCL_DEBUG=INFO): {transport}")
    if multi:
        me = ending.Outcome(socket.gethostname(), report.ready, tuple(report.problems))
        if rank0_here:
            ending.publish_verdict(st, me)
        else:
            ending.post_outcome(st, me)
            _adopt(report, ending.await_verdict(st))
        ending.release(st)
    if cfg.nodes > 1 and not rank0_here:
        report.notes.append(f"this is {socket.gethostname()}'s part; the whole report is printed "
                            f"on the node hosting rank 0 ({_rank0_host(events)})")
    return report


def _adopt(report: Report, whole: ending.Outcome | Problem) -> None:
    """Take the rank-0 node's verdict: its problems are this node's story too."""
    found = [whole] if isinstance(whole, Problem) else list(whole.problems)
    report.problems = mark_consequences(merge_problems([*report.problems, *found]))


def _exit_tails(exits: dict[int, results.ExitStatus]) -> list[str]:
    return [f"rank {r}: {ln}" for r, ex in sorted(exits.items())
            if not ex.finished or ex.session_error for ln in ex.tail[-3:]]


def _network_only(cfg: Config, st: ClusterState, problems: list[Problem], results_dir: Path,
                  nproc: int, start: float) -> int:
    """``--stages preflight``: the report of preflight, check-in and peer probes; no torchrun."""
    no_ranks = Expected(nproc * cfg.nodes, frozenset())  # this mode starts no rank at all
    report = build_report({}, (), problems, time.monotonic() - start, nproc * cfg.nodes,
                          no_ranks)
    report.nodes = sorted({c.host for c in st.cards} | {socket.gethostname()})
    _prepend_preflight(report, results.FAIL if problems else results.PASS)
    st.close()
    nodes = len({c.host for c in st.cards}) or 1
    report.notes.append(f"network-only mode (--stages preflight): {nodes} node"
                        f"{'s' if nodes != 1 else ''} checked in and probed; no torchrun")
    return _finish(cfg, report, results_dir, nproc, {"network": st.figures})


def _shape_problems(cfg: Config, job: JobEnv, nproc: int) -> list[Problem]:
    """Contradictions between the flags and the scheduler's allocation."""
    if job.source == "none":
        return []
    flagged = cfg.sources.get("nodes", "").startswith(("-", "DDPCHECK_"))
    return [*job.problems, *shape_problems(job, cfg.nodes if flagged else None,
                                           nproc if cfg.nproc_per_node else None,
                                           cfg.gpus_per_replica)]


def _local_ranks(results_dir: Path) -> set[int]:
    return {results.rank_of(p) for p in results_dir.glob("rank-*.jsonl")}


def _rank0_host(events: dict[int, list[results.Event]]) -> str:
    for evs in events.values():
        for e in evs:
            if isinstance(e, results.Hello) and e.coordinator:
                return str(e.coordinator)
    return "unknown"


def _launch(cfg: Config, results_dir: Path, nproc: int, start: float,
            plan: SpawnPlan | None = None):  # type: ignore[no-untyped-def]
    argv = torchrun_argv(cfg, nproc, cfg.rdzv_id or new_run_id())
    env = worker_env(cfg, dict(os.environ), results_dir, nproc)
    log_path = results_dir / ("ranks.log" if plan else "torchrun.log")
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, raise_interrupted)
    with open(log_path, "w", encoding="utf-8") as log:
        follower = _Follower(log_path) if cfg.verbose else None
        # -v streams torchrun's own output instead; -q prints the report only.
        progress = None if cfg.quiet or cfg.verbose else Progress(results_dir)
        ticker = follower or progress
        tick = ticker.tick if ticker else None
        outcome = (run_spawned(plan.rank_envs(env), results_dir, start + cfg.timeout, log, tick)
                   if plan else run_torchrun(argv, env, results_dir, start + cfg.timeout, log,
                                             on_tick=tick, nproc=nproc))
        if follower:
            follower.tick()
        if progress:
            progress.close()
    return outcome, _tail(log_path)


class _Follower:
    """Echo torchrun's log to stderr as it grows (-v)."""

    def __init__(self, path: Path) -> None:
        self.path, self.offset = path, 0

    def tick(self) -> None:
        chunk, self.offset = read_appended(self.path, self.offset)
        if chunk:
            sys.stderr.write(chunk)
            sys.stderr.flush()


def _tail(path: Path, limit: int = 4000) -> str:
    try:
        data = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return data[-limit:]


def _prepend_preflight(report: Report, status: str) -> None:
    pre = StageResult(PREFLIGHT, status)
    if status == results.FAIL:
        for s in report.stages:
            s.status, s.blocked_by = results.BLOCKED, PREFLIGHT
    report.stages.insert(0, pre)


def _finish(cfg: Config, report: Report, results_dir: Path, nproc: int,
            extra: dict | None = None) -> int:
    base = _compare_with_baseline(cfg, report)
    if cfg.plot_dir and report.measurements:
        from ddpcheck.report.plots import compare_plots, write_plots

        cfg.plot_dir.mkdir(parents=True, exist_ok=True)
        paths = write_plots(report.measurements, cfg.plot_dir)
        if base:
            paths += compare_plots(base["measurements"], report.measurements, cfg.plot_dir)
        report.notes.append("plots: " + ", ".join(str(p) for p in paths))
    log = "torchrun.log" if cfg.launch == "torchrun" else "ranks.log"
    report.notes.append(f"results: {results_dir}  (rank files, {log})")
    if cfg.junit_path:
        from ddpcheck.report import junit

        junit.write_if_whole(cfg.junit_path, report, results_dir, cfg.nodes)
    print(render_text(report), end="")
    if cfg.json_path:
        data = to_json(report, {"config": cfg.to_dict(), "nproc_per_node": nproc,
                                "results_dir": str(results_dir), **(extra or {})})
        try:
            results.write_json(cfg.json_path, data)
        except OSError as exc:
            print(f"ddpcheck: error: --json {cfg.json_path}: {exc.strerror}", file=sys.stderr)
            return 2
    return report.exit_code


def _compare_with_baseline(cfg: Config, report: Report) -> dict | None:
    """--baseline: regressions become problems of this report (exit 1)."""
    if not cfg.baseline:
        return None
    from ddpcheck.launcher.compare_command import against_baseline
    from ddpcheck.verdicts.compare import load_report

    found, notes = against_baseline(to_json(report), cfg.baseline, cfg.regression_ratio)
    report.problems.extend(found)
    report.notes.extend(notes)
    return load_report(cfg.baseline, "--baseline")
