"""What a worker process's start or death says about its cause: mp.spawn arguments that do
not fit the function, CUDA initialised before a fork, SIGBUS, and a launcher that got SIGHUP.

Runs inside ``ddpcheck explain`` (a pure reader of log lines). Sources:
- ``torch/multiprocessing/spawn.py`` ``_wrap`` calls ``fn(i, *args)``; a call that does not
  fit fn's signature raises Python's ``TypeError: main() takes 2 positional arguments but 63
  were given`` (or ``missing 1 required positional argument``) right at that frame, and the
  parent re-raises it as ``ProcessRaisedException``. ``args=n`` (not a tuple) fails the
  unpacking itself: ``main() argument after * must be an iterable, not int`` (Python < 3.11),
  ``Value after * must be an iterable, not int`` (3.11 on; a real run:
  tests/data/explain/runs/s32-spawn-args-not-tuple). Only a TypeError printed directly under
  the ``fn(i, *args)`` frame is spawn's: any other is some call of the user's own.
- CUDA before a fork: a CUDA context does not survive fork(), so torch refuses CUDA in a forked
  child once the parent initialised it (torch/cuda/__init__.py ``_lazy_init``: "Cannot
  re-initialize CUDA in forked subprocess. To use CUDA with multiprocessing, you must use the
  'spawn' start method"), and the notebook launchers check first: accelerate's
  ``notebook_launcher`` ("CUDA has been initialized before the `notebook_launcher` could
  create a forked subprocess", accelerate/launchers.py) and Lightning's fork strategies
  (``ddp_notebook``, ``ddp_fork``: "Lightning can't create new processes if CUDA is already
  initialized", lightning/fabric/strategies/launchers/multiprocessing.py). Stop-33b dev
  gh44-accelerate-940, gh44-xturing-194, gh44-rf-detr-923.
- SIGBUS: a process touching a page of a shared-memory mapping that tmpfs cannot back
  (/dev/shm full) gets SIGBUS; torch's DataLoader says so itself ("Unexpected bus error
  encountered in worker. This might be caused by insufficient shared memory (shm)",
  torch/csrc/DataLoader.cpp), and torchrun reports the worker as "Signal 7 (SIGBUS) received
  by PID N" / exitcode -7 (torch/distributed/elastic/multiprocessing/api.py).
- SIGHUP: torchrun handles SIGTERM, SIGINT, SIGHUP and SIGQUIT (multiprocessing/api.py,
  TORCHELASTIC_SIGNALS_TO_HANDLE): its handler raises ``SignalException("Process N got
  signal: 1")`` (``Signals.SIGHUP`` on newer torch), the agent logs "Received 1 death signal,
  shutting down workers" (agent/server/api.py) and sends each worker the same signal
  ("Sending process N closing signal SIGHUP"); the summary then says "Signal 1 (SIGHUP)
  received by PID N". SIGHUP is what a terminal or SSH session sends when it closes.
- SIGTERM and SIGINT reach the agent the same way ("Received 15 death signal, shutting down
  workers", ``SignalException: Process N got signal: 15``; torch 1.x and Python < 3.11 print
  ``Signals.SIGTERM``): the scheduler ending the job (Slurm's time limit, scancel, preemption:
  SIGTERM first, SIGKILL after KillWait), Ctrl-C (SIGINT), or a user's kill. Nothing in torch
  sends it to the agent. A hint (run-interrupted): srun also ends every other task of a step
  with SIGTERM when one task fails (--kill-on-bad-exit), so another node's earlier failure,
  when the logs show one, is the cause (a real run: tests/data/explain/runs/s30-agent-sigterm).
"""

from __future__ import annotations

from collections.abc import Sequence

from ddpcheck.diagnoses import (
    DEV_SHM_TOO_SMALL,
    LAUNCH_FAILED,
    RUN_INTERRUPTED,
    Problem,
    register,
)
from ddpcheck.explain.matching import Hit, observed_lines, pattern, where

