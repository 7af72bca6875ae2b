"""Run ``ddpcheck run`` on namespace hosts and read each host's JSON report (test side only).

Runs in the test (or bench) process on the test machine; each host's launcher runs inside
its own network namespace (:mod:`tests.cluster.netns`), node0 hosting the rendezvous
endpoint. The one place tests/cluster and bench/ start a multi-node ddpcheck run:

    >>> runs = start_runs(cluster.hosts, tmp_path, "--stages", "preflight", tag="healthy")
    >>> codes = finish_all(runs, timeout=150)
    >>> runs[0].report()["ready"]      # node0's report is the whole run's

bench/ imports it as ``from tests.cluster.hosts import ...`` (``python -m bench.NAME`` from
the repository root).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PORT = 29500


@dataclass
class HostRun:
    """One host's ``ddpcheck run``: its process, its JSON report path and what it printed."""

    host: Any  # tests.cluster.netns.Host
    proc: subprocess.Popen
    json_path: Path
    results_dir: Path | None
    out: str = ""
    err: str = ""

    def finish(self, timeout: float = 150) -> int:
        """Wait for the launcher (bounded) and keep its output; the exit code."""
        out, err = self.proc.communicate(timeout=timeout)
        self.out, self.err = out or "", err or ""
        return self.proc.returncode

    def report(self) -> dict[str, Any]:
        return json.loads(self.json_path.read_text())

    def has_report(self) -> bool:
        return self.json_path.exists()

    def codes(self) -> list[str]:
        return [p["code"] for p in self.report()["problems"]]

    def problem(self, code: str) -> dict[str, Any]:
        return next(p for p in self.report()["problems"] if p["code"] == code)


def start_runs(hosts: Sequence[Any], tmp: Path, *args: str, nodes: int | None = None,
               tag: str = "", results: bool = False, output: str = "merged",
               env: Mapping[str, str] | None = None,
               per_host_env: Mapping[str, Mapping[str, str]] | None = None,
               endpoint: str | None = "node0", port: int = PORT, node_ranks: bool = False,
               per_host_args: Mapping[str, Sequence[str]] | None = None,
               wrap: Mapping[str, Callable[[list[str]], list[str]]] | None = None,
               ) -> list[HostRun]:
    """Start ``ddpcheck run --nodes N --rdzv-endpoint node0:PORT --json ... ARGS`` on each host.

    ``nodes`` defaults to the number of hosts; ``tag`` prefixes the report files (one run of
    several in a test); ``results`` gives each host its own --results-dir; ``output`` is
    "merged" (stderr into stdout), "split" or "none" (discarded, for long bench runs).
    ``endpoint=None`` leaves --rdzv-endpoint to ddpcheck (spawn: the master's port + 1);
    ``node_ranks`` passes host i ``--node-rank i``; ``per_host_args`` adds arguments to one
    host's command and ``wrap`` maps a host name to a function of its argv (e.g. to run it
    in a mount namespace of its own).
    """
    runs = []
    for i, h in enumerate(hosts):
        stem = f"{tag}-{h.name}" if tag else h.name
        js = tmp / f"{stem}.json"
        res = tmp / f"results-{stem}" if results else None
        argv = [sys.executable, "-m", "ddpcheck", "run", "--nodes", str(nodes or len(hosts)),
                *(["--rdzv-endpoint", f"{endpoint}:{port}"] if endpoint else []),
                *(["--node-rank", str(i)] if node_ranks else []), "--json", str(js),
                *(["--results-dir", str(res)] if res else []), *args,
                *(per_host_args or {}).get(h.name, [])]
        argv = (wrap or {}).get(h.name, lambda a: a)(argv)
        henv = {**(env or {}), **((per_host_env or {}).get(h.name, {}))}
        proc = h.popen(argv, env=henv or None, **_streams(output))
        runs.append(HostRun(h, proc, js, res))
    return runs


def _streams(output: str) -> dict[str, Any]:
    if output == "none":
        return {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    err = subprocess.STDOUT if output == "merged" else subprocess.PIPE
    return {"stdout": subprocess.PIPE, "stderr": err, "text": True}


def finish_all(runs: Sequence[HostRun], timeout: float = 150) -> list[int]:
    """Every host's exit code, in host order (each wait bounded by ``timeout``)."""
    return [r.finish(timeout) for r in runs]
