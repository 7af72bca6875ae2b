"""CUDA device errors: invalid device ordinal (local-rank arithmetic) and out of memory.

Messages from c10/cuda (CUDA error strings: "invalid device ordinal", "out of memory") and
the caching allocator ("CUDA out of memory. Tried to allocate ...",
c10/cuda/CUDACachingAllocator.cpp).
"""

from __future__ import annotations

from ddpcheck.explain.codes import CUDA_OOM, INVALID_DEVICE_ORDINAL
from ddpcheck.explain.matching import pattern

PATTERNS = [
    pattern(INVALID_DEVICE_ORDINAL, r"invalid device ordinal",
            "ddpcheck run --stages node,placement --nproc-per-node N"),
    pattern(CUDA_OOM, r"CUDA out of memory|CUDA error: out of memory|OutOfMemoryError",
            "ddpcheck run --stages node (GPU memory in use by other processes)"),
]
