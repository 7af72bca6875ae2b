"""Tests for ddpcheck.worker.precision: TF32 off inside the DDP probe, the job's settings
restored after it, and the NGC override (TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1) named."""

from __future__ import annotations

import os
import subprocess
import sys

import torch

from ddpcheck.worker import precision


def test_full_fp32_turns_tf32_off_inside_and_restores_the_jobs_settings():
    torch.set_float32_matmul_precision("high")
    torch.backends.cudnn.allow_tf32 = True
    try:
        with precision.full_fp32() as before:
            assert before.matmul_tf32 and before.cudnn_tf32
            inside = precision.current()
            assert inside.matmul == "highest" and not inside.cudnn_tf32
            assert not torch.backends.cuda.matmul.allow_tf32
        after = precision.current()
        assert after.matmul == "high" and after.cudnn_tf32
    finally:
        torch.set_float32_matmul_precision("highest")


def test_the_ngc_override_makes_tf32_the_default_and_is_named():
    """In a fresh process, as the DDP probe's worker starts: torch reads the variable once."""
    code = ("from ddpcheck.worker import precision; p = precision.current(); "
            "print(p.matmul, p.describe())")
    env = {**os.environ, "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE": "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True).stdout
    assert out.startswith("high ") and "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1" in out
    assert "(TF32)" in out
