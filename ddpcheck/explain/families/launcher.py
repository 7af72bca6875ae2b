"""What torchrun's elastic agent says about its workers: killed by a signal, or exited.

Lines from torch/distributed/elastic/multiprocessing/api.py ("failed (exitcode: -9)
local_rank: 0 (pid: 123) of binary: ...") and the ChildFailedError summary ("Signal 9
(SIGKILL) received by PID 123"). A negative exit code is the signal that ended the worker.
A SIGKILL read as the OOM killer is a hint (``Pattern.grade``): a scheduler, a user or
torchrun's own teardown send it too, so any cause-grade line in the log comes first.
"""

from __future__ import annotations

import signal
from collections.abc import Sequence

from ddpcheck.diagnoses import (
    DEV_SHM_TOO_SMALL,
    LAUNCH_FAILED,
    RANK_EXITED,
    RANK_KILLED,
    TOO_FEW_GPUS,
    WORLD_SIZE_MISMATCH,
    Problem,
)
from ddpcheck.explain.codes import (
    HOST_OOM,
    LAUNCHER_ENV_MISSING,
    LOCAL_RANK_ARG_UNREAD,
    TCPSTORE_LIBUV_UNAVAILABLE,
)
from ddpcheck.explain.matching import Hit, observed_lines, pattern, where

NEXT = "ddpcheck run --nodes N (reports each rank's exit and signal); check dmesg on the host"
# Why a signal usually arrives, per signal (the log alone cannot prove it).
SIGNAL_CAUSE = {
    "SIGKILL": "the kernel's OOM killer (host RAM exhausted: check dmesg / the job's memory "
               "limit), or the scheduler or a user killed it",
    "SIGBUS": "a shared-memory mapping failed: /dev/shm is full or too small (containers "
              "default to 64 MB)",
    "SIGSEGV": "a crash in native code (a CUDA/NCCL/extension library or a version mismatch "
               "between them)",
    "SIGABRT": "an abort in native code, e.g. the NCCL watchdog taking the process down",
}


# How srun and the shell name a signal in words (strsignal).
WORDS = {"Terminated": "SIGTERM", "Killed": "SIGKILL"}


