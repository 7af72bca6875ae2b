"""The words a log's producers print when something failed: the vocabulary ``failures`` reads.

Runs wherever ``ddpcheck explain`` runs; it holds regexes and where their words come from,
and reads nothing itself (``failures`` applies them). A failure word that is missing here lets
a failed job read "NO FAILURE FOUND"; one that is too wide makes a healthy log abstain.
Wrappers re-print the producers' strings in their own capitalisation ("CUDA Invalid device
ordinal"), so the words match in any case; the marks that are only marks in one case (glog's
severity letter, signal names, c10d's "Socket Timeout", which prose about a socket timeout is
not) do not.

Sources of the words, by producer:
- CUDA runtime, ``cudaGetErrorString`` (CUDA Runtime API, "Data types: enum cudaError"):
  "invalid device ordinal", "out of memory", "an illegal memory access was encountered",
  "device-side assert triggered", "unspecified launch failure", "misaligned address", "an
  illegal instruction was encountered", "the launch timed out and was terminated", "too many
  resources requested for launch", "no kernel image is available for execution on the
  device", "invalid device function", "no CUDA-capable device is detected", "CUDA-capable
  device(s) is/are busy or unavailable", "CUDA driver version is insufficient for CUDA
  runtime version", "peer access is not supported between these two devices", "system not
  yet initialized", "unknown error", "operation not supported", and the suffix c10 adds to
  every CUDA error (c10/cuda/CUDAMiscFunctions.cpp: "CUDA kernel errors might be
  asynchronously reported ...", "For debugging consider passing CUDA_LAUNCH_BLOCKING=1");
  the libraries' status names (cuBLAS ``cublasStatus_t``, cuDNN ``cudnnStatus_t``: any
  ``CUBLAS_STATUS_*`` / ``CUDNN_STATUS_*`` but ``SUCCESS``); the driver's "A GPU crash dump
  has been created" (NVRM); the enum names tools print without the string (``cudaError*``,
  ``hipError*`` from cudaGetErrorName / hipGetErrorName, the driver's ``CUDA_ERROR_*`` from
  cuGetErrorName as triton, numba, cupy and JAX print it; ``NotReady`` is a query's answer);
- Python: an exception's type name (``*Error``, ``*Exception``), ``Traceback (most recent
  call last):`` and its frames, ``File "...", line N, in f`` (Lib/traceback.py), shown even
  when the header was trimmed away; faulthandler's ``Fatal Python error`` and ``(most recent
  call first):`` (Modules/faulthandler.c); py-spy's ``Thread N (active|idle): "..."`` dump;
- C++ runtime (libstdc++ verbose terminate handler): "terminate called after throwing an
  instance of", "what():"; glibc's heap checks (malloc/malloc.c ``malloc_printerr``: "double
  free or corruption (out)", "free(): invalid pointer", "munmap_chunk(): invalid pointer",
  "malloc(): unaligned tcache chunk detected", "corrupted size vs. prev_size") and stack
  protector ("*** stack smashing detected ***: terminated", debug/fortify_fail.c);
- errno strings (glibc strerror, gai_strerror), as torch's socket.cpp, gloo and NCCL quote
  them: "Connection refused", "Connection reset by peer", "Connection timed out", "Broken
  pipe", "No route to host", "Network is unreachable", "Address already in use", "Cannot
  assign requested address", "Name or service not known", "No address associated with
  hostname", "Temporary failure in name resolution", "No space left on device", "Too many
  open files", "Cannot allocate memory", "Permission denied", "No such file or directory",
  "Read-only file system", "Device or resource busy";
- torch: c10d socket.cpp "Socket Timeout", "timed out after"; ProcessGroupNCCL's watchdog
  "... milliseconds before timing out" and its glog ``[E``/``E0325 ...`` severity (c10's
  logging: E error, F fatal); torchelastic's summary "exitcode : -9", "Signal 9 (SIGKILL)
  received by PID", "Root Cause (first observed failure)", "Received 15 death signal",
  "Sending process N closing signal SIGTERM" (multiprocessing/api.py sends it only to
  workers still alive when it shuts down after a failure or a signal); "Watchdog caught
  collective operation timeout" (ProcessGroupNCCL.cpp); "Detected mismatch between
  collectives on ranks" (ProcessGroupWrapper.cpp); launchers' "return code = 1"
  (DeepSpeed's launcher), "non-zero exit" and "exited with code 137" (docker compose); the
  agent's other failed state ("[default] Worker group UNHEALTHY. 3/3 attempts left",
  agent/server/api.py); "DataLoader worker (pid(s) N) exited unexpectedly"
  (utils/data/dataloader.py, also "Pin memory thread exited unexpectedly"); torchrun's
  launch-config line ``signals_to_handle : SIGTERM,...`` is no failure (``LAUNCH_CONFIG``);
  messages whose exception name a wrapper may drop: "No CUDA GPUs are available"
  (torch/cuda/__init__.py), "Default process group has not been initialized"
  (distributed_c10d.py), "Parameter indices which did not receive grad" (reducer.cpp),
  Accelerate's "another process is utilizing it" (its port check), NCCL's "Duplicate GPU
  detected" (init.cc);
- NCCL: "NCCL WARN", ``nccl*Error``, the result strings without the word "error" ("invalid
  usage", "remote process exited or there was a network error": ncclGetErrorString). Its
  "INFO file.cc:N -> R" trace is no failure line of its own: a job that ends well prints it
  too, when ncclCommAbort closes the proxy's sockets;
- gloo: "[enforce fail at ...]" (gloo/common/logging.h GLOO_ENFORCE), "Application timeout
  caused pair closure" (transport/tcp/pair.cc);
- Slurm: "srun: error", "slurmstepd: error: *** JOB N ON host CANCELLED AT ... DUE TO TIME
  LIMIT ***" (also NODE FAILURE, PREEMPTION), "Job step aborted", "forcing job termination";
  the end states of a job that did not finish (``job_state_string``, slurm_protocol_defs.c:
  FAILED, CANCELLED, TIMEOUT, NODE_FAIL, PREEMPTED, BOOT_FAIL, DEADLINE, OUT_OF_MEMORY) as seff
  ("State: TIMEOUT (exit code 0)"), scontrol ("JobState=NODE_FAIL") and sacct (the state, then
  the ExitCode "0:0"; "OUT_OF_ME+", "CANCELLED by 1001") print them, upper case only;
- MPI launchers: Open MPI ("mpirun detected that one or more processes exited with non-zero
  status", help-orterun.txt; "MPI_ABORT was invoked on rank N", help-mpi-api.txt), MPICH and
  Intel MPI's Hydra ("BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES"; its "KILLED BY
  SIGNAL: 9 (Killed)" and "EXIT CODE: 9" were read already);
- Ray: "The actor died unexpectedly before finishing this task", "The worker died
  unexpectedly while executing this task" (its ``RayTaskError``, ``ActorDiedError`` are
  exception names);
- the kernel: "Out of memory: Killed process", "oom-kill", "invoked oom-killer", "segfault
  at", "general protection fault", "NVRM: Xid", "fallen off the bus", the hung-task
  detector's "blocked for more than N seconds", "Kernel panic" (kernel/panic.c), "BUG: soft
  lockup - CPU#3 stuck for 22s!" (kernel/watchdog.c), "Watchdog detected hard LOCKUP on cpu 3"
  (kernel/watchdog_perf.c); shells: "Killed", "Segmentation fault", "Bus error", "Illegal
  instruction", "Aborted", "core dumped", and bash's "Terminated" (jobs.c, a foreground
  child ended by SIGTERM: the whole line, or "line 5:  1234 Terminated  cmd"; checked with
  bash 5.2, which prints nothing for a background job killed so).

Lines that carry such a word but report no failure (warnings, ``NCCL INFO``) are the
engine's ``NOT_AN_ERROR``; ``BENIGN`` lists the NCCL ``WARN`` lines that report a fallback.
"""

