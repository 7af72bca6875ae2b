"""Messages of the libraries that wrap torch.distributed (Accelerate, Lightning) for causes
the catalogue already names.

Runs inside ``ddpcheck explain`` (a pure reader of log lines). Sources:
- Accelerate, ``accelerate/commands/launch.py`` / ``accelerate/utils/launch.py``
  (``prepare_multi_gpu_env``): before starting torchrun it probes the main process port and
  raises ``ConnectionError: Tried to launch distributed communication on port `29500`, but
  another process is utilizing it.``
- Lightning, ``lightning_fabric/plugins/environments/slurm.py``
  ``_validate_srun_variables``: ``SLURM_NTASKS > 1`` without ``SLURM_NTASKS_PER_NODE`` raises
  ``RuntimeError: You set `--ntasks=N` in your SLURM bash script, but this variable is not
  supported. HINT: Use `--ntasks-per-node=N` instead.``
- Lightning's device parser (``pytorch_lightning/utilities/device_parser.py`` 1.x,
  ``lightning_fabric/utilities/device_parser.py`` ``_sanitize_gpu_ids`` 1.8-2.x) checks the
  GPUs ``Trainer(devices=...)`` asks for against those torch sees before any rank starts:
  ``MisconfigurationException: You requested gpu: [0, 1, 2, 3]`` then, on a line of its own,
  `` But your machine only has: [0, 1]`` (1.x: ``You requested GPUs: [0]``). Its accelerator
  connector (1.7-2.x) raises ``CUDAAccelerator can not run on your system since the
  accelerator is not available`` (1.6: ``GPUAccelerator``) when torch sees no GPU at all.
- Lightning (``lightning_fabric/utilities/distributed.py`` ``_init_dist_connection``, its DDP
  and FSDP strategies) and NeMo's Megatron strategy check ``torch.distributed.is_available()``
  first: ``RuntimeError: torch.distributed is not available. Cannot initialize distributed
  process group``, where torch itself would fail on a missing ``init_process_group``.
- DeepSpeed's launcher (``deepspeed/launcher/runner.py`` ``main``), before it starts a
  worker: with a hostfile it ssh-es to the first host (``RuntimeError: Using hostfile at
  /job/hostfile but host=worker-1 was not reachable via ssh. If you are running with a single
  node please remove /job/hostfile or setup passwordless ssh.``); without one it counts the
  local GPUs (``RuntimeError: Unable to proceed, no GPU resources available``).
"""

from __future__ import annotations

from ddpcheck.diagnoses import BACKEND_UNAVAILABLE, LAUNCH_FAILED
from ddpcheck.explain.codes import INVALID_DEVICE_ORDINAL
from ddpcheck.explain.matching import pattern
from ddpcheck.launcher.spawn.mastercheck import MASTER_PORT_IN_USE
from ddpcheck.node.gpustate import CUDA_UNUSABLE
from ddpcheck.scheduler.detect import ENV_INVALID

PLACEMENT = "ddpcheck run --stages node,placement --nproc-per-node N"

