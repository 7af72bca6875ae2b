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

from ddpcheck import cluster, results
from ddpcheck.cluster import ClusterState
from ddpcheck.config import NETWORK_ONLY, Config, new_run_id
from ddpcheck.diagnoses import Problem
from ddpcheck.fdlimit import open_files_problems
from ddpcheck.launch import (
    default_results_dir,
    raise_interrupted,
    run_torchrun,
    torchrun_argv,
    worker_env,
)
from ddpcheck.postmortem import diagnose_launch, diagnose_ranks
from ddpcheck.preflight import auto_nproc, node_preflight
from ddpcheck.report import (
    Report,
    StageResult,
    build_report,
    hosts_of_events,
    merge_problems,
    render_text,
    to_json,
)
from ddpcheck.scheduler import JobEnv, detect
from ddpcheck.shape import shape_problems

PREFLIGHT = "preflight"


def run(cfg: Config) -> int:
    start = time.monotonic()
    env = dict(os.environ)
    results_dir = (cfg.results_dir or default_results_dir()).resolve()
    results_dir.mkdir(parents=True, exist_ok=True)
    nproc = cfg.nproc_per_node or auto_nproc()
    job = detect(env)
    shape = _shape_problems(cfg, job, nproc)
    pre = node_preflight(cfg, env, nproc) + shape
    if cfg.stages != NETWORK_ONLY:
        pre += open_files_problems(nproc * cfg.nodes, nproc, socket.gethostname())
    st = ClusterState()
    # A job-level contradiction (same on every node) is reported by each node on its own:
    # checking in would only add noise (two launchers on one node fighting for the port).
    if cfg.nodes > 1 and not shape:
        st = cluster.connect(cfg, env, nproc, pre, start + cfg.rdzv_timeout, job.nodes)
        pre = merge_problems([*pre, *st.problems])
    elif cfg.nodes > 1:
        cluster.announce_stop(cfg, shape)  # the endpoint node says why, then stops
    if cfg.stages == NETWORK_ONLY:
        return _network_only(cfg, st, pre, results_dir, nproc, start)
    if pre:
        report = build_report({}, cfg.stages, pre, time.monotonic() - start, nproc * cfg.nodes)
        report.nodes = sorted({c.host for c in st.cards} | {socket.gethostname()})
        _prepend_preflight(report, results.FAIL)
        st.close()
        return _finish(cfg, report, results_dir, nproc)
    try:
        outcome, log_tail = _launch(cfg, results_dir, nproc, start, st.advertised)
    finally:
        st.close()
    events = results.rank_events(results_dir)
    problems = diagnose_launch(events, outcome, cfg.timeout, log_tail)
    problems += diagnose_ranks(events, results.exit_statuses(results_dir), outcome,
                               hosts_of_events(events))
    rank0_here = 0 in _local_ranks(results_dir)
    problems += cluster.share_final(st, problems, rank0_here)
    report = build_report(events, cfg.stages, problems, time.monotonic() - start,
                          nproc * cfg.nodes)
    _prepend_preflight(report, results.PASS)
    if cfg.nodes > 1 and not rank0_here:
        report.notes.append(f"this is {socket.gethostname()}'s part; the whole report is printed "
                            f"on the node hosting rank 0 ({_rank0_host(events)})")
    code = _finish(cfg, report, results_dir, nproc)
    return 128 + signal.Signals[outcome.interrupted] if outcome.interrupted else code


def _network_only(cfg: Config, st: ClusterState, problems: list[Problem], results_dir: Path,
                  nproc: int, start: float) -> int:
    """``--stages preflight``: the report of preflight, check-in and peer probes; no torchrun."""
    report = build_report({}, (), problems, time.monotonic() - start, nproc * cfg.nodes)
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
    return {int(p.stem.split("-")[1]) for p in results_dir.glob("rank-*.jsonl")}


def _rank0_host(events: dict[int, list[dict]]) -> str:
    for evs in events.values():
        for e in evs:
            if e.get("event") == "hello" and "0" in e.get("ranks", {}):
                return e["ranks"]["0"]["host"]
    return "unknown"


def _launch(cfg: Config, results_dir: Path, nproc: int, start: float,
            local_addr: str = ""):  # type: ignore[no-untyped-def]
    argv = torchrun_argv(cfg, nproc, cfg.rdzv_id or new_run_id(), local_addr)
    env = worker_env(cfg, dict(os.environ), results_dir, nproc)
    log_path = results_dir / "torchrun.log"
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, raise_interrupted)
    with open(log_path, "w", encoding="utf-8") as log:
        follower = _Follower(log_path) if cfg.verbose else None
        outcome = run_torchrun(argv, env, results_dir, start + cfg.timeout, log,
                               on_tick=follower.tick if follower else None)
        if follower:
            follower.tick()
    return outcome, _tail(log_path)


class _Follower:
    """Echo torchrun's log to stderr as it grows (-v)."""

    def __init__(self, path: Path) -> None:
        self.path, self.offset = path, 0

    def tick(self) -> None:
        with open(self.path, encoding="utf-8", errors="replace") as fh:
            fh.seek(self.offset)
            chunk = fh.read()
            self.offset = fh.tell()
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
    if cfg.plot_dir and report.measurements:
        from ddpcheck.plots import write_plots

        cfg.plot_dir.mkdir(parents=True, exist_ok=True)
        paths = write_plots(report.measurements, cfg.plot_dir)
        report.notes.append("plots: " + ", ".join(str(p) for p in paths))
    report.notes.append(f"results: {results_dir}  (rank files, torchrun.log)")
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


