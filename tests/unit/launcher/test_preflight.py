"""Tests for ddpcheck.launcher.preflight: the node checks that run before torchrun.

GPU lists are injected (monkeypatch on launcher.preflight.gpu.list_gpus), so these tests mean
the same on a CPU-only machine and on a GPU node.
"""

from __future__ import annotations

import socket
from typing import Callable, Optional

import pytest

from ddpcheck.diagnoses import Problem
from ddpcheck.launcher import preflight
from ddpcheck.launcher.config import RunConfig
from ddpcheck.node.gpu import GpuInfo, MigDevice
from ddpcheck.node.interfaces import Interface
from ddpcheck.node.netprobe import Resolution

NodeGpus = Callable[[Optional[list[GpuInfo]]], None]


def gpus(n: int) -> list[GpuInfo]:
    return [GpuInfo(i, "NVIDIA A100-SXM4-80GB", f"GPU-{i:08x}-0000-0000-0000-000000000000")
            for i in range(n)]


def codes(problems: list[Problem]) -> list[str]:
    return [p.code for p in problems]


@pytest.fixture
def node_gpus(monkeypatch: pytest.MonkeyPatch) -> NodeGpus:
    """Set what nvidia-smi -L lists on this node (None: no nvidia-smi)."""
    def setup(found: list[GpuInfo] | None) -> None:
        monkeypatch.setattr(preflight.gpu, "list_gpus", lambda *a, **k: found)
    return setup


# --- auto_nproc -----------------------------------------------------------------------------

@pytest.mark.parametrize("found,expected", [(None, 2), ([], 2), (gpus(8), 8), (gpus(1), 1)])
def test_auto_nproc_is_one_rank_per_gpu_else_two(node_gpus: NodeGpus,
                                                 found: list[GpuInfo] | None,
                                                 expected: int) -> None:
    node_gpus(found)
    assert preflight.auto_nproc() == expected


def test_auto_nproc_uses_the_gpus_it_is_given() -> None:
    assert preflight.auto_nproc(gpus(4)) == 4
    assert preflight.auto_nproc([]) == preflight.CPU_RANKS == 2


# --- endpoint_ip ----------------------------------------------------------------------------

def test_endpoint_ip_only_for_multi_node_runs() -> None:
    assert preflight.endpoint_ip(RunConfig(nodes=1, rdzv_endpoint=("127.0.0.1", 29500))) is None
    assert preflight.endpoint_ip(RunConfig(nodes=2)) is None
    assert preflight.endpoint_ip(RunConfig(nodes=2, rdzv_endpoint=("127.0.0.1", 29500))) == (
        "127.0.0.1")


# --- node_preflight ---------------------------------------------------------------------------

def test_a_missing_gloo_interface_is_found_at_this_host_in_preflight(node_gpus: NodeGpus) -> None:
    node_gpus(None)
    [problem] = preflight.node_preflight(RunConfig(), {"GLOO_SOCKET_IFNAME": "eth9"}, 2)
    assert problem.code == "socket-ifname-invalid"
    assert problem.stage == "preflight"
    assert problem.hosts == (socket.gethostname(),)
    assert problem.observed.startswith("GLOO_SOCKET_IFNAME=eth9: no such interface on node ")


def test_both_interface_variables_are_checked(monkeypatch: pytest.MonkeyPatch,
                                              node_gpus: NodeGpus) -> None:
    node_gpus(None)
    monkeypatch.setattr(preflight, "interfaces",
                        lambda: [Interface.of("lo", "127.0.0.1/8"),
                                 Interface.of("eth0", "10.1.0.5/24")])
    monkeypatch.setattr(preflight, "resolve", lambda host: Resolution(host, ("10.1.0.1",)))
    cfg = RunConfig(nodes=2, rdzv_endpoint=("gpu-a", 29500))
    env = {"GLOO_SOCKET_IFNAME": "eth1", "NCCL_SOCKET_IFNAME": "lo"}
    problems = preflight.node_preflight(cfg, env, 2)
    assert codes(problems) == ["socket-ifname-invalid", "socket-ifname-unreachable"]
    assert all(p.stage == "preflight" for p in problems)


def test_no_gpus_and_auto_backend_is_no_gpu_problem(node_gpus: NodeGpus) -> None:
    node_gpus(None)  # no nvidia-smi: the worker's node stage reports the CPU-only run
    assert preflight.node_preflight(RunConfig(backend="auto"), {}, 2) == []
    node_gpus([])
    assert preflight.node_preflight(RunConfig(backend="auto"), {}, 2) == []


def test_a_plan_needing_more_gpus_than_the_node_has_is_too_few_gpus(node_gpus: NodeGpus) -> None:
    node_gpus(gpus(4))
    [problem] = preflight.node_preflight(RunConfig(backend="nccl"), {}, 8)
    assert problem.code == "too-few-gpus"
    assert problem.observed == ("local ranks 4-7 need cuda:4-7 but only 4 devices are visible "
                                "(CUDA_VISIBLE_DEVICES unset)")
    assert (problem.stage, problem.hosts) == ("preflight", (socket.gethostname(),))


def test_a_fitting_plan_has_no_gpu_problem(node_gpus: NodeGpus) -> None:
    node_gpus(gpus(8))
    assert preflight.node_preflight(RunConfig(), {}, 8) == []
    assert preflight.node_preflight(RunConfig(gpus_per_replica=2), {}, 4) == []


def test_cuda_visible_devices_counts_against_the_plan(node_gpus: NodeGpus) -> None:
    node_gpus(gpus(4))
    problems = preflight.node_preflight(RunConfig(), {"CUDA_VISIBLE_DEVICES": "0,7"}, 2)
    assert codes(problems) == ["cuda-visible-devices-invalid", "too-few-gpus"]


def test_gloo_backend_skips_the_gpu_checks(node_gpus: NodeGpus) -> None:
    node_gpus(gpus(4))
    assert preflight.node_preflight(RunConfig(backend="gloo"), {}, 8) == []


def test_auto_nproc_counts_as_cuda_does() -> None:
    assert preflight.auto_nproc(gpus(8), {"CUDA_VISIBLE_DEVICES": "0,1"}) == 2
    assert preflight.auto_nproc(gpus(8), {"CUDA_VISIBLE_DEVICES": "3"}) == 1  # srun per task
    mig = [GpuInfo(0, "NVIDIA A100-SXM4-80GB", "GPU-a", (
        MigDevice("3g.40gb", 0, "MIG-aaaa"), MigDevice("3g.40gb", 1, "MIG-bbbb")))]
    assert preflight.auto_nproc(mig, {"CUDA_VISIBLE_DEVICES": "MIG-aaaa,MIG-bbbb"}) == 1
    assert preflight.auto_nproc(gpus(8), {"CUDA_VISIBLE_DEVICES": "-1"}) == preflight.CPU_RANKS
