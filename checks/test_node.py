"""Stage *node*: this node's torch build, GPUs, NCCL, backends and shared memory.

Runs inside every worker (each rank checks the node it runs on; the report merges the
same finding from ranks of one node). GPU probes skip with a reason on machines without
NVIDIA GPUs; their parsing and planning logic lives in ddpcheck.node.gpu / ddpcheck.node.nccl.
"""

from __future__ import annotations

import os
import shutil

import pytest
import torch
import torch.distributed as dist

from ddpcheck.diagnoses import BACKEND_UNAVAILABLE, DEV_SHM_TOO_SMALL, ProblemFound
from ddpcheck.judgements.bandwidth import human_size
from ddpcheck.node import devices, gpu, gpustate, nccl, ncclstack
from ddpcheck.scheduler import gpubinding
from ddpcheck.scheduler.srunworld import is_srun_rank
from ddpcheck.stages import stage
from ddpcheck.worker.world import first_line

SHM_MIN_BYTES = 512 << 20  # below this, NCCL's shared-memory transport and DataLoaders fail
NO_GPU = "no NVIDIA GPU on this node (nvidia-smi not found or lists none)"


def _raise(problems):
    if problems:
        raise ProblemFound(*problems)


def _torch_cuda_error() -> str:
    """First line of torch's reason for not using CUDA ("" when it initialises)."""
    try:
        torch.cuda.init()
    except Exception as exc:  # torch raises RuntimeError/AssertionError with the driver's text
        return first_line(exc)
    return ""


@stage("node")
def test_torch_build_and_gpu_count_fit_the_job(world, settings, record):
    """torch's build (CUDA or CPU-only) and GPU count fit the job; a GPU node is never CPU."""
    text = gpu.run_nvidia_smi(("-L",))
    gpus = gpu.parse_nvidia_smi_list(text or "")
    devs = gpustate.device_files()
    cuda_build = torch.version.cuda is not None
    count = torch.cuda.device_count() if cuda_build else 0
    k = settings.gpus_per_replica
    slots, _ = gpustate.device_slots(world.local_rank, world.local_world_size, count, k,
                                     is_srun_rank(os.environ))
    need = devices.expected_gpus(slots, k) if world.backend == "nccl" or gpus or devs else 0
    record.key_figure(f"torch {torch.__version__}, {count} GPU(s)")
    record.measure("torch", torch.__version__)
    record.measure("gpu_device_files", len(devs))
    gloo_asked = os.environ.get("DDPCHECK_BACKEND", "auto") not in ("", "auto", "nccl")
    problems = gpustate.check_node_gpus(text, devs, cpu_run=gloo_asked,
                                        kernel_version=gpustate.kernel_driver_version())
    if not gloo_asked:
        problems += gpustate.check_torch_sees_gpus(
            devs, len(gpus), cuda_build, count,
            _torch_cuda_error() if cuda_build and count == 0 and devs else "")
    _raise(problems or devices.check_gpu_counts(
        None if text is None else gpus, count, need, cuda_build,
        cuda_visible_devices=os.environ.get("CUDA_VISIBLE_DEVICES"), gpus_per_replica=k,
        lost_bus_ids=gpu.lost_gpus(text or "")))


@stage("node")
def test_cuda_visible_devices_names_existing_gpus():
    """CUDA_VISIBLE_DEVICES lists distinct GPUs that exist on this node."""
    gpus = gpu.list_gpus()
    if not gpus:
        pytest.skip(NO_GPU)
    _raise(devices.check_cuda_visible_devices(os.environ.get("CUDA_VISIBLE_DEVICES"), gpus))


def _nccl_view() -> tuple[str, nccl.Version | None, dict[str, nccl.Version | None]]:
    """(/proc/self/maps text, NCCL torch was built with, {mapped libnccl: its own version})."""
    with open("/proc/self/maps", encoding="utf-8") as fh:
        maps = fh.read()
    build = None
    if torch.version.cuda is not None and dist.is_nccl_available():
        build = nccl.parse_nccl_version(torch.cuda.nccl.version())  # compile-time constants
    asked = {p: ncclstack.ask_version(p) for p in nccl.loaded_libnccls(maps)}
    return maps, build, asked


@stage("node")
def test_loaded_libnccl_is_the_one_torch_expects(record):
    """The libnccl this process loaded answers ncclGetVersion with torch's build version."""
    maps, build, asked = _nccl_view()
    if build is None:
        pytest.skip("this torch build has no NCCL (CPU-only or ROCm)")
    libs = list(asked)
    if not libs:
        record.key_figure(f"NCCL {nccl.format_version(build)} (linked into torch)")
        return
    loaded = asked[libs[0]]
    relation = nccl.version_relation(loaded, build) if loaded else "unknown"
    shown = " (newer: shown, not failed)" if relation == "newer" else ""
    record.key_figure(f"NCCL {nccl.format_version(loaded)} loaded, "
                      f"{nccl.format_version(build)} built{shown}")
    record.measure("nccl_loaded_vs_build", relation)
    record.measure("libnccl", {p: nccl.format_version(v) for p, v in asked.items()})
    _raise(nccl.check_nccl_library(maps, build, loaded,
                                   expected_from="torch's build (torch.cuda.nccl.version())"))


def _driver_version() -> str | None:
    """The loaded kernel module's version, else nvidia-smi's (containers may hide /proc's)."""
    found = gpustate.kernel_driver_version()
    if found is None:
        gpus = gpu.parse_nvidia_smi_query(gpu.run_nvidia_smi(gpu.QUERY_ARGS) or "")
        found = gpus[0].driver_version if gpus else None
    return found


@stage("node")
def test_all_ranks_load_the_same_nccl_plugin_and_driver(world, record):
    """Every rank loads the same NCCL, NCCL network plugin and NVIDIA driver."""
    maps, build, asked = _nccl_view()
    facts = ncclstack.stack_facts(maps, os.environ, _driver_version(), build, asked)
    record.measure("nccl_stack", facts)
    got = world.gather("nccl-stack", facts)  # judged on rank 0: O(R) in all
    hosts = {r: world.hosts_by_rank.get(r, f"rank{r}") for r in got.values}
    _raise(ncclstack.compare_stacks(got.values, hosts))


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


@stage("node")
def test_an_srun_task_sees_the_device_its_local_rank_names(world, record):
    """A task srun started with its own GPUs (--gpus-per-task, --gpu-bind) still sees
    cuda:LOCAL_RANK, which scripts pass to set_device; else the ordinal error is named."""
    if not is_srun_rank(os.environ):
        pytest.skip("not a task started by srun (torchrun ranks see the node's GPUs)")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device in this task")
    visible = torch.cuda.device_count()
    binding = gpubinding.detect(os.environ)
    record.measure("srun_gpu_binding", binding.source if binding else "none")
    record.key_figure(f"{visible} GPU(s) visible to task {world.local_rank}")
    _raise(gpubinding.ordinal_problem(world.local_rank, visible, world.gpus_per_replica,
                                      os.environ))
