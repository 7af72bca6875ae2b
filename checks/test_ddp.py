"""Stage *ddp*: DistributedDataParallel trains in lockstep and matches a single process.

Runs inside every worker. Every rank builds the same tiny model from one seed; after each
step the parameters must be identical on all ranks and equal (within float tolerance) to
a single-process model trained on the concatenated global batch. The reference runs on the
same device, and both run in IEEE float32 (TF32 off inside the probe, the job's settings
restored after it, worker.precision): NGC's TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1 would
otherwise put ~1e-3 of TF32 rounding into a comparison made at rtol 1e-4.
"""

from __future__ import annotations

import hashlib
import os
import time
from datetime import timedelta

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data.distributed import DistributedSampler

from ddpcheck.diagnoses import DDP_DIVERGED, SAMPLER_SHARDS_WRONG
from ddpcheck.judgements import links
from ddpcheck.scheduler.jobidentity import job_identity, judge
from ddpcheck.stages import stage
from ddpcheck.worker import precision, subgroups

STEPS, PER_RANK, LR = 3, 4, 0.1
SAMPLER_SEED = 7


def _model() -> torch.nn.Module:
    torch.manual_seed(1234)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))


def _global_batch(step: int, world_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(100 + step)
    n = PER_RANK * world_size
    return torch.randn(n, 8, generator=g), torch.randn(n, 4, generator=g)


def _flat(model: torch.nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1).cpu() for p in model.parameters()])


@stage("ddp")
def test_ddp_steps_match_a_single_process_reference(pg, record):
    """After each step, parameters are identical on all ranks and equal the reference."""
    with precision.full_fp32() as jobs:
        record.measure("job_fp32_precision", jobs.describe())
        _steps_match_the_reference(pg, record)


def _steps_match_the_reference(pg, record) -> None:
    device, n, r = pg.device, pg.world_size, pg.rank
    ddp = DistributedDataParallel(_model().to(device),
                                  device_ids=[device.index] if device.type == "cuda" else None)
    ref = _model().to(device)  # the same device: the same kernels as the model under test
    opt = torch.optim.SGD(ddp.parameters(), lr=LR)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=LR)
    worst = 0.0
    for step in range(STEPS):
        x, y = _global_batch(step, n)
        mine = slice(r * PER_RANK, (r + 1) * PER_RANK)
        opt.zero_grad()
        torch.nn.functional.mse_loss(ddp(x[mine].to(device)), y[mine].to(device)).backward()
        opt.step()
        ref_opt.zero_grad()
        torch.nn.functional.mse_loss(ref(x.to(device)), y.to(device)).backward()
        ref_opt.step()
        params = _flat(ddp.module)
        gathered = [torch.empty_like(params) for _ in range(n)]
        dist.all_gather(gathered, params.to(device) if device.type == "cuda" else params)
        odd = [i for i, p in enumerate(gathered) if not torch.equal(p.cpu(), gathered[0].cpu())]
        if odd:
            raise DDP_DIVERGED.fail(f"after step {step + 1}, parameters on ranks {odd} differ "
                                    f"from rank 0's", ranks=odd)
        diff = float((params - _flat(ref)).abs().max())
        worst = max(worst, diff)
        if not torch.allclose(params, _flat(ref), rtol=1e-4, atol=1e-5):
            raise DDP_DIVERGED.fail(f"after step {step + 1}, rank {r}'s parameters differ from "
                                    f"the single-process reference by up to {diff:.2e}")
    record.key_figure(f"{STEPS} steps, max diff {worst:.1e}")
    record.measure("ddp_max_abs_diff", worst)


