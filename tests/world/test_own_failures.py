"""ddpcheck's own failures and a full disk, in real runs: named for what they are.

A real ``ddpcheck run`` with gloo ranks on this host. An exception in a non-distributed
call inside a probe (made real by a sitecustomize that breaks the call the DDP sampler probe
makes, as a missing numpy broke ``.numpy()``) is ddpcheck's own failure: verdict UNKNOWN,
exit 3, no peer blamed, the later stages still run. A checkpoint directory on a full tmpfs
(root only) is named checkpoint-dir-full with its free space, never a killed rank 0.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

FAST = ["--probe-timeout", "10"]

# The break is applied when a process imports torch's sampler module (the probe's pytest
# session), not by importing it: every Python process of the run reads this sitecustomize,
# and the launcher and the rank wrappers, which never import torch, would each import it.
BREAK_SET_EPOCH = '''
import importlib.util
import sys

SAMPLER = "torch.utils.data.distributed"


def set_epoch(self, epoch):
    raise TypeError("set_epoch() broken on purpose by the test's sitecustomize")


class BreakOnImport:
    def find_spec(self, name, path=None, target=None):
        if name != SAMPLER:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        load = spec.loader.exec_module

        def exec_module(module):
            load(module)
            module.DistributedSampler.set_epoch = set_epoch

        spec.loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, BreakOnImport())
'''


def codes(report: dict) -> list[str]:
    return [p["code"] for p in report["problems"]]


def test_an_exception_in_ddpchecks_own_code_is_unknown_and_blames_no_peer(ddpcheck_run,
                                                                          tmp_path: Path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(BREAK_SET_EPOCH)
    path = os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH", "")]))
    run = ddpcheck_run("--stages", "collectives,ddp,checkpoint", "--checkpoint-dir",
                       str(tmp_path / "ckpt"), *FAST, env={"PYTHONPATH": path})
    assert run.finish() == 3, run.stdout + run.stderr
    report = run.report()
    assert codes(report) == ["ddpcheck-error"], report["problems"]
    [own] = report["problems"]
    assert own["role"] == "own-failure" and own["stage"] == "ddp" and own["ranks"] == [0, 1]
    assert "raised TypeError: set_epoch() broken on purpose" in own["observed"]
    assert "checks/test_ddp.py:" in own["observed"], own["observed"]
    assert "--stages collectives,checkpoint" in own["fix"]
    statuses = {s["name"]: s["status"] for s in report["stages"]}
    assert statuses["checkpoint"] == "PASS", "an own failure must not block the later stages"
    assert statuses["collectives"] == "PASS"
    assert report["verdict"].startswith("UNKNOWN: the check could not be completed")
    assert "ERROR ddpcheck-error" in run.stdout and "NOT READY" not in run.stdout
    for echo in ("collective-failed", "rank-unresponsive", "rank-killed", "rank-exited"):
        assert echo not in run.stdout


@pytest.fixture
def full_tmpfs(tmp_path: Path):
    """A 1 MiB tmpfs filled to the last byte (root only), unmounted at teardown."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mnt = tmp_path / "full"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)], check=True)
    try:
        fd = os.open(mnt / "filler", os.O_WRONLY | os.O_CREAT)
        try:
            while os.write(fd, b"\0" * 4096):
                pass
        except OSError:  # ENOSPC: full to the last block
            pass
        finally:
            os.close(fd)
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_a_full_checkpoint_filesystem_is_named_with_its_free_space(ddpcheck_run, full_tmpfs):
    run = ddpcheck_run("--stages", "checkpoint", "--checkpoint-dir", str(full_tmpfs / "ckpt"),
                       *FAST)
    assert run.finish() == 1, run.stdout + run.stderr
    report = run.report()
    assert codes(report) == ["checkpoint-dir-full"], report["problems"]
    [full] = report["problems"]
    assert full["ranks"] == [0] and "the filesystem has 0 B free of 1.0 MiB" in full["observed"]
    for wrong in ("rank-killed", "rank-exited", "collective-failed", "ddpcheck-error"):
        assert wrong not in run.stdout
    assert report["measurements"]["checkpoint_dir_free_bytes"] == 0


def test_less_free_space_than_checkpoint_size_stops_before_anything_is_written(
        ddpcheck_run, tmp_path: Path):
    ckpt = tmp_path / "ckpt"
    run = ddpcheck_run("--stages", "checkpoint", "--checkpoint-dir", str(ckpt),
                       "--checkpoint-size", "900T", *FAST)
    assert run.finish() == 1, run.stdout + run.stderr
    report = run.report()
    assert codes(report) == ["checkpoint-dir-full"]
    assert report["problems"][0]["stage"] == "preflight"
    assert "one checkpoint needs 900.0 TiB (--checkpoint-size)" in report["problems"][0]["observed"]
    assert not ckpt.exists() and not list(run.results_dir.glob("rank-*.jsonl"))
