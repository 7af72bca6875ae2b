"""Tests for ddpcheck.worker.timing.iterations: nccl-tests' counts on NCCL, fast on gloo."""

from __future__ import annotations

from ddpcheck.worker.timing import MIN_TIMED_ITERS, NCCL_ITERS, iterations


def test_nccl_runs_nccl_tests_20_iterations_at_every_size():
    assert iterations(4 << 10, "nccl") == NCCL_ITERS == 20
    assert iterations(256 << 20, "nccl", 0.0013) == 20


def test_a_slow_nccl_iteration_shortens_the_trial_but_never_below_the_judged_minimum():
    assert iterations(256 << 20, "nccl", 0.1) == 10  # 1 s trial budget
    assert iterations(256 << 20, "nccl", 2.0) == MIN_TIMED_ITERS


def test_gloo_keeps_cpu_runs_small():
    assert iterations(4 << 10, "gloo") == 50 and iterations(16 << 20, "gloo") == 2
