"""Fixtures for world tests: real ``ddpcheck run`` / torchrun processes on this host.

Test side only. Every process a test starts runs in its own session and is killed with
its whole tree when the test ends, pass or fail. The ``world`` marker comes from
``tests/conftest.py``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest


class Run:
    """A ``ddpcheck run`` started in the background, with its results directory."""

    def __init__(self, args: list[str], results_dir: Path, env: dict[str, str]) -> None:
        self.results_dir = results_dir
        self.json_path = results_dir.parent / "report.json"
        argv = [sys.executable, "-m", "ddpcheck", "run", "--results-dir", str(results_dir),
                "--json", str(self.json_path), *args]
        self.proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, start_new_session=True)
        self.stdout = self.stderr = ""

    def events(self, rank: int) -> list[dict]:
        path = self.results_dir / f"rank-{rank}.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def wait_for_probe_start(self, rank: int, probe: str, timeout: float = 90) -> int:
        """Wait until rank starts the probe; return the rank's worker pid."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            evs = self.events(rank)
            if any(e["event"] == "probe-start" and e["nodeid"].endswith(probe) for e in evs):
                return next(e["pid"] for e in evs if e["event"] == "start")
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise AssertionError(f"rank {rank} never started {probe}")

    def finish(self, timeout: float = 180) -> int:
        self.stdout, self.stderr = self.proc.communicate(timeout=timeout)
        return self.proc.returncode

    def report(self) -> dict:
        return json.loads(self.json_path.read_text())

    def kill(self) -> None:
        try:
            procs = [psutil.Process(self.proc.pid), *psutil.Process(self.proc.pid).children(
                recursive=True)]
        except psutil.NoSuchProcess:
            return
        for p in procs:
            try:
                p.send_signal(signal.SIGKILL)
            except psutil.NoSuchProcess:
                pass


@pytest.fixture
def ddpcheck_run(tmp_path):
    """Start ``ddpcheck run ARGS`` in the background; everything it started dies at teardown."""
    runs: list[Run] = []

    def start(*args: str, env: dict[str, str] | None = None) -> Run:
        full = {**os.environ, **(env or {})}
        run = Run(list(args), tmp_path / f"results-{len(runs)}", full)
        runs.append(run)
        return run

    yield start
    for run in runs:
        run.kill()
        if run.proc.poll() is None:
            run.proc.communicate(timeout=10)
