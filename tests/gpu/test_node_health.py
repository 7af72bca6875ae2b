"""Node health on a real GPU node: nvidia-smi's real answers read, every GPU named.

GPU tier (skipped without CUDA). Reads the real nvidia-smi, kernel log and sysfs through
the same code the launcher's preflight uses; a healthy node has no problem, and a sick one
names its GPU. Prints every finding, so the closing note can quote them.
"""

from __future__ import annotations

import os

import pytest
import torch

from ddpcheck.diagnoses import CATALOGUE
from ddpcheck.launcher.config import build_config
from ddpcheck.launcher.nodehealth import node_health
from ddpcheck.node import gpuquery

pytestmark = pytest.mark.gpu


def test_the_real_query_reads_every_gpu_torch_sees():
    gpus, why = gpuquery.read_gpus()
    assert why == "", why
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        assert len(gpus) == torch.cuda.device_count()
    for g in gpus:
        assert g.uuid.startswith("GPU-") and g.bus_id and g.memory_total_mib
        assert g.pcie_width is not None and g.pcie_gen is not None
        print(g)


def test_node_health_on_this_node_names_what_it_finds():
    health = node_health(build_config({}, {}), dict(os.environ))
    for p in health.problems:
        print(f"PROBLEM {p.code}: {p.observed}")
        assert p.code in CATALOGUE and p.observed and p.fix and p.stage == "preflight"
    for n in health.notes:
        print(f"NOTE {n}")
