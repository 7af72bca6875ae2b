"""Real failed jobs launched through the wrappers users have, for ``bench/explain_real_runs.py``.

The same injected faults as the torchrun scenarios (``bench/real_runs_train.py``'s ``inject``),
in ``bench/real_runs_wrapped_train.py`` written as a wrapper's user writes it, launched by:

- ``accelerate``: ``accelerate launch --multi_gpu --num_processes 2`` (HF accelerate). On a
  machine without CUDA it still runs torch elastic (``torch.distributed.run``) and each rank's
  ``Accelerator(cpu=True)`` forms a gloo world (``DistributedType.MULTI_CPU``); ``--cpu``
  would run a single process without mpirun. The console only, unless the scenario adds
  accelerate's own ``--log_dir DIR --tee 3``.
- ``deepspeed``: DeepSpeed's own launcher, ``deepspeed --num_gpus 2 --master_port P`` with
  ``DS_ACCELERATOR=cpu`` (deepspeed 0.19.8: its ``launcher/runner.py`` then ``launcher/launch.py``
  start the ranks with ``--local_rank=N``; each calls ``deepspeed.init_distributed("gloo")``
  and ``deepspeed.initialize``). Its first run on a machine JIT-builds its CPU shm comm op
  (about 100 s here, cached in ~/.cache/torch_extensions): run one scenario first.
- ``lightning``: ``python script.py`` with ``Trainer(strategy=DDPStrategy(...),
  accelerator="cpu", devices=2)``: Lightning's default ``_SubprocessScriptLauncher`` re-runs
  the script for rank 1 with ``LOCAL_RANK``, ``MASTER_ADDR``/``MASTER_PORT`` in its
  environment; both ranks write to the one console.

What a wrapper cannot express is left out, with its reason (``SKIPPED``). ``unavailable``
says why a wrapper's scenarios cannot run here (the package is not installed: the suite's
venv has neither; ``tests/unit/explain/test_real_runs.py`` reads the recordings instead).
Runs on the bench's host, under ``explain_real_runs``'s deadline and process-group kill.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

TRAIN = "bench/real_runs_wrapped_train.py"
LAUNCHERS = ("accelerate", "lightning", "deepspeed")
#: the process-group timeout of each wrapper's collectives (Lightning's store wait, which
#: starts before its launcher has started rank 1, is INIT_TIMEOUT_S: 30 s, or 8 s where the
#: store itself is the fault)
PG_TIMEOUT = {"accelerate": "6", "lightning": "5", "deepspeed": "6"}
KEYERROR = "KeyError: 'labels'"

#: faults a wrapper cannot carry, and why
SKIPPED = {
    "accelerate-master-port-in-use-one-machine":
        "accelerate launch (1.15, utils/launch.py prepare_multi_gpu_env) on one machine finds "
        "the port in use, warns and relaunches in standalone mode on a free port: the job runs",
    "deepspeed-master-addr-unresolvable":
        "deepspeed's runner (0.19.8, launcher/runner.py:473) without a hostfile sets "
        "--master_addr to 127.0.0.1 whatever was given (recorded once: the job ran); with one "
        "it starts the nodes over ssh (pdsh), which this bench does not run",
    "lightning-rendezvous-one-node":
        "Lightning's subprocess launcher starts every rank of the node itself; a missing node "
        "is a torchrun/Slurm fault, not this launcher's",
}


def unavailable(launcher: str) -> str:
    """Why scenarios of ``launcher`` cannot run here, or "" (also for non-wrapper launchers)."""
    if launcher not in LAUNCHERS:
        return ""
    if importlib.util.find_spec(launcher) is None:
        return f"{launcher} is not installed in this venv (pip install {launcher})"
    return ""


def accelerate_args(*extra: str) -> Callable[[int], list[str]]:
    return lambda port: ["--main_process_port", str(port), *extra]


def deepspeed_args(*extra: str) -> Callable[[int], list[str]]:
    return lambda port: ["--master_port", str(port), *extra]


ARGS = {"accelerate": accelerate_args(), "deepspeed": deepspeed_args(), "lightning": None}


def scenarios(make: Callable[..., Any]) -> list[Any]:
    """The wrapper scenarios, each built by ``make`` (``explain_real_runs.Scenario``)."""
    out = []
    faults = [  # (suffix, expected code, fault words, FAULT, FAULT_RANK, mention)
        ("user-exception", "unexplained", "rank 1 raises KeyError('labels') at step 3",
         "exception", "1", KEYERROR),
        ("sigkill", "host-out-of-memory", "rank 1 SIGKILLed mid-training", "sigkill", "1", ""),
        ("rank-exits-early", "rank-never-joined", "rank 1 exits (status 0) before the next "
         "collective", "exit", "1", ""),
        ("mismatch-op", "collective-desync", "rank 1 broadcasts its loss where rank 0 "
         "all_reduces it", "mismatch-op", "1", ""),
        ("mismatch-size", "collective-size-mismatch", "rank 1 all_reduces a loss twice the "
         "size of rank 0's", "mismatch-size", "1", ""),
        ("rank0-eval-timeout", "rank-zero-only-step-timeout", "rank 0 alone evaluates past "
         "the process-group timeout", "eval", "9", ""),
        ("disk-full", "disk-full", "rank 1 saves a checkpoint to /dev/full", "disk-full", "1",
         ""),
    ]
    for wrapper in LAUNCHERS:
        for suffix, code, what, fault, rank, mention in faults:
            out.append(make(name=f"{wrapper}-{suffix}", expected=code,
                            what=f"{wrapper}: {what}", launcher=wrapper, mention=mention,
                            env={"WRAPPER": wrapper, "FAULT": fault, "FAULT_RANK": rank,
                                 "PG_TIMEOUT_S": PG_TIMEOUT[wrapper]},
                            torchrun_args=ARGS[wrapper]))
    base = {"WRAPPER": "accelerate", "FAULT": "none", "PG_TIMEOUT_S": PG_TIMEOUT["accelerate"]}
    out += [
        make(name="accelerate-user-exception-logdir", expected="unexplained",
             what="accelerate: rank 1's KeyError, with accelerate's --log_dir DIR --tee 3",
             launcher="accelerate", mention=KEYERROR,
             env={**base, "FAULT": "exception"},
             torchrun_args=lambda port: ["--main_process_port", str(port), "--tee", "3",
                                         "--log_dir", "LOGS"]),
        make(name="accelerate-master-port-in-use", expected="master-port-in-use",
             what="accelerate: machine 0 of 2, its --main_process_port held by another process",
             launcher="accelerate", env=base, hold_port=True,
             torchrun_args=accelerate_args("--num_machines", "2", "--machine_rank", "0",
                                           "--main_process_ip", "127.0.0.1")),
        make(name="accelerate-master-addr-unresolvable", expected="master-addr-unresolvable",
             what="accelerate: machine 1 of 2, --main_process_ip a name that does not resolve",
             launcher="accelerate", env=base,
             torchrun_args=accelerate_args("--num_machines", "2", "--machine_rank", "1",
                                           "--main_process_ip", "no-such-host.invalid",
                                           "--same_network", "--rdzv_conf", "timeout=8")),
        make(name="lightning-sigkill-rank0-busy", expected="host-out-of-memory",
             what="Lightning: rank 1 SIGKILLed while rank 0 evaluates (no collective fails: "
                  "Lightning's child-process observer reports the exit code)",
             launcher="lightning",
             env={"WRAPPER": "lightning", "FAULT": "sigkill", "FAULT_RANK": "1",
                  "PG_TIMEOUT_S": "5", "RANK0_BUSY": "1"}),
        make(name="deepspeed-master-port-in-use", expected="master-port-in-use",
             what="deepspeed: --master_port held by another process", launcher="deepspeed",
             hold_port=True, env={"WRAPPER": "deepspeed", "FAULT": "none", "PG_TIMEOUT_S": "6"},
             torchrun_args=deepspeed_args()),
        make(name="lightning-master-port-in-use", expected="master-port-in-use",
             what="Lightning: MASTER_PORT set to a port another process holds",
             launcher="lightning", hold_port=True,
             env={"WRAPPER": "lightning", "FAULT": "none", "PG_TIMEOUT_S": "5",
                  "INIT_TIMEOUT_S": "8", "SET_MASTER_PORT": "1"}),
        make(name="lightning-master-addr-unresolvable", expected="master-addr-unresolvable",
             what="Lightning: MASTER_ADDR a name that does not resolve",
             launcher="lightning",
             env={"WRAPPER": "lightning", "FAULT": "none", "PG_TIMEOUT_S": "5",
                  "INIT_TIMEOUT_S": "8", "SET_MASTER_PORT": "1",
                  "MASTER_ADDR": "no-such-host.invalid"}),
    ]
    return out


def command(s: Any, out: Path, port: int) -> list[str]:
    """The user's launch command of a wrapper scenario."""
    py = sys.executable
    if s.launcher == "lightning":
        return [py, TRAIN]
    args = [a if a != "LOGS" else str(out / "logs") for a in s.torchrun_args(port)]
    if s.launcher == "deepspeed":
        return [str(Path(py).parent / "deepspeed"), "--num_gpus", "2", *args, TRAIN]
    return [str(Path(py).parent / "accelerate"), "launch", "--multi_gpu", "--num_processes",
            "2", *args, TRAIN]


def environ(s: Any, port: int) -> dict[str, str]:
    """What the user exported: Lightning's MASTER_PORT when the scenario sets it."""
    if s.launcher == "lightning" and s.env.get("SET_MASTER_PORT"):
        return {"MASTER_PORT": str(port)}
    if s.launcher == "deepspeed":  # no CUDA here: DeepSpeed's CPU accelerator
        return {"DS_ACCELERATOR": "cpu"}
    return {}
