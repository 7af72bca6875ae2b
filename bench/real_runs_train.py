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
STEP_SLEEP_S = float(os.environ.get("STEP_SLEEP_S", "0"))  # a slower job (a signal mid-run)
WIDTH = int(os.environ.get("WIDTH", "64"))  # WIDTH x WIDTH weights: a bigger all_reduce


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
        if FAULT == "loader-worker-kill" and i == 20 and _rank() == FAULT_RANK:
            os.kill(os.getpid(), signal.SIGKILL)  # the OOM killer picks the worker
        if FAULT == "loader-worker-error" and i == 20 and _rank() == FAULT_RANK:
            raise ValueError(f"corrupt sample {i}: truncated image file")  # the user's dataset
        return torch.randn(32, 64 * 128)


class Pieces(torch.utils.data.Dataset):
    """Samples of 64 small tensors: each goes to the trainer as its own shared-memory file
    descriptor (torch's default file_descriptor sharing strategy), 256 per batch of 4."""

    def __len__(self) -> int:
        return 256

    def __getitem__(self, i: int) -> list[torch.Tensor]:
        return [torch.randn(8) for _ in range(64)]


def _rank() -> int:
    return int(os.environ.get("RANK", "0"))


def batches() -> object:
    """Plain random batches, or (DATALOADER=1) batches from 2 DataLoader worker processes
    (DATALOADER=pieces: batches of many small tensors, many descriptors in flight)."""
    if not os.environ.get("DATALOADER"):
        return iter(lambda: torch.randn(32, 64), None)
    if os.environ["DATALOADER"] == "pieces":
        loader = torch.utils.data.DataLoader(Pieces(), batch_size=4, num_workers=2)
        return (torch.cat([t.flatten() for t in b]).view(-1, 64)[:32] for b in loader)
    loader = torch.utils.data.DataLoader(Shards(), batch_size=4, num_workers=2)
    return (b.view(-1, 64)[:32] for b in loader)


class TwoHeads(torch.nn.Module):
    """A model with a head the loss does not use (FAULT=ddp-unused) or, on the fault rank,
    a layer of another shape (FAULT=ddp-shape) or one layer more (FAULT=ddp-extra-layer: a
    rank-dependent branch of the user's model code)."""

    def __init__(self, rank: int) -> None:
        super().__init__()
        width = 48 if FAULT == "ddp-shape" and rank == FAULT_RANK else 64
        self.body = torch.nn.Linear(64, width)
        self.head = torch.nn.Linear(width, 64)
        self.aux = torch.nn.Linear(64, 8)  # used only when FAULT is not ddp-unused
        if FAULT == "ddp-extra-layer" and rank == FAULT_RANK:
            self.adapter = torch.nn.Linear(64, 64)  # in the model, unused by forward

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if FAULT == "ddp-ready-twice":  # one layer in two reentrant checkpointed blocks
            from torch.utils.checkpoint import checkpoint

            h = checkpoint(self.body, x.requires_grad_(), use_reentrant=True)
            h = checkpoint(lambda t: self.body(self.head(t)), h, use_reentrant=True)
            return self.head(h)
        y = self.head(self.body(x))
        if FAULT == "ddp-unused":
            return y
        return y + self.aux(x).sum(dim=1, keepdim=True)