CUDA_BEFORE_FORK = register(
    "cuda-initialized-before-fork", "the parent process initialised CUDA before forking "
    "the ranks",
    "ranks started with the fork start method (a notebook's accelerate notebook_launcher, "
    "Lightning's ddp_notebook / ddp_fork, start_method='fork') after the parent had created "
    "a CUDA context: a cell, an import (bitsandbytes, a quantised model), model.to('cuda') "
    "or a torch.cuda call ran before the launch",
    "restart the kernel and keep every CUDA use (model.to('cuda'), quantised loading, "
    "torch.cuda calls) inside the launched function; or run the training as a script with "
    "torchrun / accelerate launch (the spawn start method)")
SPAWN_ARGS_MISMATCH = register(
    "spawn-args-mismatch",
    "torch.multiprocessing.spawn called the worker function with arguments that do not fit it",
    "mp.spawn(fn, args=..., nprocs=N) calls fn(i, *args): args is not a tuple (args=(cfg) "
    "instead of args=(cfg,), so the object itself is unpacked), or fn does not take the "
    "process index as its first parameter",
    "pass args as a tuple (args=(cfg,)) and declare fn as def fn(rank, cfg): mp.spawn adds "
    "the process index in front of args")

LAUNCHER_HANGUP = register(
    "launcher-hangup",
    "the launcher received SIGHUP and shut its workers down",
    "the terminal or SSH session that started the job closed (a dropped connection, a closed "
    "laptop): the kernel sends SIGHUP to its process group, and torchrun passes it on to "
    "every worker; nohup alone does not always detach the launcher's process group",
    "run the job inside tmux or screen, or detach it fully (setsid nohup torchrun ... &), or "
    "submit it through the scheduler (sbatch) instead of an interactive shell")

# The frame line spawn.py prints for its call of the user's function (torch 1.x to 2.13).
SPAWN_FRAME = r"^\s*fn\(i, \*args\)\s*$"
ARITY_ERROR = (r"TypeError: (?P<fn>[\w.]+)\(\) (?:takes (?:from \d+ to )?\d+ positional "
               r"arguments? but \d+ (?:was|were) given|missing \d+ required positional "
               r"arguments?)")
# args not a tuple: ``fn(i, *args)`` cannot unpack it (Python 3.11 names no function)
STAR_ERROR = (r"TypeError: (?:(?P<starfn>[\w.]+)\(\) argument|Value) after \* must be an "
              r"iterable, not (?P<argtype>\w+)")
# The exception line follows the frame line directly, or after Python 3.11's caret line.
MAX_GAP = 2


def combine_spawn(hits: Sequence[Hit]) -> Problem | None:
    """spawn-args-mismatch for a TypeError right under spawn's fn(i, *args) frame; else no
    problem of its own (a TypeError of the user's own code, or spawn's frame above some other
    exception that the other families read: the engine quotes it if nothing else does)."""
    frames = {(h.record.source, h.record.lineno) for h in hits if "fn(i" in h.record.text}
    spawn_errors = [h for h in hits if "fn(i" not in h.record.text and any(
        (h.record.source, h.record.lineno - gap) in frames for gap in range(1, MAX_GAP + 1))]
    if not spawn_errors:
        return None
    found = spawn_errors[0].match.groupdict()
    if found.get("argtype"):  # the unpacking failed: args is one object, not a tuple
        fn = found.get("starfn") or "the worker function"
        cause = (f"mp.spawn(fn, args=...) was given one {found['argtype']} object as args, "
                 "not a tuple: fn(i, *args) cannot unpack it (args=(x) is x itself; args=(x,) "
                 "is a tuple)")
    else:
        fn = found["fn"]
        cause = (f"mp.spawn called {fn}(i, *args) and the call does not fit {fn}'s "
                 "parameters: args is not a tuple (args=(cfg) unpacks cfg itself), or "
                 f"{fn} does not take the process index first")
    return SPAWN_ARGS_MISMATCH.problem(observed_lines(spawn_errors), cause=cause,
                                       **where(spawn_errors))