from __future__ import annotations

import re

# Searched in the lowercased line (``is_failure``): any capitalisation, and no leading \b, so
# that the regex engine skips a line by its first letters (a long log reads fast).
WORDS = re.compile((
    r"Error\b|Exception|Traceback|FAILED|failed\b|failure\b|NCCL WARN|fatal|Killed|"
    r"Segmentation fault|core dumped|Aborted|"
    # CUDA runtime error strings
    r"invalid device (?:ordinal|function)|out of memory|illegal (?:memory access|instruction)|"
    r"device-side assert|misaligned address|launch timed out|too many resources requested|"
    r"no kernel image is available|driver version is insufficient|"
    r"CUDA-capable device(?:\(s\) is/are busy| is detected|s are busy)|"
    r"peer access is not supported|system not yet initialized|unknown error\b|"
    r"operation not supported|CUDA kernel errors might be asynchronously reported|"
    r"consider passing CUDA_LAUNCH_BLOCKING|CU(?:BLAS|DNN|SPARSE|FFT|SOLVER)_STATUS_(?!SUCCESS)|"
    r"GPU crash dump|"
    # the enum names, which tools print without the string: the runtime's cudaError_t and
    # HIP's hipError_t (cudaGetErrorName), the driver's CUresult (cuGetErrorName:
    # CUDA_ERROR_*, as triton, numba, cupy and JAX print it); NotReady is a query's answer
    r"cudaerror(?!notready\b)[a-z]|hiperror(?!notready\b)[a-z]|cuda_error_(?!not_ready\b)[a-z]|"
    # NCCL's result strings (ncclGetErrorString) that carry no "error"
    r"invalid usage|remote process exited|"
    # Python, faulthandler, py-spy, the C++ runtime
    r"most recent call (?:last|first)\)|terminate called|what\(\):|"
    # glibc's malloc_printerr (malloc/malloc.c) and __fortify_fail (debug/fortify_fail.c)
    r"double free or corruption|free\(\): (?:invalid|double free)|munmap_chunk\(\): invalid|"
    r"malloc\(\): (?:memory corruption|corrupted|unaligned|invalid|mismatching)|"
    r"corrupted (?:size vs\. prev_size|double-linked list)|stack smashing detected|"
    # errno and resolver strings
    r"Connection (?:refused|reset|timed out|closed)|Broken pipe|No route to host|"
    r"Network is unreachable|Address already in use|Cannot assign requested address|"
    r"Name or service not known|No address associated with hostname|"
    r"No space left on device|Too many open files|Cannot allocate memory|Permission denied|"
    r"No such file or directory|Read-only file system|Device or resource busy|"
    # torch, torchelastic, gloo; "<service> exited with code 137" (docker compose, and the
    # runners that print a child's end in its words)
    r"timed out|before timing out|exit ?code\s*[:=]?\s*-?[1-9]|"
    r"exit status:? -?[1-9]|non-zero exit|exited with code -?[1-9]|death signal|"
    r"closing signal|Signal \d+ \(SIG|"
    r"enforce fail|timeout caused pair closure|Watchdog caught|"
    r"Detected mismatch between collectives|return ?code\s*[:=]?\s*-?[1-9]|"
    r"No CUDA GPUs are available|process group has not been initialized|"
    r"Duplicate GPU detected|did not receive grad|another process is utilizing it|"
    # torchelastic agent's other failed state (api.py _invoke_run: "[default] Worker group
    # UNHEALTHY. 3/3 attempts left", "Worker group in UNHEALTHY state"); torch's DataLoader
    # (dataloader.py "DataLoader worker (pid(s) N) exited unexpectedly", "Pin memory thread
    # exited unexpectedly") and Ray ("The actor died unexpectedly before finishing this task",
    # "The worker died unexpectedly while executing this task")
    r"worker group (?:in )?unhealthy|(?:exited|died) unexpectedly|"
    # MPI launchers: Open MPI's mpirun/mpiexec (help-orterun.txt "mpirun detected that one or
    # more processes exited with non-zero status", help-mpi-api.txt "MPI_ABORT was invoked on
    # rank N"), MPICH/Intel MPI's Hydra ("BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES")
    r"exited with non-zero status|MPI_ABORT was invoked|bad termination of one of your|"
    # Slurm, the kernel, shells
    r"CANCELLED AT|DUE TO (?:TIME LIMIT|NODE FAILURE|PREEMPTION)|Job step aborted|"
    r"forcing job termination|oom[-_]kill|segfault at|general protection|NVRM: Xid|"
    r"fallen off the bus|blocked for more than \d+ seconds|Bus error|Illegal instruction|"
    # kernel/panic.c, kernel/watchdog.c ("BUG: soft lockup - CPU#3 stuck for 22s!"),
    # kernel/watchdog_perf.c ("Watchdog detected hard LOCKUP on cpu 3")
    r"Kernel panic|soft lockup - CPU#|detected hard LOCKUP on cpu"
).lower())
# Slurm's job states that end a job that did not finish (job_state_string,
# src/common/slurm_protocol_defs.c), in upper case as seff ("State: TIMEOUT (exit code 0)"),
# scontrol ("JobState=NODE_FAIL Reason=...") and sacct (a State column then ExitCode: "TIMEOUT
# 0:0", truncated "OUT_OF_ME+", "CANCELLED by 1234") print them; a healthy job is COMPLETED.
ENDED_STATES = "FAILED|CANCELLED|TIMEOUT|NODE_FAIL|PREEMPTED|BOOT_FAIL|DEADLINE|OUT_OF_MEMORY"
SLURM_STATES = (r"(?:\bState: |JobState=)(?:" + ENDED_STATES + r")\b|"
                r"\b(?:" + ENDED_STATES + r"|CANCELLED by \d+|OUT_OF_ME\+|CANCELLED\+) +\d+:\d+\b")