def train_ddp(rank: int) -> None:
    """DistributedDataParallel (find_unused_parameters=False, the default) on TwoHeads.

    FAULT=ddp-uneven: the fault rank's shard has 2 batches fewer and no ``Join`` context:
    it reaches the final barrier while the others all_reduce gradients."""
    from torch.nn.parallel import DistributedDataParallel

    torch.manual_seed(0)
    log(rank, "wrapping the model in DistributedDataParallel")
    # FAULT=ddp-ready-twice: what many wrappers pass (HF Trainer's ddp_find_unused_parameters)
    # FAULT=ddp-device-ids: a GPU script's device_ids=[local_rank] kept on a CPU model
    local = int(os.environ.get("LOCAL_RANK", rank))
    model = DistributedDataParallel(TwoHeads(rank),
                                    find_unused_parameters=FAULT == "ddp-ready-twice",
                                    **({"device_ids": [local]} if FAULT == "ddp-device-ids"
                                       else {}))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    if FAULT == "ddp-wrapped-attr":  # single-process code reading a layer off the wrapper
        log(rank, f"head width {model.head.out_features}")
    steps = STEPS - 2 if FAULT == "ddp-uneven" and rank == FAULT_RANK else STEPS
    for step in range(steps):
        loss = model(torch.randn(32, 64)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        log(rank, f"step {step} loss {loss.item():.4f}")
    dist.barrier()
    log(rank, "done")


def train(rank: int, world: int) -> None:
    torch.manual_seed(0)
    model = torch.nn.Linear(WIDTH, WIDTH)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for p in model.parameters():
        dist.broadcast(p.data, 0)
    data = batches()
    for step in range(STEPS):
        x = next(data)
        if WIDTH != 64:
            x = torch.randn(32, WIDTH)
        time.sleep(STEP_SLEEP_S)
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        if step == FAULT_STEP and rank == FAULT_RANK:
            inject(rank, model)
        if step == FAULT_STEP and FAULT == "eval" and rank == 0:
            evaluate(model, rank)
        if step == FAULT_STEP and FAULT == "gather-uneven":  # every rank gathers its loss
            mine = torch.zeros(2 if rank == FAULT_RANK else 1)  # one rank sends two values
            dist.all_gather([torch.zeros(1) for _ in range(world)], mine)
        if step == FAULT_STEP and FAULT == "p2p-size":  # a pipeline stage's activation shape
            if rank == 0:  # rank 0 sends 64 values, rank 1 expects 32 (another config)
                dist.send(torch.randn(64), 1)
            elif rank == 1:
                dist.recv(torch.empty(32), 0)
        if step == FAULT_STEP and FAULT == "bcast-object" and rank == FAULT_RANK:
            log(rank, "sharing the learning-rate schedule")
            dist.broadcast_object_list([{"lr": 0.01, "step": step}], src=rank)
        for p in model.parameters():
            grad = p.grad
            if step == FAULT_STEP and FAULT == "mismatch-op" and rank == FAULT_RANK:
                dist.broadcast(grad, 0)
                continue
            if step == FAULT_STEP and FAULT == "mismatch-size" and rank == FAULT_RANK:
                grad = torch.cat([grad.flatten(), grad.flatten()])
            if step == FAULT_STEP and FAULT == "mismatch-dtype" and rank == FAULT_RANK:
                grad = grad.double()  # float64 here, float32 on the others
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
    elif FAULT == "sigterm":  # a user's kill, or a node agent ending one process
        os.kill(os.getpid(), signal.SIGTERM)
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
    elif FAULT == "sigstop":  # stopped (SIGSTOP, a debugger, ^Z): alive but never arrives
        log(rank, "pausing")
        os.kill(os.getpid(), signal.SIGSTOP)
    elif FAULT == "missing-checkpoint":  # this rank's view of the checkpoint dir lacks it
        path = os.path.join(os.environ.get("CKPT_DIR", "/nonexistent/ckpt"), "step-3.pt")
        log(rank, f"loading checkpoint {path}")
        model.load_state_dict(torch.load(path))
    elif FAULT == "exit-1":  # a library's (or the user's) sys.exit(1), no traceback
        log(rank, "invalid configuration, giving up")
        sys.exit(1)
    elif FAULT == "init-twice":  # a helper initialises the process group again
        dist.init_process_group("gloo", timeout=timedelta(seconds=PG_TIMEOUT_S))
    elif FAULT == "subgroup-some":  # only this rank creates the subgroup (all must call it)
        log(rank, "creating the evaluation subgroup")
        dist.new_group(ranks=[0, 1])
    elif FAULT == "save-readonly":  # the checkpoint directory is on a read-only mount
        path = os.path.join(os.environ["CKPT_DIR"], "step-3.pt")
        log(rank, f"Saving model checkpoint to {path}")
        save_checkpoint(model, path)
    elif FAULT == "save-missing-dir":  # a directory that exists on another node only
        path = "/scratch/run-42/checkpoints/step-3.pt"
        log(rank, f"Saving model checkpoint to {path}")
        torch.save(model.state_dict(), path)
    elif FAULT == "disk-full":
        save_checkpoint(model, os.environ.get("CKPT_PATH", "/dev/full"))


def parse_local_rank() -> None:
    """ARGPARSE=1: the script's own parser, written for torch 1.x's launcher, declares only
    ``--local_rank`` (torch.distributed.launch passes ``--local-rank=N`` since 2.0)."""
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--local_rank", type=int, default=0)
    parser.add_argument("--epochs", type=int, default=1)
    parser.parse_args()


def main(local_rank: int | None = None, world: int | None = None) -> None:
    if os.environ.get("ARGPARSE"):
        parse_local_rank()
    if FAULT == "import-missing" and _rank() == FAULT_RANK:  # a package one node lacks
        import wandb_logger_plugin  # noqa: F401  (no such module anywhere)
    if local_rank is not None:  # mp.spawn
        os.environ["RANK"] = str(local_rank)
        os.environ["WORLD_SIZE"] = str(world)
    if FAULT == "slow-before-init" and _rank() == FAULT_RANK:  # e.g. rank 0 fetching data
        log(_rank(), "downloading the dataset before joining the process group")
        time.sleep(float(os.environ.get("SLOW_S", PG_TIMEOUT_S + 6)))
    init = os.environ.get("INIT_FILE")  # file:// init method (rank, world from torchrun)
    if os.environ.get("INIT_TCP"):  # tcp://HOST:port, the host from the job's own config
        init = f"tcp://{os.environ['INIT_TCP']}:{os.environ['MASTER_PORT']}"
    elif init:
        init = f"file://{init}"
    backend = "nccl" if FAULT == "backend-nccl" else "gloo"  # a GPU job's script on CPU
    if FAULT != "no-init":  # FAULT=no-init: the script forgot init_process_group
        dist.init_process_group(backend, timeout=timedelta(seconds=PG_TIMEOUT_S),
                                **({"init_method": init, "rank": _rank(),
                                    "world_size": int(os.environ["WORLD_SIZE"])}
                                   if init else {}))
    rank, world = dist.get_rank(), dist.get_world_size()
    log(rank, f"initialised, world size {world}")
    if FAULT == "cuda-set-device":  # a GPU job's first CUDA call, on a CPU-only torch
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
    if FAULT == "crash-after-init":  # an earlier run killed: FileStore never removes its file
        os._exit(1)
    try:
        if FAULT.startswith("ddp-"):
            train_ddp(rank)
        else:
            train(rank, world)
    finally:
        if FAULT not in ("sigkill", "oom", "sigstop", "init-twice", "exit-1"):
            dist.destroy_process_group()
    if FAULT == "barrier-after-destroy":  # a cleanup helper that still synchronises
        log(rank, "waiting for every rank before exit")
        dist.barrier()


if __name__ == "__main__":
    if os.environ.get("RECORD"):  # torchelastic's error_file (error.json) for the agent
        from torch.distributed.elastic.multiprocessing.errors import record

        main = record(main)
    if os.environ.get("SPAWN"):
        import torch.multiprocessing as mp

        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        n = int(os.environ["SPAWN"])
        if FAULT == "spawn-args":  # args=(n) is n, not a tuple
            mp.spawn(main, args=n, nprocs=n)  # type: ignore[arg-type]
        else:  # FAULT=world-plus-one: a world size typed by hand, one more than started
            mp.spawn(main, args=(n + (FAULT == "world-plus-one"),), nprocs=n)
    else:
        main()
