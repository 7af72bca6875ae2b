"""Tests for ddpcheck.launcher.fdlimit: the open-file limit against gloo's full meshes."""

from __future__ import annotations

import resource

from ddpcheck.launcher.fdlimit import files_needed, open_files_problems


def test_the_need_grows_linearly_with_the_world() -> None:
    assert files_needed(2, 1, 2) == 256 + 1 + 4 + 0 + 1
    assert files_needed(8192, 1024, 8) == 256 + 8191 + 16384 + 1023 + 7


def test_a_soft_limit_below_the_need_is_raised_quietly_within_the_hard_limit() -> None:
    assert open_files_problems(8192, 8, "gpu-a", limits=(1024, 1 << 20)) == []
    assert open_files_problems(16, 8, "gpu-a", limits=(1024, 1024)) == []


def test_a_hard_limit_below_the_need_names_the_limit_to_raise() -> None:
    [p] = open_files_problems(8192, 8, "gpu-a", limits=(1024, 4096))
    need = files_needed(8192, 1024, 8)
    assert p.code == "open-file-limit" and p.hosts == ("gpu-a",) and p.stage == "preflight"
    assert f"needs about {need} open files" in p.observed and "hard limit is 4096" in p.observed
    assert f"ulimit -Hn {need}" in p.fix and f"LimitNOFILE={need}" in p.fix


def test_the_real_soft_limit_is_raised_for_the_workers() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
        assert open_files_problems(64, 8, "here") == []
        assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] >= files_needed(64, 8, 8)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