# Marks anywhere in a line; the others are at its start (after blanks), where its first
# other character is one of MARK_STARTS.
MARKS_ANYWHERE = (r"Socket Timeout\b|SIG(?:KILL|TERM|SEGV|ABRT|BUS|FPE|ILL|HUP|INT|QUIT)\b|"
                  r"CRITICAL\b|" + SLURM_STATES + "|"
                  # bash (jobs.c), a script's child ended by SIGTERM: "line 5:  1234 Terminated"
                  r"line \d+: +\d+ Terminated\b")
MARK_STARTS = "[EFT#("
MARKS = re.compile(
    # glog severity E (error) or F (fatal): "[E ProcessGroupNCCL.cpp:566]", "E0325 20:57:27"
    r"^\s*(?:\[[EF][\s\d]|\[?[EF]\d{4} \d\d:\d\d:\d\d)|"
    # bash's whole line for a foreground child ended by SIGTERM (strsignal(SIGTERM); checked
    # with bash 5.2: a background job killed by `kill %1` prints nothing)
    r"^\s*Terminated\s*$|"
    + MARKS_ANYWHERE + "|"
    # py-spy dump: 'Thread 4242 (active): "MainThread"'
    r"^\s*Thread (?:0x)?[0-9a-fA-F]+ \((?:active|idle)[^)]*\): \"|"
    # gdb attached to a stuck rank (gdb/stack.c print_frame): its command "(gdb) bt" /
    # "thread apply all bt", and a frame with its address "#2  0x00007f778b8ae63f in
    # c10d::tcputil::recvBytes<unsigned char>(...) () from .../libtorch_cpu.so": the stack
    # of a process someone stopped to see where it waits, like py-spy's
    r"^\s*\(gdb\) (?:bt|backtrace|where|thread apply all (?:bt|backtrace))\b|"
    r"^\s*#\d+\s+0x[0-9a-fA-F]{6,} in \S")
