"""A tiny training-like job with one injected fault, for ``bench/explain_real_runs.py``.

Run under torchrun (or mp.spawn, or plain python); ``FAULT`` names the fault and
``FAULT_RANK`` the rank that has it. Each rank trains a small linear model on CPU/gloo with
a short process-group timeout, so a hang fails within seconds.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist

FAULT = os.environ.get("FAULT", "none")
FAULT_RANK = int(os.environ.get("FAULT_RANK", "1"))
# torchrun --max-restarts: FAULT_LATER replaces FAULT from the first restart on (the agent
# sets TORCHELASTIC_RESTART_COUNT, torch/distributed/elastic/agent/server/local_elastic_agent.py)
if int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")) > 0 and os.environ.get("FAULT_LATER"):
    FAULT = os.environ["FAULT_LATER"]
STEPS = 6
FAULT_STEP = 3
PG_TIMEOUT_S = float(os.environ.get("PG_TIMEOUT_S", "5"))


def log(rank: int, msg: str) -> None:
    print(f"{time.strftime('%Y-%m-%d %H:%M:%S')} rank {rank}: {msg}", flush=True)


def evaluate(model: torch.nn.Module, rank: int) -> None:
    log(rank, "evaluating on the validation set")
    time.sleep(PG_TIMEOUT_S + 6)  # longer than the process group's timeout


def save_checkpoint(model: torch.nn.Module, path: str) -> None:
    with open(path, "wb") as fh:
        torch.save(model.state_dict(), fh)


class Shards(torch.utils.data.Dataset):
    """Samples of 1 MiB each, so a DataLoader worker hands batches over through /dev/shm."""

    def __len__(self) -> int:
        return 64

    def __getitem__(self, i: int) -> torch.Tensor:
        return torch.randn(32, 64 * 128)


def batches() -> object:
    """Plain random batches, or (DATALOADER=1) batches from 2 DataLoader worker processes."""
    if not os.environ.get("DATALOADER"):
        return iter(lambda: torch.randn(32, 64), None)
    loader = torch.utils.data.DataLoader(Shards(), batch_size=4, num_workers=2)
    return (b.view(-1, 64)[:32] for b in loader)


def train(rank: int, world: int) -> None:
    torch.manual_seed(0)
    model = torch.nn.Linear(64, 64)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for p in model.parameters():
        dist.broadcast(p.data, 0)
    data = batches()
    for step in range(STEPS):
        x = next(data)
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        if step == FAULT_STEP and rank == FAULT_RANK:
            inject(rank, model)
        if step == FAULT_STEP and FAULT == "eval" and rank == 0:
            evaluate(model, rank)
        for p in model.parameters():
            grad = p.grad
            if step == FAULT_STEP and FAULT == "mismatch-op" and rank == FAULT_RANK:
                dist.broadcast(grad, 0)
                continue
            if step == FAULT_STEP and FAULT == "mismatch-size" and rank == FAULT_RANK:
                grad = torch.cat([grad.flatten(), grad.flatten()])
            dist.all_reduce(grad)
        opt.step()
        log(rank, f"step {step} loss {loss.item():.4f}")
    dist.barrier()
    log(rank, "done")


def inject(rank: int, model: torch.nn.Module) -> None:
    if FAULT == "exception":
        batch = {"input_ids": torch.zeros(4)}
        log(rank, "loading batch")
        _ = batch["labels"]  # a KeyError of the user's own code
    elif FAULT == "sigkill":
        os.kill(os.getpid(), signal.SIGKILL)  # what the kernel's OOM killer does
    elif FAULT == "exception-data":
        log(rank, "reading shard 3")
        raise ValueError("could not parse record 1204 of shard 3: expected 3 fields, got 2")
    elif FAULT == "sigsegv":
        os.kill(os.getpid(), signal.SIGSEGV)  # what a crash in native code does
    elif FAULT == "slow-save":
        log(rank, "Saving model checkpoint to /tmp/ckpt-3")
        time.sleep(PG_TIMEOUT_S + 6)  # this rank alone, longer than the timeout
    elif FAULT == "exit":
        log(rank, "leaving early")
        sys.exit(0)  # never joins the next collective
    elif FAULT == "oom":  # grow until the memory cgroup's OOM killer ends this rank
        log(rank, "caching the dataset in memory")
        held = []
        while True:
            held.append(torch.ones(16 << 20))  # 64 MiB, every page written
    elif FAULT == "disk-full":
        save_checkpoint(model, os.environ.get("CKPT_PATH", "/dev/full"))


def main(local_rank: int | None = None, world: int | None = None) -> None:
    if local_rank is not None:  # mp.spawn
        os.environ["RANK"] = str(local_rank)
        os.environ["WORLD_SIZE"] = str(world)
    dist.init_process_group("gloo", timeout=timedelta(seconds=PG_TIMEOUT_S))
    rank, world = dist.get_rank(), dist.get_world_size()
    log(rank, f"initialised, world size {world}")
    try:
        train(rank, world)
    finally:
        if FAULT not in ("sigkill", "oom"):
            dist.destroy_process_group()


if __name__ == "__main__":
    if os.environ.get("RECORD"):  # torchelastic's error_file (error.json) for the agent
        from torch.distributed.elastic.multiprocessing.errors import record

        main = record(main)
    if os.environ.get("SPAWN"):
        import torch.multiprocessing as mp

        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        n = int(os.environ["SPAWN"])
        mp.spawn(main, args=(n,), nprocs=n)
    else:
        main()
