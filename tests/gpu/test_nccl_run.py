"""``ddpcheck run`` with NCCL on every GPU of this node: READY, and each NCCL path exercised.

GPU tier (tests/gpu/conftest.py skips it without CUDA). What it proves on real hardware:
the ring and link point-to-point batches do not deadlock under NCCL, the busbw reference
fits the measurement (single node: the intra-node figure), the loaded libnccl is asked for
its version, and placement compares boards by UUID.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import torch


def run(tmp_path: Path, *args: str, timeout: float = 900) -> tuple[int, dict, str]:
    report = tmp_path / "report.json"
    done = subprocess.run([sys.executable, "-m", "ddpcheck", "run", "--backend", "nccl",
                           "--results-dir", str(tmp_path / "results"), "--json", str(report),
                           *args], capture_output=True, text=True, timeout=timeout)
    return done.returncode, json.loads(report.read_text()), done.stdout + done.stderr


def test_nccl_run_on_every_gpu_is_ready(tmp_path: Path, need_gpus) -> None:
    need_gpus(1)
    code, report, out = run(tmp_path, "--checkpoint-dir", str(tmp_path / "ckpt"))
    assert code == 0 and report["ready"] is True, out
    statuses = {s["name"]: s["status"] for s in report["stages"]}
    assert statuses["collectives"] == statuses["placement"] == "PASS", statuses
    assert statuses["checkpoint"] == statuses["ddp"] == "PASS", statuses
    m = report["measurements"]
    stack = m["nccl_stack"]
    assert stack["nccl_loaded"] == stack["nccl_build"] != "-", stack  # asked, not assumed
    assert stack["driver"] != "-"
    boards = m["placement_boards"]
    assert all(b.startswith(("GPU-", "0000")) for b in boards), boards
    if torch.cuda.device_count() == 1:  # a world of one rank: nothing to send, nothing timed
        assert statuses["bandwidth"] == "SKIP" and "allreduce_sweep" not in m, statuses
        return
    source = m.get("expected_busbw_source", "")
    assert source == "" or "intra-node reference" in source, source  # one node: NVLink/PCIe
    assert max(r["busbw"] for r in m["allreduce_sweep"]) > 1.0


def test_ring_and_straggler_probes_finish_within_their_deadline(tmp_path: Path, need_gpus) -> None:
    need_gpus(2)
    code, report, out = run(tmp_path, "--stages", "rendezvous,collectives,bandwidth",
                            "--probe-timeout", "120", timeout=600)
    assert code == 0, out
    work = report["measurements"]["straggler_work_ms"]
    medians = sorted(sorted(w)[len(w) // 2] for w in work.values())
    # each rank times its own work, not the slowest rank's period: no rank waits inside it
    assert medians[0] > 0 and medians[-1] < 3 * medians[0], work


def test_node_stage_counts_the_gpus_torch_sees(tmp_path: Path, need_gpus) -> None:
    need_gpus(1)
    code, report, out = run(tmp_path, "--stages", "node")
    assert code == 0, out
    node = next(s for s in report["stages"] if s["name"] == "node")
    assert f"{torch.cuda.device_count()} GPU(s)" in " ".join(node["figures"].values()), node


def test_one_rank_more_than_gpus_is_named_before_any_rank_starts(tmp_path: Path,
                                                                 need_gpus) -> None:
    need_gpus(1)
    n = torch.cuda.device_count()
    code, report, out = run(tmp_path, "--nproc-per-node", str(n + 1), timeout=120)
    assert code == 1 and report["ready"] is False, out
    first = report["problems"][0]
    assert first["code"] == "too-few-gpus", first
    assert f"needs cuda:{n}" in first["observed"] and "--nproc-per-node" in first["fix"], first