# Python's traceback frame (Lib/traceback.py StackSummary.format): '  File "p", line N, in f'
FRAME = re.compile(r'^\s*File "[^"]+", line \d+, in \S')
TRACEBACK_START = re.compile(r"Traceback \(most recent call last\)|most recent call first\)")
EXCEPTION_LINE = re.compile(r"^\s*(?:[\w]+\.)*\w*(?:Error|Exception|Interrupt|Exit)\b")
# NCCL WARN lines that report a fallback or an event the job goes on from: misc/ibvwrap.cc (NCCL
# <= 2.12) warns "Failed to open libibverbs.so[.1]" when the IB verbs library is absent, then
# uses sockets ("NET/IB : No device found", "Using network Socket"). net_ib.cc's async events
# that NCCL carries on through, by version: <= 2.19 "NET/IB : Got async event : port active",
# 2.22 "NET/IB : mlx5_0:1 Got async event : GID table change", 2.23-2.26 "... Got async error
# event: LID change" (its "non-fatal" list), >= 2.28 "... Got non-fatal async event: GID table
# change(18)" and "... GID table changed" (libibverbs ibv_event_type_str); a port error, a
# catastrophic or CQ/QP event is a failure. net_ib.cc ncclIbInit (2.4-2.30) WARNs and then
# skips an HCA it cannot open or query, going on with the others or with sockets.
BENIGN_IB = (r"NET/IB ?: (?:\S+ )?(?:Got non-fatal async event|GID table changed|Got async "
             r"(?:error )?event ?: ?(?:port active|GID table change|LID change|P_Key change|"
             r"SM change|client reregistration|path migrated|send queue drained|last WQE "
             r"reached|SRQ limit reached|communication established))")
