"""Stage *node*: this node's torch build, GPUs, NCCL, backends and shared memory.

Runs inside every worker (each rank checks the node it runs on; the report merges the
same finding from ranks of one node). GPU probes skip with a reason on machines without
NVIDIA GPUs; their parsing and planning logic lives in ddpcheck.gpu / ddpcheck.nccl.
"""

from __future__ import annotations

import os
import shutil

import pytest
import torch
import torch.distributed as dist

from ddpcheck import gpu, nccl
from ddpcheck.bandwidth import human_size
from ddpcheck.diagnoses import BACKEND_UNAVAILABLE, DEV_SHM_TOO_SMALL, ProblemFound
from ddpcheck.stages import stage

SHM_MIN_BYTES = 512 << 20  # below this, NCCL's shared-memory transport and DataLoaders fail
NO_GPU = "no NVIDIA GPU on this node (nvidia-smi not found or lists none)"


def _raise(problems):
    if problems:
        raise ProblemFound(*problems)


@stage("node")
def test_torch_build_and_gpu_count_fit_the_job(world, settings, record):
    """torch's build (CUDA or CPU-only) and GPU count fit what the job expects of this node."""
    gpus = gpu.list_gpus()
    cuda_build = torch.version.cuda is not None
    count = torch.cuda.device_count() if cuda_build else 0
    need = gpu.expected_gpus(world.local_world_size, settings.gpus_per_replica) \
        if world.backend == "nccl" or gpus else 0
    record.key_figure(f"torch {torch.__version__}, {count} GPU(s)")
    record.measure("torch", torch.__version__)
    _raise(gpu.check_gpu_counts(gpus, count, need, cuda_build,
                                cuda_visible_devices=os.environ.get("CUDA_VISIBLE_DEVICES"),
                                gpus_per_replica=settings.gpus_per_replica))


@stage("node")
def test_cuda_visible_devices_names_existing_gpus():
    """CUDA_VISIBLE_DEVICES lists distinct GPUs that exist on this node."""
    gpus = gpu.list_gpus()
    if not gpus:
        pytest.skip(NO_GPU)
    _raise(gpu.check_cuda_visible_devices(os.environ.get("CUDA_VISIBLE_DEVICES"), gpus))


@stage("node")
def test_loaded_libnccl_is_the_one_torch_expects(world, record):
    """The libnccl this process loads is NCCL's version torch reports (no shadowing copy)."""
    if not (torch.cuda.is_available() and dist.is_nccl_available()):
        pytest.skip("NCCL needs a CUDA build of torch and a GPU (none here)")
    version = nccl.parse_nccl_version(torch.cuda.nccl.version())
    record.key_figure(f"NCCL {nccl.format_version(version)}")
    with open("/proc/self/maps", encoding="utf-8") as fh:
        maps = fh.read()
    _raise(nccl.check_nccl_library(maps, version, version))


@stage("node")
def test_backend_under_test_is_available(world, record):
    """The backend under test (gloo or nccl) is compiled into this torch build."""
    available = [b for b, ok in (("gloo", dist.is_gloo_available()),
                                 ("nccl", dist.is_nccl_available()),
                                 ("mpi", dist.is_mpi_available())) if ok]
    record.key_figure(f"{world.backend} ({'/'.join(available)})")
    record.measure("backends", available)
    if world.backend not in available:
        raise BACKEND_UNAVAILABLE.fail(
            f"backend {world.backend!r} is not available in torch {torch.__version__} "
            f"(available: {', '.join(available) or 'none'})")


@stage("node")
def test_nccl_settings_are_valid():
    """NCCL_* variables hold values NCCL understands."""
    _raise(nccl.check_nccl_env(os.environ))


@stage("node")
def test_dev_shm_has_room(record):
    """/dev/shm has room for NCCL's shared-memory transport and DataLoader workers."""
    if not os.path.isdir("/dev/shm"):
        pytest.skip("/dev/shm does not exist on this system")
    usage = shutil.disk_usage("/dev/shm")
    record.key_figure(f"{human_size(usage.free)} free")
    record.measure("dev_shm_free_bytes", usage.free)
    if usage.free < SHM_MIN_BYTES:
        raise DEV_SHM_TOO_SMALL.fail(
            f"/dev/shm has {human_size(usage.free)} free of {human_size(usage.total)}; "
            f"ddpcheck expects at least {human_size(SHM_MIN_BYTES)}")