PATTERNS = [
    # A launcher's elastic agent (a subclass of torch's SimpleElasticAgent: DeepSpeed's
    # DSElasticAgent, deepspeed/elasticity/elastic_agent.py) overriding a method torch's
    # agent calls with other arguments in this torch release: "TypeError:
    # DSElasticAgent._set_master_addr_port() takes 3 positional arguments but 4 were given"
    # (torch/distributed/elastic/agent/server/api.py _rendezvous, stop-33c dev
    # gh48-deepspeed-4985). It fails in the agent, before any worker starts. Before the
    # spawn rule, whose arity wording it shares (the first pattern a line matches wins).
    pattern(LAUNCH_FAILED,
            r"TypeError: (?P<agent>\w*Agent)\.(?P<meth>_?\w+)\(\) (?:takes \d+ positional "
            r"arguments? but \d+ (?:was|were) given|got an unexpected keyword argument|"
            r"missing \d+ required positional argument)",
            "pip list | grep -i -E 'torch|deepspeed|accelerate|lightning' (the launcher's "
            "release against torch's)",
            cause="the launcher's elastic agent {agent} overrides torch's {meth}() with "
                  "another signature than this torch calls: the launcher package was "
                  "released for another torch (the agent API changed), so it crashed before "
                  "starting any worker",
            fix="install a release of the launcher package made for this torch (upgrade it, "
                "e.g. pip install -U deepspeed), or the torch release it supports"),
    pattern(CUDA_BEFORE_FORK,
            r"Cannot re-initialize CUDA in forked subprocess|CUDA has been initialized before "
            r"the `?notebook_launcher`? could create a forked subprocess|Lightning can't "
            r"create new processes if CUDA is already initialized",
            "python -c 'import torch; print(torch.cuda.is_initialized())' after your imports "
            "(True: an import initialises CUDA)"),
    pattern(SPAWN_ARGS_MISMATCH, f"{SPAWN_FRAME}|{ARITY_ERROR}|{STAR_ERROR}",
            "python -c 'import inspect, main; print(inspect.signature(main.main))' (fn must "
            "take the process index, then the args tuple)", combine=combine_spawn),
    pattern(DEV_SHM_TOO_SMALL,
            r"Signal 7 \(SIGBUS\) received by PID|"
            r"failed \(exitcode: -7\) local_rank|exitcode\s*[:=]\s*-7\b",
            "ddpcheck run --stages node,collectives (the node stage measures /dev/shm)",
            cause="a worker died of SIGBUS, what a process gets when a page of a shared-memory "
                  "mapping cannot be backed: /dev/shm is full or too small (containers default "
                  "to 64 MB) for the DataLoader's shared tensors or NCCL's shared buffers",
            # a hint (docs/explain.md): a memory-mapped file truncated under the reader (a
            # dataset or checkpoint rewritten, NFS) or failing RAM sends SIGBUS too
            grade="hint"),
    pattern(LAUNCHER_HANGUP,
            r"Received (?:1|Signals\.SIGHUP|SIGHUP) death signal|"
            r"Process \d+ got signal: (?:1|Signals\.SIGHUP)\s*$|"
            r"Sending process \d+ closing signal SIGHUP|Signal 1 \(SIGHUP\) received by PID",
            "rerun it detached: tmux / screen, setsid nohup ... &, or sbatch"),
    pattern(RUN_INTERRUPTED,
            r"Received (?P<sig>15|2|Signals\.SIG(?:TERM|INT)|SIG(?:TERM|INT)) death signal|"
            r"Process \d+ got signal: (?P<sig2>15|2|Signals\.SIG(?:TERM|INT))\s*$",
            "sacct -j JOBID -o JobID,State,Elapsed,Timelimit (TIMEOUT, CANCELLED, PREEMPTED: who "
            "ended it)",
            cause="the launcher (torchrun's agent) received SIGTERM or SIGINT and shut its "
                  "workers down: the scheduler ended the job (its time limit, scancel, "
                  "preemption), Ctrl-C, or someone killed it; srun also sends SIGTERM to the "
                  "other tasks of a step when one task fails; a job that hung (its last "
                  "progress line long before the signal) reaches its time limit or a user's "
                  "Ctrl-C the same way",
            fix="find who ended it: sacct -j JOBID -o JobID,State,Elapsed,Timelimit; TIMEOUT: "
                "ask for more time (sbatch --time) or checkpoint and resume (sbatch "
                "--signal=B:USR1@120 to save before the end); CANCELLED / PREEMPTED: requeue; "
                "if another node failed first (srun: error: ... Exited with exit code), fix "
                "that failure; if the job had stopped progressing before it, it hung: find "
                "where (py-spy dump --pid PID on each rank, TORCH_NCCL_DUMP_ON_TIMEOUT=1)",
            grade="hint"),
]