SKIPPED_HCA = r"NET/IB ?: ?Unable to (?:open device|query device|query port_num)"
BENIGN = re.compile(r"NCCL WARN (?:Failed to open libibverbs\.so|" + BENIGN_IB + "|"
                    + SKIPPED_HCA + ")")


# torchrun's launch-config dump (launcher/api.py launch_agent, LOGLEVEL=INFO, torch 2.13):
# "  signals_to_handle        : SIGTERM,SIGINT,SIGHUP,SIGQUIT" names the signals it forwards;
# every run prints it (a real run here made a hung rendezvous read UNEXPLAINED on it).
LAUNCH_CONFIG = re.compile(r"\bsignals_to_handle\s*:")


# A training loop's figures that carry a failure word: an error metric with a fractional value
# ("val_error 0.05", "top1_error=12.3", "'eval_error': 0.1", "Validation Error: 0.034",
# "max_abs_error 2e-05", "word error rate"), and zero counts ("0 failed", "errors: 0"). No
# producer of a failure prints a fraction after the word: errnos, exit codes and NCCL's
# results are integers ("Error 137", "NCCL error 2"), and an exception's name is glued to a
# capital ("RuntimeError: 0.5 ..." is no metric). Removed from the line before WORDS reads it.
METRIC_NAME = r"(?:\b[a-z0-9_]*(?:error|err)s?|(?<![A-Za-z])Errors?)\b"
FRACTION = r"[-+]?(?:\d*\.\d+(?:e[-+]?\d+)?|\d+e[-+]?\d+)%?"
METRIC = re.compile(METRIC_NAME + r"['\"]?\s*[:=]?\s*" + FRACTION + "|"
                    r"\b[Ee]rror rates?\b|"
                    r"(?<![\w.-])0 (?:failed|failures?|errors?)\b|"
                    r"\b(?:[Ff]ailed|[Ff]ailures?|[Ee]rrors?)\w*['\"]?\s*[:=]\s*0(?![\d.])")

# A line its producer logged at WARNING level, in the formats ranks' logs carry: glog's
# "W1124 13:05:09.112000 4711 path.py:12]" (c10 logging; torch >= 2.3's Python loggers through
# torch/_logging/_internal.py's glog-style formatter, on every line of a message), torch
# elastic 1.9-2.2's "[2023-09-12 08:31:09,112] torch.distributed.run: [WARNING]", DeepSpeed's
# "[2024-...] [WARNING] [runner.py:202:fetch_hostfile]", Python logging's BASIC_FORMAT
# "WARNING:name:", transformers' "[WARNING|trainer.py:123]" and the "%(asctime)s -
# %(levelname)s - %(name)s" format (HF examples, Lightning scripts). The producer judged it no
# failure: torchrun's agents warn "The node ... has failed to shutdown the rendezvous ... due
# to an error of type RendezvousConnectionError" at the end of healthy multi-node runs
# (dynamic_rendezvous.py _close). Launchers also log a worker's end at WARNING ("Sending process
# N closing signal SIGTERM", "Received Signals.SIGTERM death signal"): those stay failure lines
# (``TEARDOWN``), so a job that was killed is never called healthy. Rules read both, as hints.
#
# Lightning prints every warning raised from a file whose path holds "lightning" without its
# category: lightning/fabric/utilities/warnings.py (2.0-2.6.6; lightning_fabric/, and
# lightning_lite/ in 1.8) replaces warnings.formatwarning with _custom_format_warning,
# f"{filename}:{lineno}: {message}" where Python's default says "...:204: UserWarning: ...".
# Its rank_zero_warn hints (PossibleUserWarning) come out that way, e.g. on every run on a
# host that has srun (runs-wrappers/lightning-*, Lightning 2.6.6): "/.../site-packages/
# lightning/fabric/plugins/environments/slurm.py:204: The `srun` command is available on your
# system but is not used. HINT: ...". Such a line is a warning, whatever its words. Who else
# prints "<path>.py:<N>: <text>": pytest's failure summary ("test_x.py:12: AssertionError",
# "x.py:12: in test_f"), kept out by the exception name and "in " it starts its text with.
LIGHTNING_WARNING = (r"^\s*(?:/|[A-Za-z]:\\)\S*lightning\S*\.py:\d+: "
                     r"(?!in \w|\w*(?:Error|Exception|Interrupt|Exit)\b)")
