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
    # Slurm task/cgroup: <= 21.08 "Detected 1 oom-kill event(s) in StepId=...", >= 22.05
    # "Detected 1 oom_kill event in StepId=... Some of the step tasks have been OOM Killed.";
    # jobacct_gather's polling limit "StepId=7.batch exceeded memory limit (734003200 >
    # 52428800), being killed" / "Exceeded job memory limit"; srun "task 0: Out Of Memory".
    # Kernel mm/oom_kill.c: >= 5.0 "Out of memory: Killed process 1234 (python)", older
    # "Out of memory: Kill process 1234 (python) score 900 or sacrifice child",
    # "Killed process 1234 (python) total-vm:...", "oom_reaper: reaped process 1234".
    pattern(HOST_OOM,
            r"oom[-_]kill event|out-of-memory handler|tasks? [\d,-]+: Out Of Memory|"
            r"have been OOM Killed|exceeded memory limit \(\d+ > \d+\), being killed|"
            # (not "... at some point.": older Slurm's cgroup failcnt note, printed for jobs
            # that went on, page cache included)
            r"Exceeded (?:job|step) memory limit(?! at some point)|"
            r"Out of memory: Kill(?:ed)? process|Killed process \d+ \(\S+\) total-vm|"
            r"oom_reaper: reaped process|Memory cgroup out of memory|invoked oom-killer|"
            # mm/oom_kill.c dump_oom_summary (kernel >= 4.19): "oom-kill:constraint=
            # CONSTRAINT_MEMCG,nodemask=(null),...,task=python,pid=123,uid=1000"
            r"\boom-kill:constraint=|"
            # systemd-oomd (src/oom/oomd.c, Ubuntu >= 22.04 and Fedora by default) kills a
            # whole cgroup on memory pressure or swap use before the kernel would: "Killed
            # /user.slice/... due to memory pressure for /user.slice/... being 60.13% >
            # 50.00% for > 20s with reclaim activity", "Killed ... due to memory used (N) /
            # total (M) and swap used ...", "systemd-oomd killed 19 process(es) in this unit."
            r"Killed \S+ due to memory (?:pressure for|used \()|"
            r"systemd-oomd killed \d+ process|"
            r"DefaultCPUAllocator: (?:can't allocate memory|not enough memory)|"
            # (pybind11 turns a C++ std::bad_alloc into "MemoryError: std::bad_alloc": that
            # one is read below, not here)
            r"^\s*MemoryError\b(?!: std::bad_alloc)|"
            r"\bOOMKilled\b|"
            # numpy's MemoryError subclass: "Unable to allocate 7.45 GiB for an array"
            r"_ArrayMemoryError|Unable to allocate [\d.]+ [KMGTP]i?B for an array|"
            # Slurm's job state for a step the cgroup OOM-killed (src/common/
            # slurm_protocol_defs.c job_state_string JOB_OOM), as seff and sacct print it
            # ("State: OUT_OF_MEMORY (exit code 0)", sacct's column cuts it to OUT_OF_ME+)
            r"\bOUT_OF_ME(?:MORY\b|\+)|"
            # Ray's memory monitor (Ray >= 2.2, python/ray/exceptions.py OutOfMemoryError,
            # raylet node_manager.cc) kills a worker before the kernel does: 2.2-2.54 "Task
            # was killed due to the node running low on memory.", 2.55+ "N worker(s) were
            # killed due to the node running low on memory."; torch's CUDA OOM is another
            # class (device.py leaves ray.exceptions.OutOfMemoryError to this rule)
            r"killed due to the node running low on memory|"
            r"ray\.exceptions\.OutOfMemoryError|"
            # the details the raylet adds (node_manager.cc CreateOomKillMessageDetails), the
            # whole message where a reporter quotes only them: "Memory on the node (IP: ...)
            # where the task (...) was running was 445.48GB / 468.75GB (0.950365), which
            # exceeds the memory usage threshold of 0.95. Ray killed this worker (ID: ...)"
            r"exceeds the memory usage threshold of [\d.]+\. Ray killed this worker", NODE),
    # Python's OSError for ENOMEM ("[Errno 12] Cannot allocate memory"): fork() of a large
    # parent under the kernel's commit limit (DataLoader workers, subprocess), a cgroup limit,
    # and also mmap() past vm.max_map_count (65530 mappings by default: many memory-mapped
    # dataset files or shared tensors) or ulimit -v, with RAM to spare. A hint.
    # (torch's MapAllocator.cpp prints the same ENOMEM for its shared tensors: "unable to
    # mmap 4096 bytes from file </torch_1_2_3>: Cannot allocate memory (12)")
    pattern(HOST_OOM, r"\[Errno 12\] Cannot allocate memory|"
            r"unable to mmap \d+ bytes from file <[^>]*>: Cannot allocate memory", NODE,
            grade="hint",
            cause="a system call failed with ENOMEM: most often host RAM or the kernel's commit "
                  "limit ran out (fork of a large process for DataLoader workers, a cgroup "
                  "limit); also mmap past vm.max_map_count (many memory-mapped files) or "
                  "ulimit -v",
            fix="lower host RAM per rank (fewer DataLoader workers, mmap / low_cpu_mem_usage), "
                "raise the job's memory limit; if free shows RAM to spare, check sysctl "
                "vm.max_map_count (raise it, e.g. 262144) and ulimit -v"),
    # libstdc++'s allocation failure, as the terminate handler prints it ("terminate called
    # after throwing an instance of 'std::bad_alloc'") or pybind11 re-raises it
    # ("MemoryError: std::bad_alloc"). Who else prints it: operator new throws it for a size
    # no allocator can give, also with RAM to spare: a length field read from a peer that is
    # not what the reader expects (a store or gloo peer of another torch build, another
    # program on the port) asks for gigabytes at once. Threads show it at start-up, before
    # any memory was used (pytorch/pytorch#62029, #64990 with c10d rendezvous). A symptom:
    # shown, never named as host-out-of-memory on its own.
    # (group_by keeps it a problem of its own: a cause-grade OOM line elsewhere stays cause)
    pattern(HOST_OOM, r"(?:instance of '|MemoryError: )(?P<alloc>std::bad_alloc)", NODE,
            grade="symptom", group_by="alloc",
            cause="a C++ allocation failed (std::bad_alloc): host RAM ran out, or a size read "
                  "from a peer or a file was garbage (a torch version mismatch between nodes, "
                  "another program answering on the store's port)"),
    # SIGKILL without the kernel's or Slurm's word for it: most often the OOM killer (a hint)
    pattern(HOST_OOM,
            r"DataLoader worker \(pid \d+\) is killed by signal: Killed|"
            r"exit(?:ed with)? code:? 137\b|exit status:? 137\b|exitcode:? 137\b", NODE,
            grade="hint"),
    # ENFILE's strerror ("Too many open files in system", errno 23) is the kernel's
    # system-wide file table (fs.file-max), not the process's ulimit -n (EMFILE, 24)
    pattern(OPEN_FILE_LIMIT, r"Too many open files in system", NODE,
            cause="the node's system-wide file table is full (ENFILE: fs.file-max), not this "
                  "process's limit: all processes on the node together hold too many files",
            fix="compare sysctl fs.file-nr with fs.file-max on the node: raise fs.file-max, "
                "or stop the process holding the files (lsof -n shows them)"),
    # torch's file_system / file_descriptor sharing: tensors cross as fds or /dev/shm files
    pattern(OPEN_FILE_LIMIT, r"Too many open files|received 0 items of ancdata", NODE,
            cause="DataLoader workers share tensors through file descriptors and ran past "
                  "the open-file limit (ulimit -n)",
            fix="raise ulimit -n (e.g. 65536), or torch.multiprocessing.set_sharing_strategy"
                "('file_system'); fewer DataLoader workers"),
    pattern(DEV_SHM_UNWRITABLE,
            r"shm_open.*Permission denied|/dev/shm\S*.*(?:Permission denied|Read-only file)|"
            # MapAllocator.cpp's shm_open failing with EACCES (torch 2.13: errno after the name)
            r"unable to open shared memory object <[^>]*> in read-write mode:\s*"
            r"(?:Permission denied|Read-only file system)",
            NODE),
    pattern(DEV_SHM_TOO_SMALL,
            # torch/csrc/DataLoader.cpp: SIGBUS in a worker, "DataLoader worker (pid N) is
            # killed by signal: Bus error. It is possible that dataloader's workers are out of
            # shared memory. Please try to raise your shared memory limit."
            r"(?i)unexpected bus error encountered in worker|insufficient shared memory|"
            r"workers are out of shared memory|"
            # aten/src/ATen/MapAllocator.cpp, torch's shared-memory tensors (/torch_<pid>_..):
            # write(fd, "", 1) after ftruncate ("unable to write to file <NAME>", torch 2.x
            # adds ": <strerror> (<errno>)") and posix_fallocate (torch 2.x "unable to
            # allocate shared memory(shm) for file <NAME>:No space left on device (28)")
            # fail on a full tmpfs with ENOSPC; another errno after the name is another cause.
            r"unable to (?:write to file|allocate shared memory\(shm\) for file) <[^>]*torch_"
            r"[^>]*>(?:\s*$|:\s*No space left on device)|"
            # shm_open ("unable to open shared memory object <NAME> in read-write mode", torch
            # 2.13 libtorch_cpu adds ": <strerror> (<errno>)") fails with EMFILE (24, the
            # open-file limit: read above), EACCES (13: dev-shm-unwritable), ENOENT (2, the
            # segment already gone); ENOSPC only when tmpfs's inodes run out. The errno
            # decides; without one (older torch) the line names no cause and no rule reads it.
            r"unable to open shared memory object <[^>]*> in read-write mode:\s*"
            r"No space left on device|"
            r"/dev/shm\S*:? No space left on device|"
            # Python's OSError puts the path after the message
            r"No space left on device: '/dev/shm", NODE,
            cause="/dev/shm is too small for the DataLoader workers' shared tensors "
                  "(containers default to 64 MB)"),
]

