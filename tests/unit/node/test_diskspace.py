"""Tests for node.diskspace: free space measured, shown, judged; a full disk named as one."""

from __future__ import annotations

from pathlib import Path

import pytest

from ddpcheck.node.diskspace import (
    disk_space,
    errno_text,
    full_after_failed_save,
    size_text,
    space_problems,
)
from ddpcheck.parsing import byte_size


def test_space_of_a_directory_not_made_yet_is_its_parents_filesystem(tmp_path: Path) -> None:
    space = disk_space(tmp_path / "not" / "yet")
    assert space is not None and space.measured_at == tmp_path
    assert 0 < space.free <= space.total


def test_less_free_space_than_a_checkpoint_needs_is_a_problem_before_any_write(
        tmp_path: Path) -> None:
    space = disk_space(tmp_path)
    assert space is not None
    [p] = space_problems(tmp_path / "ckpt", space.free * 2 + (1 << 30), "node7")
    assert p.code == "checkpoint-dir-full" and p.hosts == ("node7",)
    assert f"{tmp_path / 'ckpt'} on node7 has " in p.observed and "free of" in p.observed
    assert "--checkpoint-size" in p.observed and "--checkpoint-dir" in p.fix
    assert not (tmp_path / "ckpt").exists(), "nothing is written"
    assert space_problems(tmp_path, 1, "node7") == []
    assert space_problems(tmp_path, None, "node7") == []


def test_a_save_that_failed_on_dev_full_is_recognised_as_a_full_disk(tmp_path: Path) -> None:
    import torch

    with pytest.raises(RuntimeError) as err:  # what torch.save raises on a full filesystem
        torch.save(torch.ones(1 << 16), "/dev/full")
    text = errno_text(err.value)
    assert "unexpected pos" in text or "No space" in text, text  # torch's words on ENOSPC
    space = disk_space(tmp_path)
    assert space is not None
    # full: the filesystem has less room than the save needed, whatever torch's words
    assert full_after_failed_save(tmp_path, text, space.free + 1) is not None
    assert full_after_failed_save(tmp_path, "No space left on device", 1) is not None
    assert full_after_failed_save(tmp_path, "Permission denied", 1) is None


def test_an_oserror_reads_as_its_strerror() -> None:
    assert errno_text(OSError(28, "No space left on device")).startswith("No space left")


@pytest.mark.parametrize("n,text", [(0, "0 B"), (1536, "1.5 KiB"), (20 << 30, "20.0 GiB")])
def test_sizes_are_written_in_binary_units(n: int, text: str) -> None:
    assert size_text(n) == text


@pytest.mark.parametrize("raw,value", [("512", 512), ("20G", 20 << 30), ("300MiB", 300 << 20),
                                       ("1.5T", int(1.5 * (1 << 40))), ("2gb", 2 << 30)])
def test_checkpoint_sizes_parse_as_users_write_them(raw: str, value: int) -> None:
    assert byte_size(raw) == value


@pytest.mark.parametrize("raw", ["lots", "-1G", "G", "0"])
def test_a_malformed_size_is_refused(raw: str) -> None:
    with pytest.raises(ValueError, match="such as 512M"):
        byte_size(raw)
