"""Tests for ddpcheck.judgements.expectations: the below-expected-bandwidth verdict and the
reference busbw of known GPU models."""

from __future__ import annotations

import pytest

from ddpcheck.judgements.expectations import judge_expectation, reference_busbw


def test_judge_expectation_message_and_code():
    [p] = judge_expectation(12.3, 40.0, "busbw (--expect-busbw)")
    assert p.code == "below-expected-bandwidth"
    assert p.observed == "expected >= 40.0 GB/s busbw (--expect-busbw), measured 12.3 GB/s"


@pytest.mark.parametrize("measured, expected", [(40.0, 40.0), (55.0, 40.0), (1.0, 0.0)])
def test_judge_expectation_passes_at_or_above_the_expectation(measured, expected):
    assert judge_expectation(measured, expected, "busbw") == []


def test_judge_expectation_shows_small_figures_with_two_decimals():
    [p] = judge_expectation(0.043, 0.5, "busbw")
    assert p.observed == "expected >= 0.50 GB/s busbw, measured 0.04 GB/s"


@pytest.mark.parametrize("name, n, low, high", [
    ("NVIDIA A100-SXM4-80GB", 8, 150, 180),
    ("NVIDIA A100-SXM4-40GB", 8, 150, 180),
    ("NVIDIA H100 80GB HBM3", 8, 240, 280),
    ("NVIDIA H100 SXM5 80GB", 8, 240, 280),
    ("NVIDIA H200", 8, 240, 280),
    ("NVIDIA A100 80GB PCIe", 8, 5, 15),
    ("NVIDIA A100-PCIE-40GB", 4, 5, 15),
    ("NVIDIA A10", 2, 5, 15),
    ("NVIDIA L40S", 4, 5, 15),
    ("Tesla T4", 4, 2, 8),
    ("Tesla V100-PCIE-16GB", 2, 2, 8),
    ("NVIDIA H100 PCIe", 2, 10, 30),
    ("NVIDIA H100 NVL", 2, 10, 30),
])
def test_reference_busbw_for_known_models(name, n, low, high):
    ref = reference_busbw(name, n, "nccl")
    assert ref is not None
    gbps, source = ref
    assert low <= gbps <= high
    assert "70%" in source and f"{gbps:.0f} GB/s" in source


def test_reference_busbw_nvswitch_figures_are_conservative_against_published_peaks():
    a100, _ = reference_busbw("NVIDIA A100-SXM4-80GB", 8, "nccl")  # ~230 GB/s typical
    h100, _ = reference_busbw("NVIDIA H100 80GB HBM3", 8, "NCCL")  # ~360-370 GB/s rings
    assert 0.65 * 230 <= a100 <= 0.8 * 230
    assert 0.65 * 360 <= h100 <= 0.8 * 360
    assert h100 > a100


@pytest.mark.parametrize("name, n, backend", [
    ("NVIDIA A100-SXM4-80GB", 8, "gloo"),      # not NCCL
    ("NVIDIA A100-SXM4-80GB", 1, "nccl"),      # nothing to all-reduce with
    ("NVIDIA A100-SXM4-80GB", 4, "nccl"),      # 4 of an 8-GPU board or a 4-GPU board?
    ("NVIDIA H100 80GB HBM3", 4, "nccl"),
    ("NVIDIA A800-SXM4-80GB", 8, "nccl"),      # cut-down NVLink
    ("NVIDIA H800", 8, "nccl"),
    ("Tesla V100-SXM2-32GB", 8, "nccl"),       # hybrid cube mesh: not in the table
    ("NVIDIA GeForce RTX 4090", 8, "nccl"),
    ("NVIDIA GH200 480GB", 2, "nccl"),
    ("", 8, "nccl"),
])
def test_reference_busbw_is_none_when_unknown(name, n, backend):
    assert reference_busbw(name, n, backend) is None


def test_reference_busbw_does_not_mistake_a100_for_a10():
    a10, _ = reference_busbw("NVIDIA A10", 2, "nccl")
    a100, _ = reference_busbw("NVIDIA A100-SXM4-80GB", 8, "nccl")
    assert a10 < 20 < a100