@stage("ddp")
def test_sampler_shards_from_the_jobs_own_rank_variables_are_disjoint_and_complete(pg):
    """The rank, world size and local rank a job reads from its launcher's variables match
    the process group; samplers built from them (same seed) shard the data exactly once."""
    ident = job_identity(os.environ)
    order = torch.randperm(1000, generator=torch.Generator().manual_seed(SAMPLER_SEED + 1))
    ident["order"] = hashlib.sha256(repr(order.tolist()).encode()).hexdigest()[:16]  # no numpy
    got = pg.gather("sampler-identity", ident)  # judged on rank 0, O(R) in all
    problems = judge(got.values, pg.hosts_by_rank, pg.world_size) if pg.rank == 0 else []
    orders = {v["order"] for v in got.values.values()}
    if len(orders) > 1:
        problems.append("the same seed gives different shuffles on different ranks "
                        "(different torch versions?): shards overlap")
    n = ident["world"] if ident["world"] and ident["world"] > 0 else pg.world_size
    rank = ident["rank"] if ident["rank"] is not None and 0 <= ident["rank"] < n else 0
    size = 103
    for drop_last in (False, True):
        sampler = DistributedSampler(range(size), num_replicas=n, rank=rank, shuffle=True,
                                     seed=SAMPLER_SEED, drop_last=drop_last)
        sampler.set_epoch(1)
        mine = torch.tensor(list(sampler), dtype=torch.int64)
        shards = [torch.empty_like(mine) for _ in range(pg.world_size)]
        dist.all_gather(shards, mine.to(pg.device) if pg.device.type == "cuda" else mine)
        every = torch.cat([s.cpu() for s in shards]).tolist()
        distinct = set(every)
        padding = len(every) - size if not drop_last else 0
        if drop_last and len(distinct) != len(every):
            problems.append(f"drop_last=True: {len(every) - len(distinct)} indices repeat")
        if not drop_last and (len(distinct) != size or len(every) - len(distinct) != padding):
            problems.append(f"drop_last=False: {len(distinct)} of {size} indices covered, "
                            f"{len(every) - len(distinct)} repeats (padding is {padding})")
    if problems:
        raise SAMPLER_SHARDS_WRONG.fail("; ".join(problems))


SCALING_STEPS, SCALING_WARMUP, SCALING_BATCH = 6, 2, 64


def _scaling_sizes(n: int) -> list[int]:
    """World sizes 1, 2, 4, ... up to n, and n itself."""
    sizes, k = [], 1
    while k < n:
        sizes.append(k)
        k *= 2
    return sizes + [n]


@stage("ddp")
def test_ddp_scaling_across_world_sizes(pg, record):
    """DDP step time and samples/s at world sizes 1, 2, 4, ... up to the full world."""
    device = pg.device
    sizes = _scaling_sizes(pg.world_size)
    # Each size's group made once with a group-local barrier and the run's deadline:
    # log2 R + 1 groups, none a barrier over the whole world (ddpcheck.worker.subgroups).
    timeout = timedelta(seconds=pg.timeout)
    groups = {k: subgroups.member_group(pg.rank, list(range(k)), timeout) for k in sizes}
    rows = []
    for k in sizes:
        if pg.rank < k:
            step = _time_ddp_steps(groups[k], device)
            rows.append({"world_size": k, "step_time_s": step,
                         "samples_per_s": k * SCALING_BATCH / step})
        dist.barrier()  # ranks outside the subgroup wait here, so sizes never overlap
    pg.gather("scaling", [])  # every rank finished its sizes; rank 0 alone holds the rows
    if pg.rank != 0:
        return
    table = links.scaling_table(rows)
    record.measure("ddp_scaling", table)
    last = table[-1] if table else None
    if last and last.get("efficiency") is not None:
        record.key_figure(f"{last['efficiency'] * 100:.0f}% efficiency at {last['world_size']}")


def _time_ddp_steps(group, device: torch.device) -> float:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(),
                                torch.nn.Linear(512, 256)).to(device)
    ddp = DistributedDataParallel(model, process_group=group,
                                  device_ids=[device.index] if device.type == "cuda" else None)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    x = torch.randn(SCALING_BATCH, 256, device=device)
    times = []
    for i in range(SCALING_WARMUP + SCALING_STEPS):
        start = time.perf_counter()
        opt.zero_grad()
        ddp(x).square().mean().backward()
        opt.step()
        if device.type == "cuda":
            torch.cuda.synchronize()
        if i >= SCALING_WARMUP:
            times.append(time.perf_counter() - start)
    slowest = torch.tensor([sorted(times)[len(times) // 2]], dtype=torch.float64, device=device)
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX, group=group)
    return float(slowest.item())
