"""The file:// init file before a run: directory, flock, stale file, shared storage."""

from __future__ import annotations

import errno
import os

import torch.distributed as dist

from ddpcheck.launcher.spawn import initfile


def test_a_fresh_path_in_a_lockable_directory_has_no_problem(tmp_path) -> None:
    assert initfile.init_file_problems(str(tmp_path / "init"), "n0") == []
    assert list(tmp_path.iterdir()) == []  # the lock probe is removed


def test_an_existing_file_is_stale_with_its_age_and_the_fix(tmp_path) -> None:
    path = tmp_path / "init"
    path.write_bytes(b"x" * 10)
    os.utime(path, (0, os.stat(path).st_mtime - 3 * 3600))
    got = initfile.init_file_problems(str(path), "n0")
    assert [p.code for p in got] == ["init-file-stale"]
    assert "10 bytes, last written 3 h ago" in got[0].observed
    assert f"rm {path}" in got[0].fix and f"file://{tmp_path}/init-$SLURM_JOB_ID" in got[0].fix


def test_judge_stale_reads_like_the_report() -> None:
    p = initfile.judge_stale("/shared/init", 0, 42, "gpu-a")
    assert p.hosts == ("gpu-a",) and "0 bytes, last written 42 s ago" in p.observed


def test_a_filesystem_that_refuses_flock_is_named(tmp_path) -> None:
    def refuse(fd: int, op: int) -> None:  # what an NFS mount with nolock answers
        raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))

    got = initfile.init_file_problems(str(tmp_path / "init"), "n1", locker=refuse)
    assert [p.code for p in got] == ["init-file-no-locks"]
    assert "ENOLCK" in got[0].observed and list(tmp_path.iterdir()) == []


def test_a_missing_directory_is_named(tmp_path) -> None:
    got = initfile.init_file_problems(str(tmp_path / "nope" / "init"), "n1")
    assert [p.code for p in got] == ["init-file-unusable"]


def test_the_token_is_seen_where_shared_and_named_where_not(tmp_path) -> None:
    store = dist.HashStore()
    path = str(tmp_path / "init")
    assert initfile.post_token(store, path, "abc123", "n0") == []
    raw = bytes(store.get(initfile.TOKEN_KEY))
    assert initfile.check_token(raw, path, "n1") == ("abc123", [])
    initfile.token_path(path, "abc123").unlink()  # what a node with other storage sees
    nonce, got = initfile.check_token(raw, path, "n1")
    assert nonce == "abc123" and [p.code for p in got] == ["init-file-not-shared"]
    assert "n1 does not see" in got[0].observed and "which n0 wrote" in got[0].observed
    assert initfile.ranks_file(path, "abc123") == str(tmp_path / ".ddpcheck-init-abc123")
