"""Host memory and shared memory: the OOM killer, DataLoader worker deaths, /dev/shm.

Lines from the kernel and Slurm ("oom-kill event(s)", slurmstepd's cgroup message, srun's
"task N: Out Of Memory"), from a shell whose child the OOM killer took (a lone "Killed"),
and from torch/utils/data/_utils/signal_handling.py and dataloader.py ("DataLoader worker
(pid N) is killed by signal: Killed.", "exited unexpectedly", "unexpected bus error ...
insufficient shared memory (shm)"). A worker that dies without a signal name is, in the
threads the corpus holds, a container's 64 MB /dev/shm; one killed by SIGKILL is host RAM.
"""

from __future__ import annotations

from ddpcheck.diagnoses import DEV_SHM_TOO_SMALL
from ddpcheck.explain.codes import DEV_SHM_UNWRITABLE, HOST_OOM
from ddpcheck.explain.matching import pattern
from ddpcheck.launcher.fdlimit import OPEN_FILE_LIMIT

NODE = "ddpcheck run --stages node (host memory and /dev/shm of each node)"

PATTERNS = [
    pattern(HOST_OOM,
            r"oom-kill event|out-of-memory handler|task \d+: Out Of Memory|"
            r"Out of memory: Killed process|Memory cgroup out of memory|invoked oom-killer|"
            r"DefaultCPUAllocator: (?:can't allocate memory|not enough memory)|"
            r"\[Errno 12\] Cannot allocate memory|^\s*MemoryError\b|\bOOMKilled\b", NODE),
    # SIGKILL without the kernel's or Slurm's word for it: most often the OOM killer (a hint)
    pattern(HOST_OOM,
            r"DataLoader worker \(pid \d+\) is killed by signal: Killed|"
            r"exit(?:ed with)? code:? 137\b", NODE, grade="hint"),
    # torch's file_system / file_descriptor sharing: tensors cross as fds or /dev/shm files
    pattern(OPEN_FILE_LIMIT, r"Too many open files|received 0 items of ancdata", NODE,
            cause="DataLoader workers share tensors through file descriptors and ran past "
                  "the open-file limit (ulimit -n)",
            fix="raise ulimit -n (e.g. 65536), or torch.multiprocessing.set_sharing_strategy"
                "('file_system'); fewer DataLoader workers"),
    pattern(DEV_SHM_UNWRITABLE,
            r"shm_open.*Permission denied|/dev/shm\S*.*(?:Permission denied|Read-only file)",
            NODE),
    pattern(DEV_SHM_TOO_SMALL,
            r"(?i)unexpected bus error encountered in worker|insufficient shared memory|"
            r"unable to (?:write to|open shared memory object) .*torch_|"
            r"/dev/shm\S*:? No space left on device", NODE,
            cause="/dev/shm is too small for the DataLoader workers' shared tensors "
                  "(containers default to 64 MB)"),
]

# Matched last: a shell's report of a child killed by SIGKILL, a line of its own or the
# tail of a progress bar ("Loading checkpoint shards: 38%|...| 3/8 Killed").
SHELL_KILLED = [
    pattern(HOST_OOM, r"(?:^|[\s|\]])[Kk]illed\s*$|line \d+: +\d+ Killed +\S", NODE,
            cause="the shell reports its child Killed (SIGKILL) with no other error: the "
                  "kernel's OOM killer, most often while loading a model or dataset into RAM",
            grade="hint"),
]
