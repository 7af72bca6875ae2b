"""``ddpcheck run`` end to end on this node: preflight, torchrun, report, exit code.

Runs in the launcher. Always ends with a report: preflight problems stop the run before
torchrun (the stages are then reported as blocked by preflight), and every torchrun
failure is turned into a diagnosis by postmortem. Each step adds what it learns to one
record (``noderun.NodeRun``): preflight and check-in, the launch (``_observe``), the
node-side judgement with --baseline (``_judge``), then the exchange with the other nodes
(``_exchange``); the report is built from the record once, at the end (``node_report``).
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
from ddpcheck.cluster.store import torch_would_host
from ddpcheck.diagnoses import Problem
from ddpcheck.judgements.readiness import Expected
from ddpcheck.launcher.config import NETWORK_ONLY, RunConfig, new_run_id, run_timeout
from ddpcheck.launcher.fdlimit import open_file_limits
from ddpcheck.launcher.launch import (
    LaunchOutcome,
    default_results_dir,
    raise_interrupted,
    run_torchrun,
    torchrun_argv,
    worker_env,
)
from ddpcheck.launcher.nodehealth import node_health
from ddpcheck.launcher.noderun import (
    LAUNCHED,
    NETWORK_CHECK,
    NodeRun,
    adopt,
    node_outcome,
    node_report,
)
from ddpcheck.launcher.postmortem import diagnose_launch, diagnose_ranks, torchrun_failed
from ddpcheck.launcher.preflight import auto_nproc, node_preflight
from ddpcheck.launcher.progress import Progress, read_appended
from ddpcheck.launcher.spawn.plan import SpawnPlan
from ddpcheck.launcher.spawn.ranks import run_spawned
from ddpcheck.report.as_json import to_json
from ddpcheck.report.build import Report, hosts_of_events, merge_problems
from ddpcheck.report.text import render_text
from ddpcheck.scheduler.contradictions import shape_problems
from ddpcheck.scheduler.detect import JobEnv


def run(cfg: RunConfig, job: JobEnv) -> int:
    start = time.monotonic()
    env = dict(os.environ)
    results_dir = (cfg.results_dir or default_results_dir()).resolve()
    results_dir.mkdir(parents=True, exist_ok=True)
    nproc = cfg.nproc_per_node or auto_nproc()
    shape = _shape_problems(cfg, job, nproc)
    health = node_health(cfg, env)  # problems fail; notes (performance, unread) are shown
    pre = node_preflight(cfg, env, nproc) + list(health.problems) + shape
    plan = SpawnPlan(cfg, nproc, socket.gethostname()) if cfg.launch != "torchrun" else None
    world = plan.world_size if plan else nproc * cfg.nodes
    if plan:  # the master, the init file and the rank layout, before any rank starts
        pre += plan.pre_checks()
    files = None  # the job's own open-file limit, judged per backend (never raised silently)
    if cfg.stages != NETWORK_ONLY:
        files = open_file_limits(  # the store's host: the endpoint node, by torch's rule
            world, nproc, socket.gethostname(), backend=cfg.backend,
            hosts_store=lambda: cfg.nodes == 1 or cfg.node_rank == 0 or bool(
                cfg.rdzv_endpoint and torch_would_host(cfg.rdzv_endpoint[0])))
        pre += files.problems
    st = ClusterState()
    # A job-level contradiction (same on every node) is reported by each node on its own:
    # checking in would only add noise (two launchers on one node fighting for the port).
    if cfg.nodes > 1 and not shape:
        st = lifecycle.connect(cfg, env, nproc, pre, start + cfg.rdzv_timeout, job.nodes,
                               **(plan.checkin_hooks() if plan else {}))
        pre = merge_problems([*pre, *st.problems])
    elif cfg.nodes > 1:
        lifecycle.announce_stop(cfg, shape)  # the endpoint node says why, then stops
    node = NodeRun(socket.gethostname(), tuple(cfg.stages), world, preflight=tuple(pre),
                   checked_in=tuple(sorted({c.host for c in st.cards})),
                   node_notes=(*health.notes, *([files.note()] if files else [])))
    extra, interrupted = None, ""
    if cfg.stages == NETWORK_ONLY:  # check-in and peer probes only: no torchrun
        st.close()
        node = node.with_(mode=NETWORK_CHECK, world=nproc * cfg.nodes)
        extra = {"network": st.figures}
    elif pre:
        st.close()
    else:
        try:
            outcome, log_tail = _launch(cfg, results_dir, nproc, start, plan)
        finally:
            st.close()
        node = _observe(cfg, node, results_dir, nproc, outcome, log_tail, plan)
        interrupted = outcome.interrupted
        if cfg.nodes > 1 and node.rank0_here and st.me is not None:
            node = node.with_(peer_problems=tuple(ending.collect_outcomes(st)))
    node = _judge(cfg, node.with_(elapsed=time.monotonic() - start), results_dir)
    if node.mode == LAUNCHED:
        node = _exchange(cfg, st, node)
    code = _publish(cfg, node_report(node), results_dir, nproc, extra)
    return 128 + signal.Signals[interrupted] if interrupted else code


def _observe(cfg: RunConfig, node: NodeRun, results_dir: Path, nproc: int,
             outcome: LaunchOutcome, log_tail: str, plan: SpawnPlan | None = None) -> NodeRun:
    """What this node's ranks left after the launch: events, exits, diagnosed problems."""
    events = results.rank_events(results_dir)
    exits = results.exit_statuses(results_dir)
    problems = diagnose_launch(events, outcome, run_timeout(cfg, nproc), log_tail)
    local = _local_ranks(results_dir) | set(exits)
    # exit files are this node's: a rank that died before its first event is still placed
    hosts = {**{r: node.node for r in exits}, **hosts_of_events(events)}
    problems += diagnose_ranks(events, exits, outcome, hosts, _local_ranks(results_dir))
    problems = problems or torchrun_failed(events, outcome, log_tail)
    if plan:  # no agent: a world that never formed is named from the ranks' own lines
        problems = plan.explain_exits(exits, problems)
    rank0_here = 0 in local
    expected = (Expected.whole(node.world) if rank0_here or cfg.nodes == 1
                else Expected.node_part(node.world, local, nproc))
    return node.with_(
        mode=LAUNCHED, events=events, exits=exits, launch_problems=tuple(problems),
        expected=expected, rank0_here=rank0_here,
        evidence=(*_exit_tails(exits), *log_tail.splitlines()[-6:]),
        rank0_host=_rank0_host(events) if cfg.nodes > 1 else "")