# Matched last: a shell's report of a child killed by SIGKILL, a line of its own or the
# tail of a progress bar ("Loading checkpoint shards: 38%|...| 3/8 Killed").
SHELL_KILLED = [
    # bash reports a child ended by SIGBUS as "Bus error (core dumped)" (strsignal)
    pattern(DEV_SHM_TOO_SMALL, r"(?:^|[\s|\]:])Bus error(?: \(core dumped\))?\s*$|"
            r"line \d+: +\d+ Bus error", NODE,
            cause="the shell reports its child ended by SIGBUS: a shared-memory mapping could "
                  "not be backed, i.e. /dev/shm is full or too small (containers default to "
                  "64 MB)", grade="hint"),  # as workers.py's SIGBUS: other mappings fail alike
    # UCX's signal handler (ucs/debug/debug.c, used by NCCL's and MPI's UCX transports and
    # HPC-X): "[host:pid:0:tid] Caught signal 7 (Bus error: nonexistent physical address)",
    # strsignal with the si_code's text; BUS_ADRERR ("nonexistent physical address") is a
    # mapped page that cannot be backed: a tmpfs (/dev/shm) out of space, or a mapped file cut
    # short under its reader (stop-32b dev gh38-nvidia-resiliency-ext-6, a container's 64 MB
    # /dev/shm, fixed with --ipc=host). A hint, as the shell's report above.
    pattern(DEV_SHM_TOO_SMALL,
            r"Caught signal 7 \(Bus error(?:: nonexistent physical address)?\)", NODE,
            cause="a process died of SIGBUS on a mapped page that could not be backed "
                  "(nonexistent physical address): /dev/shm full or too small (containers "
                  "default to 64 MB) for the job's shared memory (DataLoader tensors, NCCL's "
                  "buffers); a mapped file truncated under its reader prints the same",
            grade="hint"),
    pattern(HOST_OOM, r"(?:^|[\s|\]])[Kk]illed\s*$|line \d+: +\d+ Killed +\S", NODE,
            cause="the shell reports its child Killed (SIGKILL) with no other error: the "
                  "kernel's OOM killer, most often while loading a model or dataset into RAM",
            grade="hint"),
]
