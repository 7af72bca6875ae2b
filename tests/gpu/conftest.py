"""The GPU tier: real NCCL on every GPU of this node. Skipped, with the reason, without CUDA.

Run on the first GPU machine: ``python -m pytest -q -m gpu tests/gpu``.
"""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist


def _missing() -> str:
    if torch.version.cuda is None:
        return f"torch {torch.__version__} is a CPU-only build"
    if not torch.cuda.is_available():
        return "torch.cuda.is_available() is False (no GPU or no usable driver)"
    if not dist.is_nccl_available():
        return "this torch build has no NCCL"
    return ""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    reason = _missing()
    for item in items:  # the gpu marker itself comes from tests/conftest.py
        if reason and "tests/gpu/" in str(item.fspath).replace("\\", "/"):
            item.add_marker(pytest.mark.skip(reason=f"GPU tier: {reason}"))


@pytest.fixture
def need_gpus():  # noqa: ANN201 - a fixture returning a checker
    """need_gpus(n) skips the test unless this node has at least n GPUs."""
    def check(n: int) -> None:
        if torch.cuda.device_count() < n:
            pytest.skip(f"needs {n} GPUs, this node has {torch.cuda.device_count()}")
    return check
