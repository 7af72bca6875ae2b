"""Real failed GPU jobs (NCCL, CUDA) for ``bench/explain_real_runs.py``: scenarios ``gpu-*``.

``bench/real_runs_gpu_train.py`` trains a small DDP model on ``cuda:LOCAL_RANK`` over NCCL,
under torchrun as a user launches it, with one of the GPU faults users report. They run only
where CUDA is (the ``device`` tool's H100 for the recordings in
``tests/data/explain/runs-gpu/``); ``unavailable`` says why not elsewhere. Each was scored
before any rule was written for it. On a one-GPU machine a second rank is itself the fault
(an index past the last GPU, two ranks on one GPU).
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from collections.abc import Callable
from typing import Any

TRAIN = "bench/real_runs_gpu_train.py"


def unavailable() -> str:
    """Why the GPU scenarios cannot run here, or ""."""
    if importlib.util.find_spec("torch") is None:
        return "torch is not installed"
    probe = subprocess.run([sys.executable, "-c", "import torch; print(torch.cuda.device_count())"],
                           capture_output=True, text=True, timeout=120)
    count = probe.stdout.strip()
    if count.isdigit() and int(count) > 0:
        return ""
    return "no CUDA GPU (torch.cuda.device_count() is 0)"


def scenarios(make: Callable[..., Any]) -> list[Any]:
    """The GPU scenarios, each built by ``make`` (``explain_real_runs.Scenario``)."""
    def gpu(name: str, expected: str, what: str, fault: str = "none", nproc: int = 1,
            launcher: str = "logdir", **extra: Any) -> Any:
        env = {"FAULT": fault, "RECORD": "1", **extra.pop("env", {})}
        return make(name=f"gpu-{name}", expected=expected, what=what, launcher=launcher,
                    env=env, nproc=nproc, world="gpu", train=TRAIN, fresh=True, **extra)

    return [
        gpu("healthy-nccl-info", "none", "no fault, NCCL_DEBUG=INFO (NCCL's own log lines)",
            env={"NCCL_DEBUG": "INFO"}),
        gpu("ordinal", "invalid-device-ordinal",
            "--nproc-per-node 2 on a node with one GPU: rank 1 sets cuda:1", nproc=2),
        gpu("ordinal-console", "invalid-device-ordinal",
            "the same, console only", nproc=2, launcher="console"),
        gpu("same-device", "duplicate-device",
            "every rank hard-codes cuda:0: two ranks on one GPU under NCCL", "same-device",
            nproc=2),
        gpu("cpu-tensor", "nccl-cpu-tensor",
            "rank 0 all_reduces a CPU tensor under NCCL", "cpu-tensor"),
        gpu("cuda-oom", "cuda-out-of-memory",
            "rank 0 allocates more than the GPU's free memory", "cuda-oom"),
        gpu("cuda-oom-console", "cuda-out-of-memory",
            "the same, console only", "cuda-oom", launcher="console"),
        gpu("device-assert", "unexplained",
            "a token id past the embedding table: a device-side assert (CUDA_LAUNCH_BLOCKING=1)",
            "device-assert", mention="device-side assert triggered",
            env={"CUDA_LAUNCH_BLOCKING": "1"}),
        gpu("ddp-cpu-module", "ddp-module-device-invalid",
            "DDP(device_ids=[0]) given a module still on the CPU", "ddp-cpu-module"),
        gpu("visible-devices-absent", "cuda-visible-devices-invalid",
            "CUDA_VISIBLE_DEVICES=1 on a node with one GPU (index 1 does not exist)",
            env={"CUDA_VISIBLE_DEVICES": "1"}),
        gpu("nccl-ifname-missing", "socket-ifname-invalid",
            "NCCL_SOCKET_IFNAME=eth9, an interface this node does not have",
            env={"NCCL_SOCKET_IFNAME": "eth9"}),
    ]