LOGGED_WARNING = re.compile(r"^\s*W\d{4} \d\d:\d\d:\d\d|\[WARNING\]|^\s*WARNING:[\w.]*:|"
                            r" - WARNING - |\[WARNING\||" + LIGHTNING_WARNING)
# A line logged at INFO in glog's format: c10's C++ logging ("[I1124 16:31:39.317481630
# TCPStoreLibUvBackend.cpp:1354]", TORCH_CPP_LOG_LEVEL=INFO) and torch >= 2.3's Python loggers
# ("I1124 16:31:39.317000 4711 path.py:12]"). A real healthy torchrun run here (torch 2.13,
# TORCH_CPP_LOG_LEVEL=INFO, TORCH_DISTRIBUTED_DEBUG=DETAIL) ends with the libuv store's "[c10d]
# uv_loop_close failed with:-16 errn:EBUSY" at INFO and read UNEXPLAINED, exit 1. The agent
# logs its worker group's end state at INFO too ("[default] Worker group FAILED. 3/3 attempts
# left; will restart worker group", agent/server/api.py _invoke_run): that, and what
# ``TEARDOWN`` reads, stay failure lines.
LOGGED_INFO = re.compile(r"^\s*\[?I\d{4} \d\d:\d\d:\d\d")
AGENT_END_STATE = re.compile(r"Worker group (?:FAILED|UNHEALTHY)\b")

# What launchers print of any worker's end, whatever ended it: torchrun (elastic
# multiprocessing/api.py "Sending process N closing signal SIGTERM", "failed (exitcode: -9)",
# the ChildFailedError summary's fields; agent "Received 15 death signal"), DeepSpeed's
# launch.py sigkill_handler ("Killing subprocess N", "[...] exits with return code = -9"),
# torch.multiprocessing.spawn ("process 1 terminated with signal SIGKILL"), srun ("task 3:
# Exited with exit code 1", "Job step aborted", "forcing job termination"), mpirun ("exited
# on signal 9"), torch.multiprocessing.spawn's teardown of the others ("Terminating process N
# via signal SIGTERM", spawn.py ProcessContext.join). They say a process ended, not why: no
# failure of their own.
TEARDOWN = re.compile(r"closing signal|death signal|exitcode|exit ?code|return ?code|"
                      r"sigkill_handler|Killing subprocess|terminated with (?:signal|exit)|"
                      r"Signal \d+ \(SIG|Root Cause|^\s*Failures:|error_file|"
                      r"Job step aborted|forcing job termination|exited on signal|"
                      r"non-zero exit|Terminating process \d+ via signal|"
                      # slurmstepd req.c (20.11+), the step of a task that failed
                      r"ON \S+ FAILED \(non-zero exit code or other failure mode\)|"
                      # mpirun/mpiexec and Hydra's summaries, MPI_Abort's notice, bash's
                      # "Terminated" (a child ended by SIGTERM), Slurm's end states (seff,
                      # scontrol, sacct: the job ended, not why)
                      r"exited with non-zero status|MPI_ABORT was invoked|BAD TERMINATION OF|"
                      r"exited with code|"
                      r"^\s*Terminated\s*$|line \d+: +\d+ Terminated\b|"
                      + SLURM_STATES,
                      re.IGNORECASE)


# torch's NCCL error text (ProcessGroupNCCL / NCCLUtils getNcclErrorDetailStr) puts NCCL's
# last WARN under a header line of its own, "Last error:": the header says nothing itself.
HEADER = re.compile(r"^\s*Last error:\s*$")

# tqdm's bar (tqdm/std.py format_meter: "{desc}: {percentage:3.0f}%|{bar}| {n}/{total}"), as
# the last thing a log shows: the job had not finished its first step when its output ended.
# A log read after the job is over that ends there was stopped (a hang, a kill) at step 0.
START_BAR = re.compile(r"(?:^|:|\s)\s*0%\|[^|]*\|\s*0/\d+")


# What a rank raises when it lost its peer or waited for it in vain (gloo's "Timed out
# waiting ... for recv", "Connection closed by peer", c10d's socket "timed out", NCCL's
# watchdog "Timeout"): the others' end, never a cause of their own (firstfailure, quietexit).
WAITED = re.compile(r"Timed out waiting|timed out|Connection closed by peer|"
                    r"Connection reset by peer|Timeout", re.IGNORECASE)
