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
"""

from __future__ import annotations

from ddpcheck.explain.matching import pattern
from ddpcheck.launcher.spawn.mastercheck import MASTER_PORT_IN_USE
from ddpcheck.scheduler.detect import ENV_INVALID

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
]
