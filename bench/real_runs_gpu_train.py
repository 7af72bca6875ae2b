"""A tiny GPU training job with one injected fault, for ``bench/real_runs_gpu.py``.

Run under torchrun on a machine with CUDA (the bench skips its scenarios elsewhere): each
rank binds ``cuda:LOCAL_RANK``, forms an NCCL world and trains a small model with DDP, the
way a user's script is written. ``FAULT`` names the fault, ``FAULT_RANK`` the rank that has
it; the faults are the GPU mistakes users report (``shared/FAILURES.md``): a device index
that does not exist, two ranks on one GPU, a CPU tensor under NCCL, a CUDA out-of-memory,
a device-side assert, a module on the CPU handed to DDP with ``device_ids``.
"""

from __future__ import annotations

import os
import time
from datetime import timedelta

import torch
import torch.distributed as dist

FAULT = os.environ.get("FAULT", "none")
FAULT_RANK = int(os.environ.get("FAULT_RANK", "0"))
PG_TIMEOUT_S = float(os.environ.get("PG_TIMEOUT_S", "5"))
STEPS = 6
FAULT_STEP = 3


def log(rank: int, msg: str) -> None:
    print(f"{time.strftime('%Y-%m-%d %H:%M:%S')} rank {rank}: {msg}", flush=True)


def device_for(local_rank: int) -> torch.device:
    """cuda:LOCAL_RANK, or (FAULT=same-device) cuda:0 on every rank: a script that
    hard-codes the device, so two ranks of one node share a GPU."""
    return torch.device("cuda", 0 if FAULT == "same-device" else local_rank)


def model_on(device: torch.device, rank: int) -> torch.nn.Module:
    from torch.nn.parallel import DistributedDataParallel

    model = torch.nn.Sequential(torch.nn.Embedding(1000, 256), torch.nn.Linear(256, 256))
    if FAULT == "ddp-cpu-module" and rank == FAULT_RANK:
        log(rank, "wrapping the model in DistributedDataParallel")
        return DistributedDataParallel(model, device_ids=[device.index])  # still on the CPU
    model = model.to(device)
    log(rank, "wrapping the model in DistributedDataParallel")
    return DistributedDataParallel(model, device_ids=[device.index])


def batch(device: torch.device, rank: int, step: int) -> torch.Tensor:
    tokens = torch.randint(0, 1000, (64, 32), device=device)
    if FAULT == "device-assert" and rank == FAULT_RANK and step == FAULT_STEP:
        tokens[0, 0] = 1000  # a token id past the embedding table (a tokenizer/vocab mismatch)
    return tokens


def inject(device: torch.device, rank: int) -> None:
    if FAULT == "cuda-oom":  # activations of a batch too big for the GPU
        log(rank, "forward pass with batch size 4096")
        free, _ = torch.cuda.mem_get_info(device)
        held = [torch.empty(free // 2, dtype=torch.uint8, device=device)]
        held.append(torch.empty(free, dtype=torch.uint8, device=device))
    elif FAULT == "cpu-tensor":  # a metric all_reduced where it was computed, on the CPU
        log(rank, "averaging the validation loss")
        dist.all_reduce(torch.tensor([1.0]))


def main() -> None:
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = device_for(local_rank)
    torch.cuda.set_device(device)
    dist.init_process_group("nccl", timeout=timedelta(seconds=PG_TIMEOUT_S),
                            device_id=device if FAULT != "same-device" else None)
    rank, world = dist.get_rank(), dist.get_world_size()
    log(rank, f"initialised, world size {world}, {device}")
    model = model_on(device, rank)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    try:
        for step in range(STEPS):
            if step == FAULT_STEP and rank == FAULT_RANK:
                inject(device, rank)
            loss = model(batch(device, rank, step)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            log(rank, f"step {step} loss {loss.item():.4f}")
        dist.barrier()
        log(rank, "done")
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    if os.environ.get("RECORD"):  # torchelastic's error_file (error.json) for the agent
        from torch.distributed.elastic.multiprocessing.errors import record

        main = record(main)
    main()
