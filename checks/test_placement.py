"""Stage *placement*: the rank-to-device plan for ``--gpus-per-replica K`` is valid and runs.

Runs inside every worker. Local rank r drives devices r*K..r*K+K-1; the devices must exist
and be distinct across the local ranks of a host, and a model split head/tail across them
must run forward and backward. Without GPUs the plan is validated against K virtual
devices per rank and the split model runs on the CPU.
"""

from __future__ import annotations

import os

import pytest
import torch

from ddpcheck.diagnoses import DUPLICATE_DEVICE, PLACEMENT_FAILED, ProblemFound
from ddpcheck.node import devices, gpustate
from ddpcheck.ranges import format_ranks
from ddpcheck.scheduler.srunworld import is_srun_rank
from ddpcheck.stages import stage
from ddpcheck.worker.world import first_line


def _devices(world, k):
    if world.backend == "nccl":
        count = torch.cuda.device_count()
        # an srun task with its own devices (--gpus-per-task) is slot 0 of 1 on them
        slots, slot = gpustate.device_slots(world.local_rank, world.local_world_size, count, k,
                                            is_srun_rank(os.environ))
        plan = devices.device_plan(slots, k, count,
                               cuda_visible_devices=os.environ.get("CUDA_VISIBLE_DEVICES"))
        return [torch.device("cuda", i) for i in plan[slot]], plan[slot]
    # CPU: validate the same plan against K virtual devices per local rank
    plan = devices.device_plan(world.local_world_size, k, world.local_world_size * k)
    return [torch.device("cpu")] * k, plan[world.local_rank]


def _identity(index: int) -> str:
    """The board behind a CUDA ordinal: its UUID, else its PCI bus id (never the ordinal).

    Ordinals are per process (CUDA_VISIBLE_DEVICES renumbers them), so two ranks' "cuda:0"
    can be one board or two; the UUID (cudaDeviceProp::uuid) names the board itself.
    """
    props = torch.cuda.get_device_properties(index)
    uuid = getattr(props, "uuid", None)
    if uuid is not None:
        return f"GPU-{uuid}"
    bus = [getattr(props, f, None) for f in ("pci_domain_id", "pci_bus_id", "pci_device_id")]
    if None not in bus:
        return "{:08x}:{:02x}:{:02x}.0".format(*bus)
    return f"cuda:{index}"


@stage("placement")
def test_each_replica_gets_distinct_existing_devices(world, settings, record):
    """Every local rank's devices exist and no two ranks of a host drive the same GPU."""
    k = settings.gpus_per_replica
    _, ids = _devices(world, k)
    if world.backend != "nccl":
        pytest.skip(f"backend {world.backend}: the replicas run on the CPU, which every rank "
                    "shares by design; device plan validated against "
                    f"{world.local_world_size * k} virtual devices")
    boards = [_identity(i) for i in ids]
    got = world.gather("placement", [world.host, world.local_rank, boards])  # judged on rank 0
    owners: dict[tuple[str, str], list[int]] = {}
    for rank, (host, _local, devs) in got.values.items():
        for d in devs:
            owners.setdefault((host, d), []).append(rank)
    shared = {key: ranks for key, ranks in owners.items() if len(ranks) > 1}
    record.key_figure(f"local rank {world.local_rank}: devices {list(ids)}")
    record.measure("placement_boards", boards)
    if shared:
        (host, dev), ranks = next(iter(shared.items()))
        raise DUPLICATE_DEVICE.fail(f"ranks {format_ranks(ranks)} on {host} all drive GPU "
                                    f"{dev}", ranks=ranks, hosts=[host])


@stage("placement")
def test_split_model_runs_across_the_replica_devices(world, settings):
    """A head/tail model split across the replica's first and last device trains a step."""
    devices, ids = _devices(world, settings.gpus_per_replica)
    head_dev, tail_dev = devices[0], devices[-1]
    torch.manual_seed(0)
    head = torch.nn.Linear(32, 64).to(head_dev)
    tail = torch.nn.Linear(64, 8).to(tail_dev)
    try:
        x = torch.randn(16, 32, device=head_dev)
        out = tail(torch.relu(head(x)).to(tail_dev))
        out.square().mean().backward()
        grads_ok = head.weight.grad is not None and bool(torch.isfinite(head.weight.grad).all())
    except Exception as exc:  # a device error: report which devices, and what torch said
        raise PLACEMENT_FAILED.fail(f"split model on devices {list(ids)} failed: "
                                    f"{first_line(exc)}") from exc
    if not grads_ok:
        raise ProblemFound(PLACEMENT_FAILED.problem(
            f"split model on devices {list(ids)}: gradients did not reach the head"))
