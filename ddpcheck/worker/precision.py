"""The float32 matmul/convolution precision of this process, and a full-fp32 section.

Runs inside every worker (the DDP probe). A DDP model is compared with a single-process
reference at rtol 1e-4; TF32 (10-bit mantissa) gives ~1e-3 relative error, so the two must
run at the same precision. TF32 comes on without the user asking in NGC containers:
``TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1`` makes torch's default float32 matmul precision
"high" (TF32) instead of "highest" (ATen/Context.h: ``float32_matmul_precision =
check_env("TORCH_ALLOW_TF32_CUBLAS_OVERRIDE") ? HIGH : HIGHEST``), and cuDNN convolutions
default to ``torch.backends.cudnn.allow_tf32 = True``. :func:`full_fp32` turns both off
for the probe and restores the job's settings after it; :func:`current` records what the
user's job would run with.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch

OVERRIDE_VAR = "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE"


@dataclass(frozen=True)
class Fp32Precision:
    """torch.get_float32_matmul_precision(), cudnn.allow_tf32 and the NGC override."""

    matmul: str
    cudnn_tf32: bool
    override: bool

    @property
    def matmul_tf32(self) -> bool:
        return self.matmul != "highest"

    def describe(self) -> str:
        why = f" ({OVERRIDE_VAR}=1)" if self.override and self.matmul_tf32 else ""
        return (f"float32 matmul precision {self.matmul!r}{why}"
                f"{' (TF32)' if self.matmul_tf32 else ''}, "
                f"cudnn.allow_tf32={self.cudnn_tf32}")


def current() -> Fp32Precision:
    """This process's settings: what the user's job gets unless its script changes them."""
    return Fp32Precision(torch.get_float32_matmul_precision(),
                         bool(torch.backends.cudnn.allow_tf32),
                         os.environ.get(OVERRIDE_VAR, "") not in ("", "0"))


@contextmanager
def full_fp32() -> Iterator[Fp32Precision]:
    """IEEE float32 matmuls and convolutions inside; the previous settings restored after."""
    before = current()
    torch.set_float32_matmul_precision("highest")
    torch.backends.cudnn.allow_tf32 = False
    try:
        yield before
    finally:
        torch.set_float32_matmul_precision(before.matmul)
        torch.backends.cudnn.allow_tf32 = before.cudnn_tf32
