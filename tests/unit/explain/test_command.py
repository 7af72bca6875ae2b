"""The explain command: files or stdin, --json, exit codes 0 / 1 / 2, one-line errors."""

from __future__ import annotations

import io
import json
import subprocess
import sys

from ddpcheck.launcher.cli import main
from tests.helpers.paths import DATA

LOGS = DATA / "logs"
SHM = str(LOGS / "nccl" / "shm-extend-nccl-tests-166.log")


def test_explained_log_exits_1_and_prints_block_next_and_verdict(capsys):
    assert main(["explain", SHM]) == 1
    out = capsys.readouterr().out
    assert "FAIL  dev-shm-too-small   host ubuntu" not in out  # hosts render as "node"
    assert "FAIL  dev-shm-too-small   node ubuntu" in out
    assert "  next      ddpcheck run --stages node" in out
    assert out.rstrip().splitlines()[-1].startswith("EXPLAINED: 1 cause")


def test_json_dash_prints_the_problems_schema_only(capsys):
    assert main(["explain", SHM, "--json", "-"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["problems"][0]["code"] == "dev-shm-too-small"
    assert set(data["problems"][0]) >= {"code", "summary", "observed", "cause", "fix", "ranks",
                                        "hosts", "consequence_of"}


def test_missing_file_is_a_one_line_error_exit_2(capsys):
    assert main(["explain", "/nonexistent/job.out"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot read /nonexistent/job.out" in err


def test_stdin_without_failure_exits_0():
    log = (LOGS / "other" / "nccl-info-no-failure-278.log").read_text()
    proc = subprocess.run([sys.executable, "-m", "ddpcheck", "explain"], input=log, text=True,
                          capture_output=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.startswith("NO FAILURE FOUND"), proc.stderr


def test_empty_input_exits_2(monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdin", io.StringIO("   \n"))
    assert main(["explain"]) == 2


def test_a_script_that_does_not_read_local_rank_is_named(capsys, monkeypatch):
    # trimmed from lmy98129/VLPD#6 (torch 2.x torch.distributed.launch, argparse --local_rank)
    log = ("usage: trainval_distributed.py [-h] [--work-dir WORK_DIR] [--local_rank LOCAL_RANK]\n"
           "trainval_distributed.py: error: unrecognized arguments: --local-rank=1\n"
           "usage: trainval_distributed.py [-h] [--work-dir WORK_DIR] [--local_rank LOCAL_RANK]\n"
           "trainval_distributed.py: error: unrecognized arguments: --local-rank=0\n"
           "[2023-12-08 01:40:46,962] torch.distributed.elastic.multiprocessing.api: [ERROR] "
           "failed (exitcode: 2) local_rank: 0 (pid: 53342) of binary: /usr/bin/python\n")
    monkeypatch.setattr(sys, "stdin", io.StringIO(log))
    assert main(["explain", "--json", "-"]) == 1
    problems = json.loads(capsys.readouterr().out)["problems"]
    assert problems[0]["code"] == "local-rank-arg-unread"
    assert "--local-rank=1" in problems[0]["observed"]


def test_a_directory_of_per_rank_logs_one_gzipped_names_the_cause_with_file_and_line(
        tmp_path, capsys):
    import gzip

    (tmp_path / "rank0.log").write_text(
        "epoch 1\n[E ProcessGroupNCCL.cpp:475] [Rank 0] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=808, OpType=ALLREDUCE, NumelIn=98, NumelOut=98, "
        "Timeout(ms)=1800000) ran for 1800572 milliseconds before timing out.\n")
    (tmp_path / "rank1.log.gz").write_bytes(gzip.compress(
        b"epoch 1\nstep 7\n[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to "
        b"allocate 2.00 GiB\n"))
    assert main(["explain", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert out.startswith("FAIL  cuda-out-of-memory   rank 1")
    assert f"  from      {tmp_path / 'rank1.log.gz'}:3" in out
    assert "collective-timeout on rank 0: SeqNum=808" in out
    assert f"[{tmp_path / 'rank0.log'}:2]" in out


def test_flight_recorder_dumps_and_a_log_together(tmp_path, capsys):
    import shutil

    shutil.copytree(DATA / "flightrec" / "desync", tmp_path / "fr")
    (tmp_path / "job.out").write_text("training...\n")
    assert main(["explain", str(tmp_path / "fr"), str(tmp_path / "job.out"),
                 "--json", "-"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["problems"][0]["code"] == "collective-desync"
    assert "rank 1: #3 broadcast" in data["notes"][0]
