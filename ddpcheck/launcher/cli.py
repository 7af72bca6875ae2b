"""The ``ddpcheck`` command: run, compare, list, env, explain. Exit 0 ready, 1 not ready,
2 usage error, 3 unknown (ddpcheck's own failure: the check could not be completed).

Runs in the launcher, once per node. Never imports torch (workers do), so usage errors
and preflight answer in well under a second.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
from collections.abc import Sequence

from ddpcheck import __version__
from ddpcheck.judgements.readiness import ExitCode
from ddpcheck.launcher.config import SETTINGS, build_config
from ddpcheck.launcher.launch import Interrupted
from ddpcheck.node.envinfo import distributed_env
from ddpcheck.parsing import UsageError
from ddpcheck.stages import STAGES

Exit = ExitCode  # 0 READY, 1 NOT_READY, 2 USAGE, 3 UNKNOWN (judgements.readiness)


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors (no usage dump) and exit code 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(message)


HELP = {
    "nodes": "number of nodes in the job (default 1; Slurm/PBS: the allocation's)",
    "node_rank": "this node's rank, 0..nodes-1, checked against the job (torchrun's c10d "
                 "rendezvous assigns the actual rank order)",
    "nproc_per_node": "ranks on this node: N or auto (GPUs on this node, else 2)",
    "rdzv_endpoint": "HOST:PORT of the rendezvous on node rank 0 (multi-node)",
    "rdzv_id": "run id shared by all nodes (default: the job id)",
    "backend": "auto (nccl with GPUs, else gloo), nccl or gloo",
    "gpus_per_replica": "GPUs each process drives (model parallel), default 1",
    "stages": f"comma list of stages to run (default all: {','.join(STAGES)})",
    "timeout": "whole-run deadline in seconds (default 300, grown with the world: docs/scale.md)",
    "probe_timeout": "deadline of each probe and each wait between ranks, seconds (default 20)",
    "rdzv_timeout": "deadline for all nodes to join, seconds (default 30)",
    "json_path": "also write the report as JSON to this file",
    "checkpoint_dir": "directory on shared storage to probe with a save/load",
    "checkpoint_size": "free space one checkpoint of your job needs in --checkpoint-dir "
                       "(e.g. 40G): less is a problem before anything is written",
    "results_dir": "where ranks write their result files (default: a new temp dir)",
    "expect_busbw": "expected all-reduce busbw in GB/s: below it is a problem",
    "slow_link_ratio": "a link slower than this x the median link is slow (default 0.5)",
    "plot_dir": "write PNG plots (busbw vs size, scaling) here; needs matplotlib",
    "junit_path": "also write the report as JUnit XML (one testsuite per stage) for CI",
    "baseline": "compare with an earlier report (--json file): a regression is exit 1",
    "regression_ratio": "a figure below this x the baseline (beyond its noise) is a "
                        "regression (default 0.8)",
    "launch": "how your job starts its ranks: torchrun (default), spawn (one process per "
              "node starts them, as mp.spawn) or srun",
    "init_method": "spawn: how the world forms: env:// (default), tcp://HOST:PORT or "
                   "file:///PATH, as in init_process_group",
    "master_addr": "spawn, env://: host of rank 0 (default: the job's MASTER_ADDR)",
    "master_port": "spawn, env://: rank 0's store port (default: MASTER_PORT, else 29500)",
    "rank_offsets": "spawn: each node's first rank, in node-rank order (default: node_rank x "
                    "nproc)",
    "world_size": "spawn: the world size the job passes (default: nodes x nproc)",
}


METAVAR = {"nodes": "N", "node_rank": "N", "nproc_per_node": "N|auto",
           "rdzv_endpoint": "HOST:PORT", "rdzv_id": "ID", "backend": "auto|nccl|gloo",
           "gpus_per_replica": "K", "stages": "LIST", "timeout": "SECONDS",
           "probe_timeout": "SECONDS", "rdzv_timeout": "SECONDS", "json_path": "PATH",
           "checkpoint_dir": "DIR", "checkpoint_size": "SIZE", "results_dir": "DIR",
           "expect_busbw": "GBPS", "slow_link_ratio": "RATIO", "plot_dir": "DIR",
           "junit_path": "PATH", "baseline": "BASE.json", "regression_ratio": "RATIO",
           "launch": "torchrun|spawn|srun", "init_method": "URL", "master_addr": "HOST",
           "master_port": "PORT", "rank_offsets": "R0,R1,...", "world_size": "N"}


def build_parser() -> Parser:
    parser = Parser(prog="ddpcheck", description="Is this allocation ready for PyTorch "
                    "distributed training? If not: which node or rank, what cause, what fix.")
    parser.add_argument("--version", action="version", version=f"ddpcheck {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    run = sub.add_parser("run", help="check this node, launch torchrun, print the report")
    for name, flag, var, _ in SETTINGS:
        run.add_argument(flag, dest=name, metavar=METAVAR[name],
                         help=f"{HELP[name]} [env {var}]")
    run.add_argument("-v", "--verbose", action="store_true", help="stream torchrun's output")
    run.add_argument("-q", "--quiet", action="store_true",
                     help="no progress lines, only the report [env DDPCHECK_QUIET=1]")
    run.add_argument("--strict-health", action="store_true",
                     help="node-health findings that only cost speed (throttling, a slow PCIe "
                          "link or IB port, no GPUDirect RDMA) fail the run instead of being "
                          "shown [env DDPCHECK_STRICT_HEALTH=1]")
    run.add_argument("--traceback", action="store_true", help="show raw errors with tracebacks")
    from ddpcheck.launcher.compare_command import add_compare_parser

    add_compare_parser(sub)
    sub.add_parser("list", help="every probe with its stage and description")
    sub.add_parser("env", help="this node's facts and distributed settings (secrets redacted)")
    explain = sub.add_parser("explain", help="read a failed job's logs: cause, place, fix")
    explain.add_argument("logs", nargs="*", metavar="LOG", help="log files (default: stdin)")
    explain.add_argument("--json", dest="json_path", metavar="PATH|-",
                         help="also write the explanation as JSON (- = JSON on stdout only)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        if args.command == "list":
            return cmd_list()
        if args.command == "env":
            return cmd_env()
        if args.command == "compare":
            from ddpcheck.launcher.compare_command import cmd_compare

            return cmd_compare(args)
        if args.command == "explain":
            from ddpcheck.explain.command import cmd_explain

            return cmd_explain(args.logs, args.json_path)
        flags = {name: getattr(args, name) for name, *_ in SETTINGS}
        flags.update(verbose=args.verbose, quiet=args.quiet, traceback=args.traceback,
                     strict_health=args.strict_health)
        from ddpcheck.scheduler.detect import detect
        from ddpcheck.scheduler.jobsettings import scheduler_settings

        job = detect(os.environ)  # the scheduler's environment, read once per run
        cfg = build_config(flags, os.environ, scheduler_settings(job))
    except UsageError as exc:
        print(f"ddpcheck: error: {exc}", file=sys.stderr)
        return Exit.USAGE
    from ddpcheck.launcher.runner import run

    try:
        return run(cfg, job)
    except (KeyboardInterrupt, Interrupted):
        print("ddpcheck: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # the last resort: one line, unless --traceback
        if cfg.traceback:
            raise
        print(f"UNKNOWN: the check could not be completed: ddpcheck's own error, not the "
              f"cluster's: {type(exc).__name__}: {exc} (rerun with --traceback and report it)",
              file=sys.stderr)
        return Exit.UNKNOWN


def cmd_list() -> int:
    from ddpcheck.report.catalog import list_probes

    for stage, name, doc in list_probes():
        print(f"{stage:<12} {name:<70} {doc}")
    return Exit.READY


def cmd_env() -> int:
    from ddpcheck.node.nodeinfo import node_summary

    facts = {"host": socket.gethostname(), "python": sys.version.split()[0],
             "ddpcheck": __version__, **node_summary(), "env": distributed_env(os.environ)}
    print(json.dumps(facts, indent=2))
    return Exit.READY

