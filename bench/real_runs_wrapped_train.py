"""The tiny training job of ``bench/real_runs_train.py`` written the way wrapper users write it.

Run by ``bench/real_runs_wrappers.py`` under a launch wrapper: ``WRAPPER=accelerate`` (an
``Accelerator`` on CPU/gloo, launched by ``accelerate launch --multi_gpu``, which on a machine
without CUDA runs torch elastic with ``DistributedType.MULTI_CPU``) or ``WRAPPER=lightning``
(a ``LightningModule`` fitted by ``Trainer(strategy="ddp", accelerator="cpu", devices=2)``,
whose default launcher re-runs this script once per extra rank) or ``WRAPPER=deepspeed``
(``deepspeed.init_distributed`` and ``deepspeed.initialize``, under the ``deepspeed``
launcher). ``FAULT`` and ``FAULT_RANK`` mean what they mean in ``real_runs_train.py``, whose
``inject`` makes the fault (so a user exception's frame is that file's), and the process-group
timeout is ``PG_TIMEOUT_S``.
"""

from __future__ import annotations

import os
import sys
from datetime import timedelta

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from real_runs_train import (  # noqa: E402  (this directory, when run as a script)
    FAULT,
    FAULT_RANK,
    FAULT_STEP,
    PG_TIMEOUT_S,
    STEPS,
    evaluate,
    inject,
    log,
)

#: Lightning's timeout is also init_process_group's store wait, and its launcher starts rank 1
#: only after rank 0 imported Lightning: on two busy cores rank 1 joined 13 s late, so the
#: world forms under this longer timeout and the collectives then get PG_TIMEOUT_S
INIT_TIMEOUT_S = float(os.environ.get("INIT_TIMEOUT_S", "30"))
RANK0_BUSY = bool(os.environ.get("RANK0_BUSY"))


def sync_metric(loss: torch.Tensor, rank: int, step: int) -> torch.Tensor:
    """All-reduce the loss for logging; the mismatch faults change rank FAULT_RANK's call."""
    metric = loss.detach().reshape(1).clone()
    if step == FAULT_STEP and FAULT == "mismatch-op" and rank == FAULT_RANK:
        dist.broadcast(metric, 0)
        return metric
    if step == FAULT_STEP and FAULT == "mismatch-size" and rank == FAULT_RANK:
        metric = torch.cat([metric, metric])
    dist.all_reduce(metric)
    return metric


def accelerate_main() -> None:
    from accelerate import Accelerator, InitProcessGroupKwargs

    acc = Accelerator(cpu=True, kwargs_handlers=[
        InitProcessGroupKwargs(backend="gloo", timeout=timedelta(seconds=PG_TIMEOUT_S))])
    rank = acc.process_index
    log(rank, f"initialised, world size {acc.num_processes}")
    torch.manual_seed(0)
    model = torch.nn.Linear(64, 64)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    model, opt = acc.prepare(model, opt)
    for step in range(STEPS):
        loss = model(torch.randn(32, 64)).pow(2).mean()
        opt.zero_grad()
        acc.backward(loss)
        if step == FAULT_STEP and rank == FAULT_RANK:
            inject(rank, acc.unwrap_model(model))
        if step == FAULT_STEP and FAULT == "eval" and acc.is_main_process:
            evaluate(model, rank)
        metric = sync_metric(loss, rank, step)
        opt.step()
        acc.print(f"step {step} loss {metric.item():.4f}")
    acc.wait_for_everyone()
    log(rank, "done")
    acc.end_training()


def deepspeed_main() -> None:
    import deepspeed

    deepspeed.init_distributed(dist_backend="gloo", timeout=timedelta(seconds=PG_TIMEOUT_S))
    rank = dist.get_rank()
    log(rank, f"initialised, world size {dist.get_world_size()}")
    torch.manual_seed(0)
    model = torch.nn.Linear(64, 64)
    engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(),
                                           config={"train_micro_batch_size_per_gpu": 4,
                                                   "optimizer": {"type": "SGD",
                                                                 "params": {"lr": 0.01}}})
    for step in range(STEPS):
        loss = engine(torch.randn(4, 64)).pow(2).mean()
        engine.backward(loss)
        if step == FAULT_STEP and rank == FAULT_RANK:
            inject(rank, engine.module)
        if step == FAULT_STEP and FAULT == "eval" and rank == 0:
            evaluate(engine, rank)
        metric = sync_metric(loss, rank, step)
        engine.step()
        log(rank, f"step {step} loss {metric.item():.4f}")
    dist.barrier()
    log(rank, "done")


def lightning_main() -> None:
    import lightning as L
    from lightning.pytorch.strategies import DDPStrategy

    class Tiny(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(64, 64)

        def training_step(self, batch: torch.Tensor, step: int) -> torch.Tensor:
            loss = self.layer(batch).pow(2).mean()
            rank = self.global_rank
            if step == FAULT_STEP and rank == FAULT_RANK:
                inject(rank, self)
            if step == FAULT_STEP and (FAULT == "eval" or RANK0_BUSY) and \
                    self.trainer.is_global_zero:
                evaluate(self, rank)  # RANK0_BUSY: while rank FAULT_RANK has its fault
            self.log("loss", sync_metric(loss, rank, step).item() / 2)
            return loss

        def setup(self, stage: str) -> None:
            # the bench's short collective timeout, once the world formed (see INIT_TIMEOUT_S)
            dist.distributed_c10d._set_pg_timeout(timedelta(seconds=PG_TIMEOUT_S))

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.SGD(self.parameters(), lr=0.01)

    torch.manual_seed(0)
    data = torch.utils.data.DataLoader(torch.randn(STEPS * 8, 64), batch_size=4)
    trainer = L.Trainer(
        strategy=DDPStrategy(process_group_backend="gloo",
                             timeout=timedelta(seconds=INIT_TIMEOUT_S)),
        accelerator="cpu", devices=2, max_steps=STEPS, logger=False,
        enable_checkpointing=False, enable_model_summary=False,
        default_root_dir=os.environ.get("WORK_DIR", "."))
    trainer.fit(Tiny(), data)
    log(trainer.global_rank, "done")


if __name__ == "__main__":
    if os.environ.get("WRAPPER") == "lightning":
        lightning_main()
    elif os.environ.get("WRAPPER") == "deepspeed":
        deepspeed_main()
    else:
        accelerate_main()
