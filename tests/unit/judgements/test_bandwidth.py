"""Tests for ddpcheck.judgements.bandwidth: nccl-tests' algbw/busbw, sweep rows and sizes."""

from __future__ import annotations

import json

import pytest

from ddpcheck.judgements.bandwidth import (
    GB,
    algbw,
    allreduce_busbw,
    human_size,
    judge_rule,
    judged_peak,
    sizes,
    sweep_row,
)


# --- algbw / busbw -----------------------------------------------------------------------------
def test_algbw_is_bytes_per_second_in_decimal_gigabytes():
    assert algbw(int(GB), 1.0) == pytest.approx(1.0)
    assert algbw(4 << 20, 0.001) == pytest.approx((4 << 20) / 0.001 / 1e9)


@pytest.mark.parametrize("seconds", [0.0, -1.0])
def test_algbw_of_a_non_positive_time_is_zero(seconds):
    assert algbw(1024, seconds) == 0.0


@pytest.mark.parametrize("n", [2, 3, 4, 8, 16, 1024])
def test_allreduce_busbw_is_algbw_times_2_n_minus_1_over_n(n):
    nbytes, seconds = 256 << 20, 0.02
    assert allreduce_busbw(nbytes, seconds, n) == pytest.approx(
        algbw(nbytes, seconds) * 2 * (n - 1) / n)


def test_allreduce_busbw_equals_algbw_for_two_ranks_and_approaches_twice_it():
    assert allreduce_busbw(int(GB), 1.0, 2) == pytest.approx(1.0)
    assert allreduce_busbw(int(GB), 1.0, 8) == pytest.approx(1.75)


@pytest.mark.parametrize("n", [0, 1])
def test_allreduce_busbw_of_a_single_rank_is_zero(n):
    assert allreduce_busbw(int(GB), 1.0, n) == 0.0


# --- sweep_row ---------------------------------------------------------------------------------
def test_sweep_row_rates_come_from_the_median_trial():
    row = sweep_row(4 << 20, 4, "float", [0.003, 0.001, 0.002], 4)
    assert row.size == 4 << 20 and row.count == (4 << 20) // 4 and row.dtype == "float"
    assert row.time_us == pytest.approx(2000.0)
    assert row.time_min_us == pytest.approx(1000.0) and row.time_max_us == pytest.approx(3000.0)
    assert row.algbw == pytest.approx(algbw(4 << 20, 0.002))
    assert row.busbw == pytest.approx(allreduce_busbw(4 << 20, 0.002, 4))


def test_sweep_row_median_of_an_even_number_of_trials_is_the_middle_mean():
    row = sweep_row(1024, 4, "float", [0.004, 0.001, 0.002, 0.100], 2)
    assert row.time_us == pytest.approx(3000.0)
    assert row.algbw == pytest.approx(algbw(1024, 0.003))


def test_sweep_row_one_slow_trial_does_not_move_the_rate():
    fast = sweep_row(1 << 20, 4, "float", [0.001, 0.001, 0.001], 2)
    outlier = sweep_row(1 << 20, 4, "float", [0.001, 0.001, 9.0], 2)
    assert outlier.algbw == fast.algbw and outlier.time_max_us == pytest.approx(9e6)


def test_sweep_row_to_dict_is_json_serialisable():
    data = sweep_row(4096, 4, "float", [0.001], 2).to_dict()
    assert json.loads(json.dumps(data)) == data
    assert set(data) == {"size", "count", "dtype", "time_us", "time_min_us", "time_max_us",
                         "algbw", "busbw", "iters", "judged"}


# --- sizes / human_size ------------------------------------------------------------------------
def test_sizes_multiply_by_the_factor_up_to_and_including_max():
    assert sizes(4 << 10, 16 << 20) == [4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20,
                                        4 << 20, 16 << 20]


def test_sizes_stop_below_max_when_the_factor_overshoots():
    assert sizes(1, 10, factor=2) == [1, 2, 4, 8]


def test_sizes_of_an_empty_range():
    assert sizes(8, 4) == []
    assert sizes(8, 8) == [8]


@pytest.mark.parametrize("nbytes, text", [
    (0, "0 B"), (1, "1 B"), (1023, "1023 B"), (1024, "1 KiB"), (4096, "4 KiB"),
    (4 << 20, "4 MiB"), (512 << 20, "512 MiB"), (1 << 30, "1 GiB"), (3 << 40, "3072 GiB"),
])
def test_human_size_uses_binary_units(nbytes, text):
    assert human_size(nbytes) == text


# --- judge rules -------------------------------------------------------------------------------
def test_nccl_judges_only_256_mib_and_up_with_enough_iterations():
    rule = judge_rule("nccl")
    assert rule.applies(256 << 20, 20) and rule.applies(1 << 30, 5)
    assert not rule.applies(4 << 20, 20)  # latency-bound on HGX: shown, not judged
    assert not rule.applies(256 << 20, 2)  # two iterations do not time a collective
    assert "256 MiB" in rule.describe() and "PERFORMANCE.md" in rule.describe()


def test_gloo_judges_from_4_mib_so_the_cpu_sweep_stays_small():
    rule = judge_rule("gloo")
    assert rule.applies(4 << 20, 2) and rule.applies(16 << 20, 2)
    assert not rule.applies(1 << 20, 8)


def test_judged_peak_ignores_a_faster_small_row_and_is_none_without_judged_rows():
    small = sweep_row(4 << 20, 4, "float", [0.00001], 8, 20, False)  # an implausible 735 GB/s
    big = sweep_row(256 << 20, 4, "float", [0.0013], 8, 20, True)
    assert judged_peak([small, big]) == big
    assert judged_peak([small]) is None


def test_a_healthy_h100_node_reads_above_its_reference_only_at_the_judged_size():
    """8x H100: ~80 us at 4 MiB (latency-bound, ~92 GB/s busbw) and ~1.25 ms at 256 MiB
    (~375 GB/s): the old rule failed the 4 MiB figure against 250 GB/s."""
    rows = [sweep_row(4 << 20, 4, "float", [80e-6], 8, 20, False),
            sweep_row(256 << 20, 4, "float", [1.25e-3], 8, 20, True)]
    assert rows[0].busbw < 250 < rows[1].busbw
    assert judged_peak(rows) == rows[1]
