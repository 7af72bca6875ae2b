"""NCCL WARN lines as NCCL's sources print them (src/debug.cc prefix, include/checks.h)."""

from __future__ import annotations

from tests.unit.explain.families.helpers import first_cause

PREFIX = "node1:2101:2187 [0] include/shm.h:48 NCCL WARN "


def test_posix_fallocate_out_of_space_is_dev_shm_too_small():
    # NCCL <= 2.11 include/shm.h: SYSCHECKVAL(shm_allocate(fd, shmSize), "posix_fallocate", res)
    assert first_cause(PREFIX + "Call to posix_fallocate failed : No space left on device",
                       "RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/"
                       "ProcessGroupNCCL.cpp:1269, unhandled system error, NCCL version 2.10.3"
                       ) == "dev-shm-too-small"


def test_unhandled_system_error_alone_stays_hedged():
    assert first_cause("RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/"
                       "ProcessGroupNCCL.cpp:1269, unhandled system error, NCCL version "
                       "2.10.3") in {"unexplained", "nccl-error"}