def _judge(cfg: RunConfig, node: NodeRun, results_dir: Path) -> NodeRun:
    """The whole node-side judgement: --baseline, plots and where the results are."""
    draft = node_report(node)
    base = None
    if cfg.baseline:  # regressions become problems of this report (exit 1)
        from ddpcheck.judgements.compare import load_report
        from ddpcheck.launcher.compare_command import against_baseline

        found, notes = against_baseline(to_json(draft), cfg.baseline, cfg.regression_ratio)
        node = node.with_(baseline_problems=tuple(found), baseline_notes=tuple(notes))
        base = load_report(cfg.baseline, "--baseline")
    if cfg.plot_dir and draft.measurements:
        from ddpcheck.report.plots import compare_plots, write_plots

        cfg.plot_dir.mkdir(parents=True, exist_ok=True)
        paths = write_plots(draft.measurements, cfg.plot_dir)
        if base:
            paths += compare_plots(base["measurements"], draft.measurements, cfg.plot_dir)
        node = node.with_(plots=tuple(str(p) for p in paths))
    log = "torchrun.log" if cfg.launch == "torchrun" else "ranks.log"
    return node.with_(results_note=f"results: {results_dir}  (rank files, {log})")


def _exchange(cfg: RunConfig, st: ClusterState, node: NodeRun) -> NodeRun:
    """On several nodes, the whole run's one verdict, after each node's own judgement.

    The rank-0 node has collected every node's outcome before judging and publishes its
    verdict; the other nodes adopt it (or say they could not learn it), so no node says
    READY while another saw a failure.
    """
    if cfg.nodes == 1 or st.me is None:
        return node
    if node.rank0_here:
        ending.publish_verdict(st, node_outcome(node))
    else:
        ending.post_outcome(st, node_outcome(node))
        node = adopt(node, ending.await_verdict(st))
    ending.release(st)
    return node


def _exit_tails(exits: dict[int, results.ExitStatus]) -> list[str]:
    return [f"rank {r}: {ln}" for r, ex in sorted(exits.items())
            if not ex.finished or ex.session_error for ln in ex.tail[-3:]]


def _shape_problems(cfg: RunConfig, job: JobEnv, nproc: int) -> list[Problem]:
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


def _launch(cfg: RunConfig, results_dir: Path, nproc: int, start: float,
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
        deadline = start + run_timeout(cfg, nproc)
        outcome = (run_spawned(plan.rank_envs(env), results_dir, deadline, log, tick)
                   if plan else run_torchrun(argv, env, results_dir, deadline, log,
                                             on_tick=tick, nproc=nproc))
        if follower and outcome.killed_after_end:
            # what torchrun prints once we end it (its SignalException traceback) is no failure
            print(f"ddpcheck: every rank of this node had finished; ended torchrun instead of "
                  f"waiting for its exit (its last lines: {log_path})", file=sys.stderr)
        elif follower:
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


def _publish(cfg: RunConfig, report: Report, results_dir: Path, nproc: int,
             extra: dict | None = None) -> int:
    """Write the finished report where it was asked for (JUnit, stdout, --json)."""
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