PATTERNS = [
    pattern(MASTER_PORT_IN_USE,
            r"Tried to launch distributed communication on port `?(?P<port>\d+)`?, but "
            r"another process is utilizing it",
            "ddpcheck run --nodes N --stages rendezvous (the preflight binds the port first)",
            cause="accelerate launch found port {port} already taken on this node (another "
                  "job, or a previous run that has not exited, listens on it)",
            fix="pass a free port: accelerate launch --main_process_port 29501 (or "
                "main_process_port in the Accelerate config; 0 picks a free one on a single "
                "node), or stop the process holding {port} (ss -ltnp | grep {port})"),
    pattern(ENV_INVALID,
            r"You set `--ntasks=(?P<n>\d+)` in your SLURM bash script, but this variable is "
            r"not supported",
            "ddpcheck run --nodes N (reads the job's Slurm variables and says which disagree)",
            cause="Lightning found SLURM_NTASKS={n} without SLURM_NTASKS_PER_NODE: the batch "
                  "script asked for --ntasks instead of --ntasks-per-node, or the shell holds "
                  "a Slurm allocation's variables outside a job step (ssh into an allocated "
                  "node, salloc without srun)",
            fix="request #SBATCH --ntasks-per-node=<GPUs per node> (not --ntasks) and start "
                "the job with srun; outside a job step unset SLURM_NTASKS (or run through "
                "srun)"),
    # Lightning's "You requested gpu: [0, 1, 2, 3]\n But your machine only has: [0, 1]":
    # the device indices asked for (Trainer(devices=N) or a list) are more than torch sees
    # on this node (fewer GPUs, CUDA_VISIBLE_DEVICES, or Slurm binding each task to its own
    # GPU). Who else prints it: only this check; an empty list is read below (no GPU at all).
    # Its first line is read (no failure of its own: the second line decides).
    pattern(INVALID_DEVICE_ORDINAL, r"(?P<asked>You requested) (?:gpu|GPUs): \[[\d, ]*\]\s*$",
            PLACEMENT, combine=lambda hits: None, group_by="asked"),
    pattern(INVALID_DEVICE_ORDINAL, r"But your machine only has: \[(?P<seen>\d[\d, ]*)\]",
            PLACEMENT,
            cause="Lightning was asked for more GPUs (or higher indices) than torch sees on this "
                  "node, which has [{seen}]: Trainer(devices=N) above the node's GPU count, "
                  "CUDA_VISIBLE_DEVICES hiding some, or srun binding each task to its own GPU",
            fix="set Trainer(devices=...) to the GPUs of one node (and num_nodes to the node "
                "count), or expose the GPUs: unset CUDA_VISIBLE_DEVICES, or under Slurm "
                "--ntasks-per-node=<GPUs> with --gpus-per-node instead of --gpus-per-task"),
    # The same check with no GPU seen ("But your machine only has: []"), and the accelerator
    # connector's "`CUDAAccelerator` can not run on your system since the accelerator is not
    # available": torch.cuda.is_available() is False. Who else: a CPU-only torch build, a
    # driver older than torch's CUDA, CUDA_VISIBLE_DEVICES="" and a node without GPUs all
    # print it, so a hint.
    pattern(CUDA_UNUSABLE, r"But your machine only has: \[\]|"
            r"`?(?:CUDA|GPU)Accelerator`? can not run on your system since the accelerator "
            r"is not available",
            "ddpcheck run --stages node (torch's CUDA on each node)", grade="hint",
            cause="torch sees no GPU on this node: a CPU-only torch build, a driver older than "
                  "torch's CUDA, CUDA_VISIBLE_DEVICES set empty, or a node without GPUs",
            fix="python -c 'import torch; print(torch.version.cuda, "
                "torch.cuda.is_available())' on the node: install a CUDA build of torch for "
                "its driver, or run on a GPU node with CUDA_VISIBLE_DEVICES unset"),
    # Who else prints it: only that check, i.e. a torch built without the distributed
    # package (USE_DISTRIBUTED=0: some macOS, Windows < 1.7 and embedded/ARM builds).
    pattern(BACKEND_UNAVAILABLE,
            r"torch\.distributed is not available\. Cannot initialize distributed process "
            r"group", "ddpcheck run --backend gloo (works on every torch build with "
            "torch.distributed)",
            cause="this torch build has no torch.distributed at all "
                  "(torch.distributed.is_available() is False: built with USE_DISTRIBUTED=0, "
                  "as some macOS, old Windows and embedded/ARM wheels are), so Lightning cannot "
                  "start any process group",
            fix="install an official torch wheel for the platform (pip install torch; python -c "
                "'import torch.distributed as d; print(d.is_available())' must print True), or "
                "train on one device without a distributed strategy"),
    # Who else prints it: only that check; its ssh runs with BatchMode and stderr dropped, so
    # the line does not say why (no key, host down, name unknown, port 22 closed).
    pattern(LAUNCH_FAILED,
            r"Using hostfile at (?P<hostfile>\S+) but host=(?P<host>\S+) was not reachable "
            r"via ssh",
            "ssh -o BatchMode=yes <host> hostname (from the node that runs deepspeed)",
            cause="the deepspeed launcher starts the other nodes' workers over ssh (pdsh), and "
                  "a non-interactive ssh to {host}, the first host of {hostfile}, failed: no "
                  "passwordless key, the host down or its name unknown here, or port 22 "
                  "closed; no worker was started",
            fix="make 'ssh -o BatchMode=yes {host} hostname' work from this node (ssh keys, "
                "the name in /etc/hosts); on one node remove the hostfile; or start each "
                "node yourself (deepspeed --no_ssh --node_rank=N, or torchrun)"),
    # torch.cuda.device_count() == 0 (or the accelerator's): the same causes as Lightning's
    # empty list, so a hint
    pattern(CUDA_UNUSABLE, r"Unable to proceed, no GPU resources available",
            "ddpcheck run --stages node (torch's CUDA on each node)", grade="hint",
            cause="the deepspeed launcher counted no GPU on this node (torch.cuda.device_count() "
                  "is 0): a CPU-only torch build, a driver older than torch's CUDA, "
                  "CUDA_VISIBLE_DEVICES set empty, or a node without GPUs",
            fix="python -c 'import torch; print(torch.version.cuda, "
                "torch.cuda.is_available())' on the node: install a CUDA build of torch for "
                "its driver, or run on a GPU node with CUDA_VISIBLE_DEVICES unset"),
]