def _signal_name(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


def combine_killed(hits: Sequence[Hit]) -> Problem:
    names = []
    for h in hits:
        g = h.match.groupdict()
        num = abs(int(g.get("code") or g.get("sig") or 0))
        named = g.get("signame") or g.get("signame2") or WORDS.get(g.get("word") or "")
        names.append(named or _signal_name(num))
    # torchrun's teardown sends SIGTERM to the ranks left (elastic/multiprocessing/api.py
    # _close): another signal in the same lines is the one that ended the job, and only the
    # ranks it hit are named.
    name = next((n for n in names if n != "SIGTERM"), names[0])
    hits = [h for h, n in zip(hits, names, strict=True) if n == name]
    local = sorted({h.match["lr"] for h in hits if h.match.groupdict().get("lr")})
    who = f"local rank {', '.join(local)}: " if local else ""
    if name == "SIGKILL":  # the OOM killer's signal; a scheduler's kill says CANCELLED
        return HOST_OOM.problem(f"{who}killed by SIGKILL | {observed_lines(hits)}",
                                **where(hits))
    if name == "SIGBUS":
        # A mapped tmpfs page that cannot be backed raises SIGBUS: how a full /dev/shm ends
        # a process that maps it (NCCL's shm transport, DataLoader tensors). torch's own
        # SIGBUS handler (torch/csrc/DataLoader.cpp) says so: "It is possible that
        # dataloader's workers are out of shared memory."
        return DEV_SHM_TOO_SMALL.problem(
            f"{who}killed by SIGBUS | {observed_lines(hits)}",
            cause=f"SIGBUS: {SIGNAL_CAUSE['SIGBUS']}", **where(hits))
    return RANK_KILLED.problem(
        f"{who}killed by {name} | {observed_lines(hits)}",
        cause=f"{name}: {SIGNAL_CAUSE.get(name, 'the process received this signal')}",
        **where(hits))


PATTERNS = [
    # torch/distributed/run.py determine_local_world_size: --nproc-per-node is a number or
    # one of gpu, cpu, xpu, auto (or a custom device's name); anything else stops torchrun
    # before a worker starts.
    pattern(LAUNCH_FAILED,
            r"ValueError: Unsupported nproc_per_node value: (?P<value>.*?)\s*$",
            "torchrun --nproc-per-node=<GPUs per node> ... (the launch line as the script "
            "builds it: echo it before it runs)",
            cause="torchrun got '{value}' for --nproc-per-node, which is neither a number nor "
                  "gpu/cpu/xpu/auto: the launch script passed its arguments in the wrong order "
                  "(a path or config where it expects the GPU count) or a variable was empty",
            fix="pass the number of processes per node to --nproc-per-node (e.g. "
                "--nproc-per-node=8), in the position the launch script expects it"),
    # The same function for --nproc-per-node gpu (xpu) when torch sees no such device: "raise
    # ValueError("Cuda is not available.")" (run.py, torch 1.10-2.15; a real run:
    # runs/s32c-nproc-gpu-on-cpu-host): one process per GPU, and there is none to count.
    pattern(TOO_FEW_GPUS, r"ValueError: (?P<dev>Cuda|Xpu) is not available\.",
            "python -c 'import torch; print(torch.cuda.device_count())' on the node, and "
            "nvidia-smi",
            cause="torchrun --nproc-per-node gpu (or xpu) starts one process per device and "
                  "torch sees none: the job landed on a node without GPUs (a login or CPU "
                  "node), was given none (--gres=gpu:N, docker --gpus all), "
                  "CUDA_VISIBLE_DEVICES hides them, or this torch is a CPU-only build",
            fix="run it on a GPU node with its GPUs granted to the job, or pass a number "
                "(--nproc-per-node N) to run N CPU processes with backend gloo"),
    # argparse's refusal of the launcher's own command line (Lib/argparse.py ArgumentParser
    # .error: "usage: ..." then "<prog>: error: <message>", exit 2), for the parsers of
    # torch/distributed/run.py (prog "torchrun", or "run.py" / "launch.py" under python -m)
    # and DeepSpeed's and accelerate's launchers: no worker started. A flag that lost its
    # value (an empty variable: "--master_port $RANDOM" under sh) takes the next word
    # ("argument --master_port: invalid int value: 'train.py'"). The training script's own
    # parser refusing the --local_rank the launcher adds is LOCAL_RANK_ARG_UNREAD's.
    pattern(LAUNCH_FAILED,
            r"^\s*(?P<prog>launch\.py|run\.py|torchrun|deepspeed|accelerate(?:-launch)?): "
            r"error: (?!unrecognized arguments:.*--local[-_]rank)(?P<msg>.+?)\s*$",
            "echo the launch line before it runs (set -x in the job script) and check each "
            "variable it uses is set",
            cause="{prog} refused its own command line before starting any worker ({msg}): a "
                  "flag whose value is missing (an empty or unset variable, so the next word "
                  "became its value), a misspelt flag, or the script's arguments placed "
                  "before the launcher's",
            fix="give every launcher flag its value (e.g. --master_port=29500, not an unset "
                "$PORT; bash's $RANDOM is empty under sh) and put the launcher's flags before "
                "the training script"),
    # CPython Modules/main.c pymain_run_file_obj (2.7 to 3.13: "%ls: can't open file %R:
    # [Errno %d] %s"): the interpreter the launcher started cannot open the script it was
    # given. Nothing else prints it; every rank of the node prints it, then torchrun reports
    # exit code 2 as a consequence.
    pattern(LAUNCH_FAILED,
            r"python[\d.]*(?:\.exe)?: can't open file ['\"](?P<path>.+?)['\"]: "
            r"\[Errno (?P<errno>\d+)\]",
            "srun --nodes=N --ntasks-per-node=1 ls -l <script> (does each node see the "
            "script at that path?)",
            cause="the Python interpreter the launcher started could not open the training "
                  "script {path} on this node (errno {errno}): the path is relative to another "
                  "working directory, or the file is not on this node's filesystem (a copy on "
                  "the login node only, a shared filesystem not mounted here)",
            fix="give the script as an absolute path on a filesystem every node mounts (ls -l "
                "{path} on each node), or cd to its directory in the job script before the "
                "launcher"),
    # CPython Lib/runpy.py _run_module_as_main (3.x): "python -m X" that cannot find X exits
    # with "<python>: No module named X" or "<python>: Error while finding module
    # specification for 'X.y' (ModuleNotFoundError: No module named 'X')": the launcher's
    # --module / -m target is not importable on this node (an import inside the user's code
    # raises "ModuleNotFoundError: No module named 'X'" instead, without the interpreter).
    pattern(LAUNCH_FAILED,
            r"python[\d.]*(?:\.exe)?: (?:No module named |Error while finding module "
            r"specification for ')(?P<mod>[\w.]+)(?:\s*$|')",
            "srun --nodes=N --ntasks-per-node=1 python -c 'import <module>' (from the job's "
            "working directory, with its environment)",
            cause="the Python interpreter the launcher started with -m could not import the "
                  "module it was given ({mod}) on this node: the job's working directory "
                  "or PYTHONPATH is not the one where the package lives, or it is not "
                  "installed in this node's environment",
            fix="cd to the directory holding the package (or set PYTHONPATH to it) in the job "
                "script before the launcher, or pip install it in the environment every node "
                "uses; check with python -c 'import {mod}' on each node"),
    # Meta's Llama reference code (llama/generation.py Llama.build, llama 2 and 3: "assert
    # model_parallel_size == len(checkpoints), f'Loading a checkpoint for MP={len(checkpoints)}
    # but world size is {model_parallel_size}'"): the checkpoint is sharded for MP processes,
    # and the model-parallel size is torchrun's world size.
    pattern(WORLD_SIZE_MISMATCH,
            r"Loading a checkpoint for MP=(?P<mp>\d+) but world size is (?P<ws>\d+)",
            "torchrun --nproc-per-node <MP> ... (as many processes as the checkpoint's "
            "consolidated.*.pth shards)",
            cause="the checkpoint is split for {mp} model-parallel processes but the job "
                  "started {ws}: --nproc-per-node (times --nnodes) differs from the number of "
                  "consolidated.*.pth shards of that model size",
            fix="launch exactly {mp} processes (torchrun --nproc-per-node {mp} for one node), "
                "or reshard the checkpoint for {ws}"),
    # c10d TCPStore (libtorch_cpu, torch 2.13: "use_libuv was requested but PyTorch was built
    # without libuv support, run with USE_LIBUV=0 to disable it."; 2.4 to 2.6 spell it
    # "was build"): the store torchrun and env:// create cannot start on such a build.
    pattern(TCPSTORE_LIBUV_UNAVAILABLE,
            r"use_libuv was requested but PyTorch was buil[dt] without libuv support",
            "USE_LIBUV=0 torchrun ... (the store's non-libuv backend)"),
    # torch/distributed/rendezvous.py _env_rendezvous_handler, and scripts reading os.environ
    pattern(LAUNCHER_ENV_MISSING,
            r"environment variable (?P<var>[A-Z_]+) expected, but not set|"
            r"KeyError: '(?P<key>LOCAL_RANK|RANK|WORLD_SIZE|MASTER_ADDR|MASTER_PORT)'|"
            # the frame that raises it (torch/distributed/rendezvous.py), and a KeyError's
            # message on a line of its own, as a chained traceback prints it
            r"raise _env_error\(\"(?P<frame>[A-Z_]+)\"\)|"
            r"^\s*'(?P<bare>LOCAL_RANK|RANK|WORLD_SIZE|MASTER_ADDR|MASTER_PORT)'\s*$",
            "torchrun --nproc-per-node N your_script.py (torchrun sets the variables)"),
    # argparse's own message (lmy98129/VLPD#6, skycrapers/TecoGAN-PyTorch#31): every local
    # rank prints it, then the agent reports the exit code 2 as a consequence.
    # Who else passes the argument: torch.distributed.launch (without --use-env; since 2.0
    # spelt --local-rank=N) and DeepSpeed's launcher (deepspeed/launcher/launch.py appends
    # --local_rank=N unless --no_local_rank): the line is the same, so the fix names both.
    # python-fire (fire/core.py _Fire: "ERROR: Could not consume arg: --local_rank=3") is
    # the same refusal by a script whose main() fire.Fire exposes without that parameter.
    pattern(LOCAL_RANK_ARG_UNREAD, r"error: unrecognized arguments:.*--local[-_]rank|"
            r"Could not consume arg: --local[-_]rank",
            "python -m torch.distributed.launch --nproc-per-node N -m ddpcheck.worker "
            "(ddpcheck's per-rank process reads --local-rank, as a script must)",
            cause="the launcher appends --local_rank=N (--local-rank=N from torch 2.0) to the "
                  "script's arguments: python -m torch.distributed.launch without --use-env, "
                  "or the deepspeed launcher; the script's argument parser does not declare it",
            fix="declare it (parser.add_argument('--local_rank', '--local-rank', type=int, "
                "default=0); with fire.Fire, a local_rank: int = 0 parameter) or stop the "
                "launcher passing it: torchrun instead of "
                "torch.distributed.launch, deepspeed --no_local_rank; read LOCAL_RANK from "
                "the environment"),
    pattern(RANK_KILLED,
            r"failed \(exitcode: (?P<code>-\d+)\) local_rank: (?P<lr>\d+) \(pid: (?P<pid>\d+)\)",
            NEXT, combine=combine_killed, grade="hint"),
    # DeepSpeed's launcher (deepspeed/launcher/launch.py sigkill_handler): "{cmd} exits with
    # return code = -9"; a negative code is the signal, as for torchrun
    pattern(RANK_KILLED, r"exits with return code = (?P<code>-\d+)", NEXT,
            combine=combine_killed, grade="hint"),
    # The pid as users post it: often redacted ("received by PID xxx", "PID <pid>", "PID
    # ***"); torchrun's words around it are the same (errors/__init__.py _format_failure).
    pattern(RANK_KILLED, r"Signal (?P<sig>\d+) \(SIG\w+\) received by PID "
            r"(?P<pid>\d+|[xX]+\b|<[\w ]*>|\*+)", NEXT, combine=combine_killed, grade="hint"),
    # The "Root Cause (first observed failure)" block of torchrun's ChildFailedError
    # (torch/distributed/elastic/multiprocessing/errors/__init__.py _format_failure).
    pattern(RANK_KILLED, r"^\s*exitcode\s*: (?P<code>-\d+) \(pid: (?P<pid>\d+)\)", NEXT,
            combine=combine_killed, grade="hint"),
    # torch/multiprocessing/spawn.py ProcessExitedException: "process 1 terminated with
    # signal SIGKILL"; Python's subprocess (torch.distributed.launch <= 1.9 re-raises it):
    # "Command '[...]' died with <Signals.SIGKILL: 9>."
    pattern(RANK_KILLED,
            r"process (?P<lr>\d+) terminated with signal (?P<signame>SIG[A-Z]+)|"
            r"died with <Signals\.(?P<signame2>SIG[A-Z]+): (?P<sig>\d+)>", NEXT,
            combine=combine_killed, grade="hint"),
    # Lightning's launcher (lightning/fabric/strategies/launchers/subprocess_script.py,
    # _ChildProcessObserver, 2.1-2.6.6), polling the ranks it started every 5 s: "[rank: 1]
    # Child process with PID 4242 terminated with code -9. Forcefully terminating all other
    # processes to avoid zombies 🧟" (the rank is the child's index + 1: its local rank), then
    # it SIGKILLs the others and itself. Popen's returncode: a negative code is the signal,
    # as torchrun's exitcode. Who else prints it: only that observer.
    pattern(RANK_KILLED, r"Child process with PID (?P<pid>\d+) terminated with code "
            r"(?P<code>-\d+)\. Forcefully terminating", NEXT, combine=combine_killed,
            grade="hint"),
    # srun (src/srun/launch.c): "srun: error: node1: tasks 0-3: Terminated" is SIGTERM,
    # "task 2: Killed" SIGKILL (the shell-style "Killed" line in memory.py matches it too)
    pattern(RANK_KILLED, r"srun: error: \S+: tasks? [\d,-]+: (?P<word>Terminated)\s*$", NEXT,
            combine=combine_killed, grade="hint"),
    pattern(RANK_EXITED,
            r"failed \(exitcode: (?P<code>[1-9]\d*)\) local_rank: (?P<lr>\d+)|"
            r"process \d+ terminated with exit code [1-9]|"
            r"srun: error: \S+: tasks? [\d,-]+: Exited with exit code [1-9]|"
            r"returned non-zero exit status [1-9]|"
            # DeepSpeed's launcher (deepspeed/launcher/launch.py sigkill_handler): "[...]
            # exits with return code = 1" after a worker's own error
            r"exits with return code = [1-9]|"
            # Lightning's observer, above, for a rank that exited with an error of its own
            r"Child process with PID \d+ terminated with code [1-9]", NEXT,
            root=False),
    # stop24 dev: the agent's line as users paste it, cut or wrapped after "local_rank"
    # (api.py prints "failed (exitcode: -9) local_rank: 0 (pid: N) of binary: ..."); the
    # exit code alone names the signal.
    pattern(RANK_KILLED, r"failed \(exitcode: (?P<code>-\d+)\) local_rank(?!: \d+ \(pid)", NEXT,
            combine=combine_killed, grade="hint"),  # as the whole line: a signal is a hint
]
