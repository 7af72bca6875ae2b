"""Tests for ddpcheck.launcher.fdlimit: the job's own open-file limit against what its
backend and the store's host need; never raised silently."""

from __future__ import annotations

import resource

from ddpcheck.launcher.fdlimit import (
    BASE_FILES,
    NCCL_FILES,
    files_needed,
    job_files_needed,
    open_file_limits,
    open_files_problems,
    store_files_needed,
)


def test_the_needs_per_backend_and_for_the_store() -> None:
    assert files_needed(2, 1, 2) == 256 + 1 + 4 + 0 + 1
    assert job_files_needed(8192, "gloo") == BASE_FILES + 8191  # full mesh
    assert job_files_needed(8192, "nccl") == BASE_FILES + NCCL_FILES  # bounded, any world
    assert store_files_needed(8192, 1024) == BASE_FILES + 8192 + 1024


def test_a_gloo_job_whose_soft_limit_is_short_is_a_problem_even_if_the_hard_limit_allows(
) -> None:
    [p] = open_files_problems(8192, 8, "gpu-a", limits=(1024, 1 << 20), backend="gloo")
    need = job_files_needed(8192, "gloo")
    assert p.code == "open-file-limit" and p.hosts == ("gpu-a",) and p.stage == "preflight"
    assert f"needs about {need} open files for each gloo worker" in p.observed
    assert "the job's soft limit is 1024" in p.observed
    assert f"ulimit -n {need} in the job script" in p.fix and "PropagateResourceLimits" in p.fix


def test_an_nccl_job_of_8192_ranks_fits_1024_on_a_node_without_the_store() -> None:
    got = open_file_limits(8192, 8, "gpu-b", backend="nccl", limits=(1024, 4096))
    assert got.problems == [] and got.job_need == BASE_FILES + NCCL_FILES
    assert got.raised_to is None and "needs ~512" in got.note()


def test_the_store_host_needs_a_connection_per_worker_and_agent() -> None:
    [p] = open_files_problems(8192, 8, "gpu-a", limits=(1024, 4096), backend="nccl",
                              hosts_store=True)
    need = store_files_needed(8192, 1024)
    assert "the process hosting the store" in p.observed and f"about {need}" in p.observed
    assert f"raise the hard limit to at least {need}" in p.fix  # 4096 is too low


def test_ddpcheck_raises_only_for_its_own_subgroups_and_says_so() -> None:
    # gloo, 512 ranks: the job needs 767 (fits 1024), ddpcheck's subgroups need more
    got = open_file_limits(512, 8, "gpu-a", backend="gloo", limits=(1024, 1 << 20))
    assert got.problems == [] and got.raised_to == files_needed(512, 64, 8)
    assert "ddpcheck raised its own soft limit" in got.note()


def test_the_real_soft_limit_is_never_raised_when_the_job_would_fail() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
        assert open_files_problems(64, 8, "here", backend="gloo") != []
        assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] == 256
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_whether_this_node_hosts_the_store_is_asked_only_when_it_matters() -> None:
    asked = []

    def here() -> bool:
        asked.append(1)
        return True

    assert open_files_problems(8, 8, "a", limits=(1024, 4096), hosts_store=here) == []
    assert asked == []  # 1,024 covers every need of 8 ranks
    [p] = open_files_problems(2048, 8, "a", limits=(1024, 4096), backend="nccl",
                              hosts_store=here)
    assert asked == [1] and "the process hosting the store" in p.observed
