"""``ddpcheck explain`` on whole logs of real failed jobs whose cause we injected.

Each scenario runs ``bench/real_runs_train.py`` (a tiny CPU/gloo training loop) with one
known fault under the real launcher a user has: torchrun with ``--log-dir DIR --tee 3
--redirects 3`` (console plus the per-rank stdout/stderr files and, with ``RECORD``,
torchelastic's ``error.json``), torchrun without ``--log-dir`` (the console only),
``mp.spawn``, or plain ``python``. It collects what the user has (``console.log`` and the
log-dir tree), runs the real explain on it twice (``ddpcheck explain DIR`` as a subprocess
and ``explain_inputs(read_inputs(...))`` in process) and scores:

- right: the first root cause is the injected fault's code (for a fault of the user's own
  code, which no rule names: ``unexplained`` quoting that exception and its user frame);
- abstained: explain says it cannot tell (``Explanation.undetermined``);
- wrong: any other first cause.

A torchrun ``--log-dir`` run is scored again on its log tree alone (the per-rank files and
error.json, no console): what a user has when the console scrolled away.

Every scenario runs in its own temporary directory with short timeouts; nothing outlives it
(the launcher's process group is killed at its deadline, 40 s).

Issue 21's misses run in worlds made for them (``bench/real_runs_worlds.py``; as root, each
torn down on success, failure, timeout and Ctrl-C, and skipped with its reason where this
machine cannot make it: no root, no ``ip``/``iptables``/``unshare``, no cgroup memory
controller). Two namespace hosts (``tests.cluster.netns``, one torchrun each, static
rendezvous unless said, 1 rank per node; ``console.log`` + ``logs/`` for node0,
``console-node1.log`` + ``logs-node1/`` for node1):

- ``netns-master-addr-not-in-hosts``: node1's /etc/hosts lacks ``--master-addr node0``;
- ``netns-own-hostname-not-in-hosts``: node1's own name is missing from its /etc/hosts, so
  gloo falls back to loopback (hosts on 192.168.x: gloo lets the larger address connect);
- ``netns-hostname-loopback``: node1's name is 127.0.1.1 in its /etc/hosts (192.168.x);
- ``netns-endpoint-not-recognised``: c10d ``--rdzv-endpoint`` is node0's eth1 address, which
  node0's name does not resolve to, so no agent hosts the store;
- ``netns-master-addr-other-node``: ``--master-addr node1`` while node0 is node rank 0;
- ``netns-socket-ifname-no-address``: one host, GLOO_SOCKET_IFNAME an interface that is up
  with no address; ``socket-ifname-missing`` (this host): GLOO_SOCKET_IFNAME=eth9;
- ``netns-socket-ifname-lo``: both nodes' job scripts (``set -x``) export
  GLOO_SOCKET_IFNAME=lo;
- ``netns-peer-ports-rejected``: node0's firewall resets new connections to every port but
  the rendezvous port; ``netns-store-port-dropped``: it drops the master port;
- ``shm-too-small``: a private mount namespace with a 1 MiB tmpfs on /dev/shm, DataLoader
  workers handing 4 MiB batches over it;
- ``cgroup-oom``: torchrun in a 1.5 GiB memory cgroup, rank 1 growing until the kernel's
  OOM killer ends it.

Most take 5-25 s; those that wait on gloo's pair connect (a peer at loopback, a port that
resets) take 35-40 s, as gloo waits 25 s for the side that never connects.

Stop 30 (``STOP30``, ``s30-*``; recorded before any rule was written for them): rank 1
SIGSTOPped (``deadline_s`` 55: torchrun's 30 s SIGTERM grace), a DataLoader worker
SIGKILLed, ``ulimit -n 64`` (``nofile``) under DataLoader batches of many tensors, rank 1's
checkpoint missing, DDP with an unused head and with different parameter shapes, SIGTERM to
torchrun (``sigterm_after_s``), and on two namespace hosts: iptables DROP of every port but
the master's, both nodes ``--node-rank 0``, node1 given another ``--master-port``, node1's
link shaped to 1 mbit/s (tc tbf) under a 16 MiB all_reduce.

Stop 32 (``STOP32``, ``s32-*``; recorded before any rule was written for them): DDP over a
layer in two reentrant ``checkpoint()`` blocks, rank 0 alone in ``broadcast_object_list``, no
``init_process_group``, backend nccl on a CPU-only torch, ``mp.spawn(args=n)`` (not a tuple),
``mp.spawn`` of 2 with world_size 3, ``python -m torch.distributed.launch`` of a script that
declares only ``--local_rank``, a checkpoint saved into a read-only mount ("readonly" world),
and on two namespace hosts a c10d endpoint on no network the hosts have (node1 ``--nnodes 3``
was scored first too, then dropped: whether it hangs is a race, see STOP32).

Then (``STOP32B``, ``s32b-*``): all_gather of uneven sizes, rank 1 SIGTERMed from outside
torchrun, DDP ``device_ids=[local_rank]`` over a CPU model, ``torch.cuda.set_device`` under a
CPU-only torch, a package one rank cannot import before ``init_process_group``, and under
``mp.spawn`` a MASTER_ADDR that does not resolve and a MASTER_PORT another program holds.

And (``STOP32C``, ``s32c-*``): a script path missing on the node, rank 0 busy before
``init_process_group`` under ``mp.spawn`` (the store it hosts not up yet), ``--nproc-per-node
gpu`` on a host without a GPU, a barrier after ``destroy_process_group``.

Then (``STOP32D``, ``s32d-*``): ``ulimit -n 20`` for 8 workers (the agent's store runs out of
descriptors), and on two namespace hosts a stale /etc/hosts entry for the master's name and
nodes with different ``--rdzv-id``.

Stop 33 (``STOP33``, ``s33-*``): a c10d endpoint whose port another server holds (it greets
as sshd does), on two namespace hosts a ``--node-rank 2`` of 2 nodes, the ``env`` launcher's
plain python per rank with one rank's RANK=2 of 2, one rank's WORLD_SIZE=3 and a
MASTER_PORT=70000, DDP over a model with one layer more on rank 1, a tcp:// init method whose
host does not resolve, ``mp.spawn`` with rank 1 returning early, a checkpoint into a
directory missing on the node, and a send of 64 values received into 32. Then (``STOP33B``,
``s33b-*``): a layer read through the DDP wrapper, SIGHUP to torchrun, and on two namespace
hosts --master-addr 127.0.0.1 and --rdzv-endpoint localhost on both nodes. And
(``STOP33C``, ``s33c-*``) jobs under a real Slurm (``slurm`` world: slurmctld and a slurmd per
namespace host, tests/cluster/slurm.py), submitted with sbatch, the job's output file as the
console: a 2-node batch script that runs torchrun without srun, a job scancel'ed mid-run, a
task's KeyError under srun, srun of plain python (no RANK), and srun --ntasks=16 in an
allocation of 4 CPUs. Then (``STOP33D``, ``s33d-*``): a one-minute --time limit, each task's
MASTER_ADDR=$(hostname), --gres=gpu:1 on GPU-less nodes (refused at submission: sbatch's
own output is the console), srun --nodelist outside the allocation. Then (``STOP33E``,
``s33e-*``): two healthy jobs and two torchruns per node; and (``STOP33F``, ``s33f-*``):
#SBATCH --nodes=3 on two nodes, srun --export=NONE (no venv on the task's PATH),
--kill-on-bad-exit with a rank's sys.exit(1), MASTER_PORT unset.

Launch wrappers (``bench/real_runs_wrappers.py``, skipped where the package is not
installed): the same faults under ``accelerate launch --multi_gpu`` (torch elastic inside,
gloo on CPU) and Lightning's default DDP launcher (``Trainer(strategy="ddp",
accelerator="cpu", devices=2)``), ``accelerate-*`` and ``lightning-*``.

Usage: python -m bench.explain_real_runs [--only NAME ...] [--record DIR] [--keep DIR]

``--record DIR`` writes each run's files under DIR/<scenario>/ with a ``MANIFEST.json``
(what ``tests/unit/explain/test_real_runs.py`` explains without running anything).
Needs torch (the venv's torchrun); explain itself does not.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from bench import real_runs_gpu as gpu
from bench import real_runs_worlds as worlds
from bench import real_runs_wrappers as wrappers
from ddpcheck.explain.engine import explain_inputs
from ddpcheck.explain.inputs import read_inputs

ROOT = Path(__file__).resolve().parent.parent
TRAIN = "bench/real_runs_train.py"
DEADLINE_S = 40  # a scenario that runs longer than this is killed (and scored as it is)
VERDICTS = ("right", "abstained", "wrong")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Scenario:
    """One injected fault: how it is launched, and what explain should name."""

    name: str
    expected: str  # the problem code of the injected cause
    what: str  # the fault, in words
    # logdir | console | launch (python -m torch.distributed.launch) | spawn | python |
    # env (one plain python per rank, RANK/WORLD_SIZE/MASTER_* set by the job script, as under
    # srun without --label: the ranks' output interleaved in one console) | accelerate |
    # lightning
    launcher: str = "logdir"
    env: dict[str, str] = field(default_factory=dict)
    nproc: int = 2
    torchrun_args: Callable[[int], list[str]] | None = None  # extra args, given a port
    mention: str = ""  # for "unexplained": the exception explain must quote
    hold_port: bool = False  # bind the master port before the launch (port in use)
    banner: bytes = b""  # hold_port: the holder greets each connection so (an sshd, say)
    # launcher "env": rank -> variables that rank gets in place of the right ones
    rank_env: dict[int, dict[str, str]] = field(default_factory=dict)
    fresh: bool = False  # added after the fixes were written: a measure, not tuned on
    world: str = "local"  # local | netns | shm | readonly | cgroup | slurm (real_runs_worlds)
    nodes: int = 1  # netns: namespace hosts, one torchrun each
    node_args: Callable[[Any, int, int], list[str]] | None = None  # (cluster, node, port)
    prepare: Callable[[Any, int], None] | None = None  # netns: the fault (cluster, port)
    high_net: bool = False  # netns: host addresses in 192.168.x (above 127.0.1.1)
    extra_net: bool = False  # netns: every host also has eth1 on a second network
    memory_limit: int = 0  # cgroup: bytes
    script: dict[str, str] = field(default_factory=dict)  # netns: exported by a `sh -x` script
    deadline_s: float = DEADLINE_S  # a run that must outlast torchrun's 30 s SIGTERM grace
    sigterm_after_s: float = 0  # local: the launcher gets SIGTERM then (a scheduler's limit)
    nofile: int = 0  # local: the launcher runs under `ulimit -n nofile`
    signum: int = signal.SIGTERM  # the signal sigterm_after_s sends (SIGINT: Ctrl-C)
    stale_init_file: bool = False  # local: an earlier run, killed, left the file:// init file
    node_python: dict[int, str] = field(default_factory=dict)  # netns: node -> another venv's
    train: str = TRAIN  # the job's script (bench/real_runs_gpu_train.py for world gpu)
    # the code when the venv's torch is a CUDA build on this GPU-less host (a fault that asks
    # a CPU-only torch for CUDA or NCCL then meets no driver, no device): "" = ``expected``
    expected_cuda_build: str = ""
    # world slurm: the job script sbatch submits ({port}: a free port), and when to scancel it
    sbatch: str = ""
    scancel_after_s: float = 0
    script_in_log: bool = False  # slurm: the user gives explain the job script too

    def expect(self) -> str:
        """The code this run should give with the venv's torch build."""
        return self.expected_cuda_build if self.expected_cuda_build and _cuda_build() \
            else self.expected


# The logging a user turns on to see more: torchrun's (LOGLEVEL), c10's C++ logs
# (TORCH_CPP_LOG_LEVEL) and the collective checks (TORCH_DISTRIBUTED_DEBUG).
VERBOSE = {"LOGLEVEL": "INFO", "TORCH_CPP_LOG_LEVEL": "INFO", "TORCH_DISTRIBUTED_DEBUG": "DETAIL"}

SCENARIOS = [
    Scenario("user-exception", "unexplained",
             "rank 1 raises KeyError('labels') in the user's code at step 3",
             env={"FAULT": "exception", "RECORD": "1"}, mention="KeyError: 'labels'"),
    Scenario("user-exception-console", "unexplained",
             "the same KeyError, console only (python -m torch.distributed.run, no --log-dir)",
             launcher="console", env={"FAULT": "exception"}, mention="KeyError: 'labels'"),
    Scenario("sigkill", "host-out-of-memory",
             "rank 1 SIGKILLed mid-training (what the kernel's OOM killer does)",
             env={"FAULT": "sigkill", "RECORD": "1"}),
    Scenario("sigkill-console", "host-out-of-memory",
             "rank 1 SIGKILLed, console only", launcher="console",
             env={"FAULT": "sigkill"}, nproc=3),
    Scenario("rank0-eval-timeout", "rank-zero-only-step-timeout",
             "rank 0 alone evaluates for 11 s; the process-group timeout is 5 s",
             env={"FAULT": "eval", "FAULT_RANK": "9", "RECORD": "1"}),
    Scenario("rank0-eval-timeout-console", "rank-zero-only-step-timeout",
             "rank 0 alone evaluates past the 5 s timeout, console only (3 ranks)",
             launcher="console", env={"FAULT": "eval", "FAULT_RANK": "9"}, nproc=3),
    Scenario("mismatch-op", "collective-desync",
             "rank 1 runs broadcast where rank 0 runs all_reduce",
             env={"FAULT": "mismatch-op", "RECORD": "1"}),
    Scenario("mismatch-op-detail", "collective-desync",
             "broadcast vs all_reduce with TORCH_DISTRIBUTED_DEBUG=DETAIL",
             env={"FAULT": "mismatch-op", "TORCH_DISTRIBUTED_DEBUG": "DETAIL", "RECORD": "1"}),
    Scenario("mismatch-size", "collective-size-mismatch",
             "rank 1 all_reduces a tensor twice the size of rank 0's",
             env={"FAULT": "mismatch-size", "RECORD": "1"}),
    Scenario("mismatch-size-detail", "collective-size-mismatch",
             "different sizes with TORCH_DISTRIBUTED_DEBUG=DETAIL",
             env={"FAULT": "mismatch-size", "TORCH_DISTRIBUTED_DEBUG": "DETAIL",
                  "RECORD": "1"}),
    Scenario("rank-exits-early", "rank-never-joined",
             "rank 1 exits (status 0) before the next collective",
             env={"FAULT": "exit", "RECORD": "1"}),
    Scenario("disk-full", "disk-full",
             "rank 1 saves a checkpoint to a full device (/dev/full)",
             env={"FAULT": "disk-full", "RECORD": "1"}),
    Scenario("master-addr-unresolvable", "master-addr-unresolvable",
             "MASTER_ADDR is a name that does not resolve",
             torchrun_args=lambda port: ["--master-addr", "no-such-host.invalid",
                                         "--master-port", str(port),
                                         "--rdzv-conf", "timeout=8"]),
    Scenario("master-port-in-use", "master-port-in-use",
             "MASTER_PORT is already bound by another process", hold_port=True),
    Scenario("rendezvous-one-node", "node-missing",
             "--nnodes 2 with one node started (c10d rendezvous, short join timeout)",
             nproc=1,
             torchrun_args=lambda port: ["--nnodes", "2", "--rdzv-backend", "c10d",
                                         "--rdzv-endpoint", f"127.0.0.1:{port}",
                                         "--rdzv-conf", "join_timeout=6,last_call_timeout=1",
                                         "--max-restarts", "0"]),
    Scenario("env-missing", "launcher-env-missing",
             "the script run with plain python: no RANK/WORLD_SIZE/MASTER_ADDR",
             launcher="python", env={"FAULT": "none"}),
    Scenario("spawn-exception", "unexplained",
             "mp.spawn: rank 1 raises KeyError('labels')", launcher="spawn",
             env={"FAULT": "exception"}, mention="KeyError: 'labels'"),
    Scenario("spawn-sigkill", "host-out-of-memory",
             "mp.spawn: rank 1 SIGKILLed", launcher="spawn", env={"FAULT": "sigkill"}),
    # Added after every fix above was written, and not tuned on: a fresh measure.
    Scenario("fresh-rank0-valueerror", "unexplained",
             "rank 0 of 3 raises ValueError in its data code", nproc=3, fresh=True,
             env={"FAULT": "exception-data", "FAULT_RANK": "0", "RECORD": "1"},
             mention="ValueError: could not parse record"),
    Scenario("fresh-sigkill-rank2-of-3", "host-out-of-memory",
             "rank 2 of 3 SIGKILLed", nproc=3, fresh=True,
             env={"FAULT": "sigkill", "FAULT_RANK": "2", "RECORD": "1"}),
    Scenario("fresh-sigsegv", "rank-killed", "rank 1 dies of SIGSEGV (native crash)",
             fresh=True, env={"FAULT": "sigsegv", "RECORD": "1"}),
    Scenario("fresh-rank1-slow-save", "rank-zero-only-step-timeout",
             "rank 1 alone saves a checkpoint past the 5 s timeout", fresh=True,
             env={"FAULT": "slow-save", "FAULT_RANK": "1", "RECORD": "1"}),
    Scenario("fresh-spawn-mismatch-op", "collective-desync",
             "mp.spawn: broadcast against all_reduce", launcher="spawn", fresh=True,
             env={"FAULT": "mismatch-op"}),
    Scenario("fresh-disk-full-console", "disk-full",
             "a checkpoint to /dev/full, console only", launcher="console", fresh=True,
             env={"FAULT": "disk-full"}),
    # What a user turns on to debug (stop 29): torchrun's and c10's INFO logging and
    # TORCH_DISTRIBUTED_DEBUG=DETAIL, whose monitored barrier before every collective names
    # the rank that did not come, whether it was busy, stuck or dead.
    Scenario("verbose-healthy", "none",
             "no fault, with LOGLEVEL=INFO, TORCH_CPP_LOG_LEVEL=INFO and DETAIL",
             env={"FAULT": "none", **VERBOSE, "RECORD": "1"}),
    Scenario("verbose-user-exception", "unexplained",
             "rank 1 raises KeyError('labels'), verbose logging and DETAIL",
             env={"FAULT": "exception", **VERBOSE, "RECORD": "1"}, mention="KeyError: 'labels'"),
    Scenario("verbose-sigkill", "host-out-of-memory",
             "rank 1 SIGKILLed, verbose logging and DETAIL",
             env={"FAULT": "sigkill", **VERBOSE, "RECORD": "1"}),
    Scenario("verbose-rank-exits-early", "rank-never-joined",
             "rank 1 exits (status 0) before the next collective, verbose logging and DETAIL",
             env={"FAULT": "exit", **VERBOSE, "RECORD": "1"}),
    # torchrun --max-restarts 2: every attempt fails; the console and the log-dir tree
    # (attempt_0, attempt_1, ...) hold all of them, the summary only the last one's.
    Scenario("restarts-user-exception", "unexplained",
             "rank 1 raises KeyError('labels') in each of 3 attempts (--max-restarts 2)",
             env={"FAULT": "exception", "RECORD": "1"}, mention="KeyError: 'labels'",
             torchrun_args=lambda port: ["--max-restarts", "2", "--master-port", str(port)]),
    Scenario("restarts-sigkill", "host-out-of-memory",
             "rank 1 SIGKILLed in each attempt (--max-restarts 2)",
             env={"FAULT": "sigkill", "RECORD": "1"},
             torchrun_args=lambda port: ["--max-restarts", "2", "--master-port", str(port)]),
    # stop 30: the attempts fail differently; the first one is the cause
    Scenario("restarts-first-differs", "unexplained",
             "rank 1 raises KeyError('labels') in attempt 0 and is SIGKILLed in attempt 1 "
             "(--max-restarts 1)", env={"FAULT": "exception", "FAULT_LATER": "sigkill",
                                        "RECORD": "1"}, mention="KeyError: 'labels'",
             torchrun_args=lambda port: ["--max-restarts", "1", "--master-port", str(port)]),
    Scenario("restarts-verbose-sigkill", "host-out-of-memory",
             "rank 1 SIGKILLed in each attempt (--max-restarts 1), torchrun's INFO logging",
             env={"FAULT": "sigkill", "LOGLEVEL": "INFO", "RECORD": "1"},
             torchrun_args=lambda port: ["--max-restarts", "1", "--master-port", str(port)]),
    Scenario("verbose-rank1-slow-save", "rank-zero-only-step-timeout",
             "rank 1 alone saves a checkpoint past the 5 s timeout, verbose logging and DETAIL",
             env={"FAULT": "slow-save", "FAULT_RANK": "1", **VERBOSE, "RECORD": "1"}),
]


def static_two(master: str) -> Callable[[Any, int, int], list[str]]:
    """torchrun's static rendezvous over two namespace hosts, ``--master-addr master``."""
    return lambda c, i, port: ["--nnodes", "2", "--node-rank", str(i), "--master-addr", master,
                               "--master-port", str(port), "--rdzv-conf", "timeout=8"]


def c10d_two(endpoint: Callable[[Any], str]) -> Callable[[Any, int, int], list[str]]:
    """c10d rendezvous over two namespace hosts at ``endpoint(cluster)``, short timeouts."""
    return lambda c, i, port: ["--nnodes", "2", "--rdzv-backend", "c10d", "--rdzv-endpoint",
                               f"{endpoint(c)}:{port}", "--rdzv-conf",
                               "join_timeout=8,read_timeout=6,last_call_timeout=1",
                               "--max-restarts", "0"]


def only_port_open(c: Any, port: int) -> None:
    """node0 answers new TCP connections from the network with a reset, but on ``port``.

    REJECT, not DROP: a dropped SYN makes gloo's pair connect wait out the kernel's retries
    (past the bench's deadline, a log that ends in a hang); a reset fails it in seconds."""
    h = c.hosts[0]
    h.iptables("-A", "INPUT", "-i", "lo", "-j", "ACCEPT")
    h.iptables("-A", "INPUT", "-p", "tcp", "!", "--syn", "-j", "ACCEPT")  # replies, established
    h.iptables("-A", "INPUT", "-p", "tcp", "--dport", str(port), "-j", "ACCEPT")
    h.iptables("-A", "INPUT", "-p", "tcp", "-j", "REJECT", "--reject-with", "tcp-reset")


def ifname_without_address(c: Any, port: int) -> None:
    """node0 gets ``gloo0``: an interface that is up and has no IPv4 address."""
    h = c.hosts[0]  # a veth pair (kernels without the dummy module); no IPv6 link-local either
    h.exec_admin(["ip", "link", "add", "gloo0", "type", "veth", "peer", "name", "gloo0p"])
    for dev in ("gloo0", "gloo0p"):
        h.exec_admin(["ip", "link", "set", dev, "addrgenmode", "none", "up"])


# Real worlds for the misses of issue 21 (namespace hosts, a tiny /dev/shm, a memory cgroup):
# bench/real_runs_worlds.py makes and removes them; each is skipped where it cannot be made.
WORLD_SCENARIOS = [
    Scenario("netns-master-addr-not-in-hosts", "master-addr-unresolvable",
             "two hosts, static rendezvous, --master-addr node0: node1's /etc/hosts lacks node0",
             world="netns", nodes=2, nproc=1, node_args=static_two("node0"),
             prepare=lambda c, port: worlds.hosts_without(c, 1, "node0")),
    Scenario("netns-own-hostname-not-in-hosts", "hostname-loopback",
             "two hosts on 192.168.x: node1's own name is missing from its /etc/hosts, so gloo "
             "falls back to the loopback address", world="netns", nodes=2, nproc=1, high_net=True,
             node_args=static_two("node0"), env={"RECORD": "1"},
             prepare=lambda c, port: worlds.hosts_without(c, 1, "node1")),
    Scenario("netns-hostname-loopback", "hostname-loopback",
             "two hosts on 192.168.x: node1's name resolves to 127.0.1.1 in its /etc/hosts",
             world="netns", nodes=2, nproc=1, high_net=True, node_args=static_two("node0"),
             env={"RECORD": "1"}, prepare=lambda c, port: c.hosts[1].set_self_loopback()),
    Scenario("netns-endpoint-not-recognised", "endpoint-not-recognised",
             "c10d --rdzv-endpoint is node0's eth1 address, which node0's name does not "
             "resolve to: no agent hosts the store", world="netns", nodes=2, nproc=1,
             extra_net=True, node_args=c10d_two(lambda c: c.hosts[0].extra_addr)),
    Scenario("netns-master-addr-other-node", "master-addr-not-rank0-node",
             "static rendezvous, --master-addr node1 while node0 is --node-rank 0",
             world="netns", nodes=2, nproc=1, node_args=static_two("node1")),
    Scenario("socket-ifname-missing", "socket-ifname-invalid",
             "GLOO_SOCKET_IFNAME=eth9, an interface this host does not have",
             env={"GLOO_SOCKET_IFNAME": "eth9", "RECORD": "1"}),
    Scenario("netns-socket-ifname-no-address", "socket-ifname-invalid",
             "GLOO_SOCKET_IFNAME=gloo0, an interface that is up with no IPv4 address",
             world="netns", nodes=1, nproc=2, prepare=ifname_without_address,
             node_args=lambda c, i, port: ["--master-port", str(port)],
             env={"GLOO_SOCKET_IFNAME": "gloo0", "RECORD": "1"}),
    Scenario("netns-socket-ifname-lo", "socket-ifname-unreachable",
             "two hosts whose job script (set -x) exports GLOO_SOCKET_IFNAME=lo",
             world="netns", nodes=2, nproc=1, node_args=static_two("node0"),
             script={"GLOO_SOCKET_IFNAME": "lo"}, env={"RECORD": "1"}),
    Scenario("netns-peer-ports-rejected", "peer-ports-blocked",
             "two hosts: node0's firewall rejects (TCP reset) new connections to every port but "
             "the rendezvous port", world="netns", nodes=2, nproc=1,
             node_args=static_two("node0"), env={"RECORD": "1"}, prepare=only_port_open),
    Scenario("netns-store-port-dropped", "endpoint-unreachable",
             "two hosts: node0's firewall drops the master port (static rendezvous)",
             world="netns", nodes=2, nproc=1, node_args=static_two("node0"),
             prepare=lambda c, port: c.hosts[0].drop_port(port)),
    Scenario("shm-too-small", "dev-shm-too-small",
             "DataLoader workers hand 4 MiB batches over a 1 MiB /dev/shm (unshare -m)",
             world="shm", env={"DATALOADER": "1", "FAULT": "none", "RECORD": "1"}),
    Scenario("cgroup-oom", "host-out-of-memory",
             "rank 1 grows past a 1.5 GiB memory cgroup; the kernel's OOM killer ends it",
             world="cgroup", memory_limit=3 << 29, env={"FAULT": "oom", "RECORD": "1"}),
]
SCENARIOS += WORLD_SCENARIOS


def only_port_open_dropped(c: Any, port: int) -> None:
    """node0 silently drops new TCP connections from the network, but to ``port`` (DROP:
    the firewall most sites have, no reset; tests.cluster.netns ``drop_all_tcp_except``)."""
    c.hosts[0].drop_all_tcp_except([port])


def node_rank_zero_twice(c: Any, i: int, port: int) -> list[str]:
    """Static rendezvous where both nodes are given --node-rank 0 (a job script's copy)."""
    return ["--nnodes", "2", "--node-rank", "0", "--master-addr", "node0",
            "--master-port", str(port), "--rdzv-conf", "timeout=8"]


def master_port_per_node(c: Any, i: int, port: int) -> list[str]:
    """Static rendezvous where node1 is given another --master-port than node0."""
    return ["--nnodes", "2", "--node-rank", str(i), "--master-addr", "node0",
            "--master-port", str(port + i), "--rdzv-conf", "timeout=8"]


def slow_uplink(c: Any, port: int) -> None:
    """node1's link shaped to 1 mbit/s (tc tbf): a 16 MiB all_reduce outlasts the timeout."""
    c.hosts[1].rate_limit("1mbit")


# Stop 30: failures users hit that no scenario above has, recorded before any rule was written
# for them (the first score in the commit that added them is the honest measure).
STOP30 = [
    Scenario("s30-rank-sigstop", "collective-timeout",
             "rank 1 is stopped (SIGSTOP) at step 3; rank 0 waits out the 5 s timeout",
             env={"FAULT": "sigstop", "RECORD": "1"}, deadline_s=55),
    Scenario("s30-loader-worker-killed", "host-out-of-memory",
             "a DataLoader worker of rank 1 is SIGKILLed (what the OOM killer does)",
             env={"FAULT": "loader-worker-kill", "DATALOADER": "1", "RECORD": "1"}),
    Scenario("s30-open-file-limit", "open-file-limit",
             "ulimit -n 64; DataLoader workers hand over batches of 256 small tensors, one "
             "descriptor each", nofile=64, env={"FAULT": "none", "DATALOADER": "pieces",
                                                "RECORD": "1"}),
    Scenario("s30-missing-checkpoint", "unexplained",
             "rank 1 alone cannot find the checkpoint it reloads (FileNotFoundError)",
             env={"FAULT": "missing-checkpoint", "RECORD": "1"},
             mention="FileNotFoundError"),
    Scenario("s30-ddp-unused-parameters", "ddp-unused-parameters",
             "DDP (find_unused_parameters=False) over a model with a head the loss skips",
             env={"FAULT": "ddp-unused", "RECORD": "1"}),
    Scenario("s30-ddp-param-shapes", "ddp-model-mismatch",
             "rank 1 builds a layer 48 wide where rank 0 builds it 64 wide, then DDP",
             env={"FAULT": "ddp-shape", "RECORD": "1"}),
    Scenario("s30-agent-sigterm", "run-interrupted",
             "torchrun gets SIGTERM 8 s into a slow run (a scheduler's time limit)",
             env={"FAULT": "none", "STEP_SLEEP_S": "3", "RECORD": "1"}, sigterm_after_s=8),
    Scenario("s30-netns-peer-ports-dropped", "peer-ports-blocked",
             "two hosts: node0's firewall drops (no reset) new connections to every port but "
             "the rendezvous port", world="netns", nodes=2, nproc=1,
             node_args=static_two("node0"), env={"RECORD": "1"}, prepare=lambda c, port:
             only_port_open_dropped(c, port)),
    Scenario("s30-netns-same-node-rank", "rank-overlap",
             "two hosts both started with --node-rank 0 (static rendezvous)", world="netns",
             nodes=2, nproc=1, node_args=node_rank_zero_twice, env={"RECORD": "1"}),
    Scenario("s30-netns-master-port-differs", "endpoint-refused",
             "two hosts, static rendezvous: node1's --master-port is node0's plus one",
             world="netns", nodes=2, nproc=1, node_args=master_port_per_node),
    Scenario("s30-netns-slow-link", "collective-timeout",
             "two hosts, node1's link shaped to 1 mbit/s: a 16 MiB all_reduce outlasts the "
             "5 s timeout", world="netns", nodes=2, nproc=1, node_args=static_two("node0"),
             env={"WIDTH": "2048", "RECORD": "1"}, prepare=slow_uplink),
]
SCENARIOS += STOP30


def nproc_per_node_differs(c: Any, i: int, port: int) -> list[str]:
    """Static rendezvous where node0 runs 1 rank and node1 2 (``--nproc-per-node`` comes
    after the bench's own, and argparse keeps the last)."""
    return [*static_two("node0")(c, i, port), f"--nproc-per-node={i + 1}"]


# Stop 30, second batch (``s30b-*``): recorded and scored with main's explain before any rule
# was written for them (the first score is in the commit that added them).
STOP30B = [
    Scenario("s30b-ddp-uneven-inputs", "collective-desync",
             "DDP, rank 1's shard has 2 batches fewer and no Join: it waits in the final "
             "barrier while rank 0 all_reduces gradients, until the 5 s timeout",
             env={"FAULT": "ddp-uneven", "RECORD": "1"}),
    Scenario("s30b-loader-worker-exception", "unexplained",
             "a DataLoader worker of rank 1 raises ValueError in the user's dataset",
             env={"FAULT": "loader-worker-error", "DATALOADER": "1", "RECORD": "1"},
             mention="ValueError: corrupt sample 20"),
    Scenario("s30b-netns-nproc-differs", "none",
             "two hosts started with --nproc-per-node 1 and 2: torchrun sums them (world 3) "
             "and the job finishes", world="netns", nodes=2, nproc=1,
             node_args=nproc_per_node_differs, env={"RECORD": "1"}),
    Scenario("s30b-stale-init-file", "init-file-stale",
             "init_method=file:// whose file an earlier, killed run left behind",
             env={"FAULT": "none", "RECORD": "1"}, stale_init_file=True),
    # (scored "unexplained" quoting the ValueError until stop 31 registered its own code)
    Scenario("s30b-init-twice", "process-group-init-twice",
             "rank 1 calls init_process_group a second time at step 3",
             env={"FAULT": "init-twice", "RECORD": "1"}),
    Scenario("s30b-subgroup-some-ranks", "collective-desync",
             "rank 1 alone calls dist.new_group(ranks=[0, 1]); rank 0 goes on to all_reduce",
             env={"FAULT": "subgroup-some", "RECORD": "1"}),
    Scenario("s30b-rank-sys-exit-1", "rank-exited",
             "rank 1 calls sys.exit(1) at step 3: no traceback",
             env={"FAULT": "exit-1", "RECORD": "1"}),
    Scenario("s30b-agent-sigint", "run-interrupted",
             "Ctrl-C: torchrun gets SIGINT 8 s into a slow run (its workers are in their own "
             "sessions, so only torchrun gets it)",
             env={"FAULT": "none", "STEP_SLEEP_S": "3", "RECORD": "1"}, sigterm_after_s=8,
             signum=signal.SIGINT),
    Scenario("s30b-mismatch-dtype", "collective-size-mismatch",
             "rank 1 all_reduces a float64 gradient where rank 0's is float32",
             env={"FAULT": "mismatch-dtype", "RECORD": "1"}),
    Scenario("s30b-mismatch-dtype-detail", "collective-size-mismatch",
             "float64 against float32 with TORCH_DISTRIBUTED_DEBUG=DETAIL",
             env={"FAULT": "mismatch-dtype", "TORCH_DISTRIBUTED_DEBUG": "DETAIL",
                  "RECORD": "1"}),
]
# Two nodes on different torch releases (node0 2.5.1 from /work/venv-torch25, node1 this
# venv's), where that venv exists; recorded after the first score of the batch above.
TORCH25 = "/work/venv-torch25/bin/python"
if Path(TORCH25).exists():
    STOP30B.append(Scenario(
        "s30b-netns-torch-versions-differ", "version-mismatch",
        "two hosts, static rendezvous: node0 runs torch 2.5.1's torchrun and python, node1 "
        "this venv's (2.13)", world="netns", nodes=2, nproc=1, node_args=static_two("node0"),
        env={"RECORD": "1"}, node_python={0: TORCH25}))
SCENARIOS += STOP30B


# Stop 32 (``s32-*``): recorded and scored with main's explain before any rule was written
# for them (the first score is in the commit that added them).
STOP32 = [
    Scenario("s32-ddp-ready-twice", "ddp-param-ready-twice",
             "DDP(find_unused_parameters=True) over a model whose layer runs in two reentrant "
             "checkpoint() blocks", env={"FAULT": "ddp-ready-twice", "RECORD": "1"}),
    Scenario("s32-bcast-object-rank0-only", "collective-desync",
             "rank 0 alone calls broadcast_object_list at step 3 (an `if rank == 0` block); "
             "rank 1 goes on to all_reduce", env={"FAULT": "bcast-object", "FAULT_RANK": "0",
                                                  "RECORD": "1"}),
    Scenario("s32-no-init", "process-group-not-initialized",
             "the script never calls init_process_group and uses torch.distributed",
             env={"FAULT": "no-init", "RECORD": "1"}),
    Scenario("s32-nccl-on-cpu-torch", "backend-unavailable",
             "a GPU job's script (backend nccl) launched on a CPU-only torch",
             env={"FAULT": "backend-nccl", "RECORD": "1"},
             expected_cuda_build="cuda-unusable"),  # a CUDA build: no device for NCCL
    Scenario("s32-spawn-args-not-tuple", "spawn-args-mismatch",
             "mp.spawn(main, args=n, nprocs=n): args is an int, not a tuple", launcher="spawn",
             env={"FAULT": "spawn-args"}),
    Scenario("s32-spawn-world-plus-one", "world-size-mismatch",
             "mp.spawn of 2 processes whose init_process_group gets world_size 3 (typed by "
             "hand)", launcher="spawn", env={"FAULT": "world-plus-one"}),
    Scenario("s32-launch-local-rank-arg", "local-rank-arg-unread",
             "python -m torch.distributed.launch (no --use-env) of a script whose parser "
             "declares only --local_rank", launcher="launch",
             env={"FAULT": "none", "ARGPARSE": "1"}),
    Scenario("s32-checkpoint-dir-readonly", "checkpoint-failed",
             "rank 1 saves its checkpoint at step 3 into a directory on a read-only mount",
             world="readonly", env={"FAULT": "save-readonly", "RECORD": "1"}),
    Scenario("s32-netns-rdzv-endpoint-no-route", "endpoint-no-route",
             "two hosts, c10d rendezvous at 10.123.0.1, an address on no network they have",
             world="netns", nodes=2, nproc=1, node_args=c10d_two(lambda c: "10.123.0.1")),
    # (node1 --nnodes 3 beside node0's 2, static rendezvous, was in the first score, wrong:
    # "no failure". It is not recorded: its outcome is a race. The workers form node0's world
    # of 2 and finish; the agents' exit barrier (elastic/utils/store.py barrier: the agent whose
    # add() reaches its own group_world_size sets the done key) ends at once when node0
    # arrives last and hangs both agents 300 s when node1 does, a log with no error line that
    # the bench's deadline cuts.)
]
SCENARIOS += STOP32

# Stop 32, second batch (``s32b-*``): recorded and scored with main's explain before any rule
# was written for them (the first score is in the commit that added them).
STOP32B = [
    Scenario("s32b-all-gather-uneven", "collective-size-mismatch",
             "all_gather at step 3 where rank 1's tensor has 2 elements and rank 0's 1",
             env={"FAULT": "gather-uneven", "RECORD": "1"}),
    Scenario("s32b-rank-sigterm", "rank-killed",
             "rank 1 gets SIGTERM at step 3 from outside torchrun (a user's kill, a node "
             "agent)", env={"FAULT": "sigterm", "RECORD": "1"}),
    Scenario("s32b-ddp-device-ids-on-cpu", "ddp-module-device-invalid",
             "DDP(model, device_ids=[local_rank]) over a model on the CPU",
             env={"FAULT": "ddp-device-ids", "RECORD": "1"}),
    Scenario("s32b-cuda-on-cpu-torch", "cpu-only-torch-on-gpu-node",
             "the script calls torch.cuda.set_device(local_rank) under a CPU-only torch",
             env={"FAULT": "cuda-set-device", "RECORD": "1"},
             expected_cuda_build="cuda-unusable"),  # a CUDA build: no NVIDIA driver here
    Scenario("s32b-import-missing-one-rank", "unexplained",
             "rank 1 alone cannot import a package (ModuleNotFoundError) before "
             "init_process_group; rank 0 waits for it", env={"FAULT": "import-missing",
                                                             "RECORD": "1"},
             mention="ModuleNotFoundError: No module named 'wandb_logger_plugin'"),
    Scenario("s32b-spawn-master-addr-unresolvable", "master-addr-unresolvable",
             "mp.spawn with MASTER_ADDR=no-such-host.invalid", launcher="spawn",
             env={"FAULT": "none", "MASTER_ADDR": "no-such-host.invalid"}),
    Scenario("s32b-spawn-master-port-in-use", "master-port-in-use",
             "mp.spawn with MASTER_PORT held by another program", launcher="spawn",
             env={"FAULT": "none"}, hold_port=True),
]
SCENARIOS += STOP32B

# Stop 32, third batch (``s32c-*``): recorded and scored with main's explain before any rule
# was written for them (the first score is in the commit that added them).
STOP32C = [
    Scenario("s32c-script-missing", "launch-failed",
             "torchrun of a script path that does not exist on this node (another working "
             "directory)", env={"FAULT": "none"}, train="bench/no_such_train.py"),
    # (first scored with both ranks asleep, a bench bug: mp.spawn sets RANK after the check;
    # that run was healthy and explain said so, scored wrong against this code)
    Scenario("s32c-rank0-slow-before-init", "rank-zero-only-step-timeout",
             "mp.spawn: rank 0 downloads its dataset (30 s) before init_process_group, whose "
             "store it hosts; rank 1's store client gives up after its retries (~13 s)",
             launcher="spawn", env={"FAULT": "slow-before-init", "FAULT_RANK": "0",
                                    "SLOW_S": "30"}),
    # (a variant where rank 0 is busy 7-11 s, so that TCPStore's client retry (TCPStore.cpp,
    # "retrying (try=0, ...)" after a random 2-4 s delay) may get through, was dropped: whether
    # it does is a race, and the runs that got through still printed socket.cpp's [E] timeout)
    Scenario("s32c-nproc-gpu-on-cpu-host", "too-few-gpus",
             "torchrun --nproc-per-node gpu on a host without a GPU",
             env={"FAULT": "none"},
             torchrun_args=lambda port: ["--nproc-per-node=gpu", "--master-port", str(port)]),
    Scenario("s32c-barrier-after-destroy", "process-group-not-initialized",
             "every rank calls dist.barrier() after destroy_process_group()",
             env={"FAULT": "barrier-after-destroy", "RECORD": "1"}),
]
SCENARIOS += STOP32C


def c10d_two_ids(c: Any, i: int, port: int) -> list[str]:
    """c10d rendezvous at node0 where each node's job script passes its own --rdzv-id."""
    return [*c10d_two(lambda c: "node0")(c, i, port), "--rdzv-id", f"job-{i}"]


# Stop 32, fourth batch (``s32d-*``): recorded and scored with main's explain before any rule
# was written for them (the first score is in the commit that added them).
STOP32D = [
    Scenario("s32d-nofile-store-host", "open-file-limit",
             "ulimit -n 20 for torchrun and 8 workers: the agent's store cannot accept every "
             "worker's connection", nproc=8, nofile=20, env={"FAULT": "none", "RECORD": "1"}),
    Scenario("s32d-netns-stale-hosts-entry", "dial-name-wrong-address",
             "two hosts, static rendezvous at node0: node1's /etc/hosts maps node0 to "
             "10.77.0.1, an address no host has (a stale entry)", world="netns", nodes=2,
             nproc=1, node_args=static_two("node0"),
             prepare=lambda c, port: worlds.hosts_remap(c, 1, "node0", "10.77.0.1")),
    Scenario("s32d-netns-rdzv-id-differs", "rendezvous-timeout",
             "two hosts, c10d rendezvous at node0, each with its own --rdzv-id", world="netns",
             nodes=2, nproc=1, node_args=c10d_two_ids),
]
SCENARIOS += STOP32D

# Stop 32, fifth batch (``s32e-*``): recorded and scored with main's explain before any rule
# was written for it.
STOP32E = [
    Scenario("s32e-file-init-readonly", "init-file-unusable",
             "init_method=file:// on a directory mounted read-only (a shared filesystem "
             "mounted ro on the compute nodes)", world="readonly",
             env={"FAULT": "none", "INIT_IN_CKPT_DIR": "1", "RECORD": "1"}),
]
SCENARIOS += STOP32E
def static_node_ranks(ranks: tuple[int, ...]) -> Callable[[Any, int, int], list[str]]:
    """Static rendezvous at node0 where node ``i`` passes ``--node-rank ranks[i]``."""
    def args(c: Any, i: int, port: int) -> list[str]:
        flags = static_two("node0")(c, i, port)
        flags[flags.index("--node-rank") + 1] = str(ranks[i])
        return flags
    return args


# Stop 33 (``s33-*``): recorded and scored with main's explain before any rule was written
# for them (the first score is in the commit that added them).
STOP33 = [
    Scenario("s33-rdzv-endpoint-ssh-port", "endpoint-not-a-store",
             "c10d --rdzv-endpoint 127.0.0.1:PORT where PORT is another server's (it greets "
             "each connection as sshd does)", hold_port=True,
             banner=b"SSH-2.0-OpenSSH_8.9p1 Ubuntu-3ubuntu0.6\r\n",
             torchrun_args=lambda port: ["--nnodes", "1", "--rdzv-backend", "c10d",
                                         "--rdzv-endpoint", f"127.0.0.1:{port}",
                                         "--rdzv-conf", "join_timeout=8,read_timeout=6"]),
    Scenario("s33-netns-node-rank-out-of-range", "node-rank-invalid",
             "two hosts, static rendezvous at node0: node1's job script passes --node-rank 2 "
             "(a typo, or the rank of a larger job)", world="netns", nodes=2, nproc=1,
             node_args=static_node_ranks((0, 2))),
    Scenario("s33-env-rank-out-of-range", "rank-out-of-range",
             "two python processes with RANK/WORLD_SIZE from the job script: the second gets "
             "RANK=2 of WORLD_SIZE=2 (rank counted from 1)", launcher="env",
             env={"FAULT": "none"}, rank_env={1: {"RANK": "2"}}),
    Scenario("s33-env-world-size-differs", "world-size-differs",
             "two python processes: rank 0 gets WORLD_SIZE=2, rank 1 WORLD_SIZE=3 (each node "
             "computes it on its own)", launcher="env", env={"FAULT": "none"},
             rank_env={1: {"WORLD_SIZE": "3"}}),
    Scenario("s33-env-master-port-out-of-range", "master-port-unavailable",
             "two python processes whose job script computes MASTER_PORT=70000 (a base port "
             "plus the job id)", launcher="env", env={"FAULT": "none", "MASTER_PORT": "70000"}),
    Scenario("s33-ddp-model-extra-layer", "ddp-model-mismatch",
             "rank 1's model has one layer more (a rank-dependent branch) when DDP wraps it",
             env={"FAULT": "ddp-extra-layer", "RECORD": "1"}),
    Scenario("s33-tcp-init-unresolvable", "master-addr-unresolvable",
             "init_method=tcp://no-such-host.invalid:PORT from the job's config",
             env={"FAULT": "none", "INIT_TCP": "no-such-host.invalid", "RECORD": "1"}),
    # (init_method=file:// in a directory that does not exist on the node was tried and
    # dropped: FileStore retries the open with no output and no deadline (torch 2.13, still
    # silent after 100 s with a 5 s timeout), a log with nothing to read)
    # (abstains, and should: mp.spawn keeps a crashed process's traceback in its error file
    # and reports whichever failed process its join meets first, so a lone report of a rank
    # that lost its peer cannot tell a peer that returned from one that crashed: torch
    # 1.13's spawn-exception reports the victim, rank 0, of rank 1's KeyError)
    Scenario("s33-spawn-rank-exits-early", "rank-never-joined",
             "mp.spawn: rank 1 returns (status 0) before the next collective",
             launcher="spawn", env={"FAULT": "exit"}),
    Scenario("s33-save-missing-dir", "checkpoint-failed",
             "rank 1 saves its checkpoint at step 3 into a directory that does not exist on "
             "its node", env={"FAULT": "save-missing-dir", "RECORD": "1"}),
    Scenario("s33-p2p-size-mismatch", "collective-size-mismatch",
             "rank 0 sends 64 values where rank 1 receives 32 (pipeline stages built with "
             "different configs)", env={"FAULT": "p2p-size", "RECORD": "1"}),
]
SCENARIOS += STOP33

# Stop 33, second batch (``s33b-*``): recorded and scored with main's explain before any rule
# was written for them (the first score is in the commit that added them).
STOP33B = [
    Scenario("s33b-ddp-wrapped-attribute", "ddp-wrapped-attribute",
             "every rank reads model.head through the DistributedDataParallel wrapper "
             "(single-process code)", env={"FAULT": "ddp-wrapped-attr", "RECORD": "1"}),
    Scenario("s33b-agent-sighup", "launcher-hangup",
             "torchrun gets SIGHUP 8 s into a slow run (the ssh session or terminal that "
             "started it closed)", env={"FAULT": "none", "STEP_SLEEP_S": "3", "RECORD": "1"},
             sigterm_after_s=8, signum=signal.SIGHUP),
    Scenario("s33b-netns-master-addr-loopback", "master-addr-loopback",
             "two hosts, static rendezvous, both nodes given --master-addr 127.0.0.1 (copied "
             "from a one-node script)", world="netns", nodes=2, nproc=1,
             node_args=static_two("127.0.0.1")),
    Scenario("s33b-netns-rdzv-endpoint-localhost", "endpoint-loopback",
             "two hosts, c10d rendezvous, both nodes given --rdzv-endpoint localhost:PORT",
             world="netns", nodes=2, nproc=1, node_args=c10d_two(lambda c: "localhost")),
]
SCENARIOS += STOP33B

# Jobs under a real Slurm (slurmctld, a slurmd per namespace host), submitted with sbatch; the
# job's output file is the console. One torchrun per node through srun, c10d rendezvous at the
# batch host.
SRUN_TORCHRUN = ("srun --ntasks-per-node=1 torchrun --nnodes 2 --nproc-per-node 1 "
                 "--rdzv-backend c10d --rdzv-endpoint $(hostname):{port} --rdzv-conf "
                 "join_timeout=20 --max-restarts 0 bench/real_runs_train.py\n")
JOB_HEAD = "#!/bin/bash\n#SBATCH --job-name=train\n#SBATCH --ntasks-per-node=1\n"

# Stop 33, third batch (``s33c-*``, Slurm): recorded and scored with main's explain before any
# rule was written for them (the first score is in the commit that added them).
STOP33C = [
    Scenario("s33c-slurm-without-srun", "slurm-without-srun",
             "sbatch --nodes=2 of a script that runs torchrun --nnodes 2 itself, without srun: "
             "only the batch host runs it", world="slurm", nodes=2, env={"FAULT": "none"},
             sbatch=JOB_HEAD + SRUN_TORCHRUN.replace("srun --ntasks-per-node=1 ", "")
             .replace("join_timeout=20", "join_timeout=8")),
    Scenario("s33c-slurm-without-srun-script", "slurm-without-srun",
             "the same job, its batch script given to explain beside its output",
             world="slurm", nodes=2, env={"FAULT": "none"}, script_in_log=True,
             sbatch=JOB_HEAD.replace("--ntasks-per-node=1", "--nodes=2\n#SBATCH "
                                     "--ntasks-per-node=1")
             + SRUN_TORCHRUN.replace("srun --ntasks-per-node=1 ", "")
             .replace("join_timeout=20", "join_timeout=8")),
    Scenario("s33c-slurm-job-cancelled", "slurm-job-cancelled",
             "srun torchrun on 2 nodes, a slow run, scancel'ed after 14 s", world="slurm",
             nodes=2, env={"FAULT": "none", "STEP_SLEEP_S": "3"}, scancel_after_s=14,
             sbatch=JOB_HEAD + SRUN_TORCHRUN),
    Scenario("s33c-slurm-task-exception", "unexplained",
             "srun torchrun on 2 nodes; rank 1 raises KeyError('labels') at step 3",
             world="slurm", nodes=2, env={"FAULT": "exception"}, mention="KeyError: 'labels'",
             sbatch=JOB_HEAD + SRUN_TORCHRUN),
    Scenario("s33c-slurm-srun-python", "launcher-env-missing",
             "srun of plain python on 2 nodes: Slurm sets SLURM_PROCID, not RANK / WORLD_SIZE",
             world="slurm", nodes=2, env={"FAULT": "none"},
             sbatch=JOB_HEAD + "srun python bench/real_runs_train.py\n"),
    Scenario("s33c-slurm-step-too-many-tasks", "slurm-step-rejected",
             "srun --ntasks=16 inside a 2-node allocation of 2 CPUs each", world="slurm",
             nodes=2, env={"FAULT": "none"},
             sbatch=JOB_HEAD + "srun --ntasks=16 python bench/real_runs_train.py\n"),
]
SCENARIOS += STOP33C

# Stop 33, fourth batch (``s33d-*``, Slurm): recorded and scored with main's explain before any
# rule was written for them (the first score is in the commit that added them).
STOP33D = [
    Scenario("s33d-slurm-time-limit", "slurm-job-cancelled",
             "sbatch --time=1 (one minute) of a slow srun torchrun job: Slurm ends it at its "
             "time limit", world="slurm", nodes=2, deadline_s=170,
             env={"FAULT": "none", "STEP_SLEEP_S": "30"},
             sbatch=JOB_HEAD + "#SBATCH --time=1\n" + SRUN_TORCHRUN),
    Scenario("s33d-slurm-master-addr-per-task", "master-addr-not-rank0-node",
             "srun of python on 2 nodes, each task exporting MASTER_ADDR=$(hostname) (its own "
             "node) and RANK=$SLURM_PROCID", world="slurm", nodes=2, env={"FAULT": "none"},
             sbatch=JOB_HEAD + "srun bash -c 'RANK=$SLURM_PROCID WORLD_SIZE=$SLURM_NTASKS "
             "LOCAL_RANK=0 MASTER_ADDR=$(hostname) MASTER_PORT={port} exec python "
             "bench/real_runs_train.py'\n"),
    Scenario("s33d-slurm-gres-unavailable", "slurm-job-rejected",
             "sbatch --gres=gpu:1 on a cluster whose nodes have no GPU: refused at submission",
             world="slurm", nodes=2, env={"FAULT": "none"},
             sbatch=JOB_HEAD + "#SBATCH --gres=gpu:1\n" + SRUN_TORCHRUN),
    Scenario("s33d-slurm-srun-nodelist-outside", "slurm-step-rejected",
             "srun --nodelist=node7 inside an allocation of node0 and node1", world="slurm",
             nodes=2, env={"FAULT": "none"},
             sbatch=JOB_HEAD + "srun --nodelist=node7 python bench/real_runs_train.py\n"),
]
SCENARIOS += STOP33D

# Stop 33, fifth batch (``s33e-*``, Slurm): recorded and scored with main's explain before any
# rule was written for them (the first score is in the commit that added them).
SRUN_PYTHON = ("srun bash -c 'RANK=$SLURM_PROCID WORLD_SIZE=$SLURM_NTASKS "
               "LOCAL_RANK=$SLURM_LOCALID MASTER_ADDR=$(scontrol show hostnames "
               "\"$SLURM_JOB_NODELIST\" | head -n 1) MASTER_PORT={port} exec python "
               "bench/real_runs_train.py'\n")
STOP33E = [
    Scenario("s33e-slurm-healthy-torchrun", "none",
             "srun torchrun on 2 nodes, c10d rendezvous, no fault", world="slurm", nodes=2,
             env={"FAULT": "none"}, sbatch=JOB_HEAD + SRUN_TORCHRUN),
    Scenario("s33e-slurm-healthy-srun-python", "none",
             "srun of python on 2 nodes with RANK=$SLURM_PROCID and MASTER_ADDR the first "
             "node of the allocation, no fault", world="slurm", nodes=2, env={"FAULT": "none"},
             sbatch=JOB_HEAD + SRUN_PYTHON),
    Scenario("s33e-slurm-two-torchruns-per-node", "two-launchers-on-node",
             "sbatch --ntasks-per-node=2 and a bare srun of torchrun: two launchers per node",
             world="slurm", nodes=2, env={"FAULT": "none"},
             sbatch=JOB_HEAD.replace("--ntasks-per-node=1", "--ntasks-per-node=2")
             + SRUN_TORCHRUN.replace("srun --ntasks-per-node=1 ", "srun ")),
]
SCENARIOS += STOP33E

# Stop 33, sixth batch (``s33f-*``, Slurm): recorded and scored with main's explain before any
# rule was written for them (the first score is in the commit that added them).
STOP33F = [
    Scenario("s33f-slurm-too-many-nodes", "slurm-job-rejected",
             "sbatch --nodes=3 on a cluster of 2 nodes: refused at submission", world="slurm",
             nodes=2, env={"FAULT": "none"},
             sbatch=JOB_HEAD + "#SBATCH --nodes=3\n" + SRUN_TORCHRUN),
    Scenario("s33f-slurm-export-none", "launch-failed",
             "srun --export=NONE of torchrun: the tasks lose the job's PATH (the venv), so "
             "slurmstepd cannot find torchrun", world="slurm", nodes=2, env={"FAULT": "none"},
             sbatch=JOB_HEAD + SRUN_TORCHRUN.replace("srun ", "srun --export=NONE ")),
    Scenario("s33f-slurm-kill-on-bad-exit", "rank-exited",
             "srun --kill-on-bad-exit=1 of python per rank; rank 1 calls sys.exit(1) at step 3",
             world="slurm", nodes=2, env={"FAULT": "exit-1"},
             sbatch=JOB_HEAD + SRUN_PYTHON.replace("srun ", "srun --kill-on-bad-exit=1 ")),
    Scenario("s33f-slurm-master-port-unset", "launcher-env-missing",
             "srun of python per rank with RANK, WORLD_SIZE and MASTER_ADDR set, MASTER_PORT "
             "forgotten", world="slurm", nodes=2, env={"FAULT": "none"},
             sbatch=JOB_HEAD + SRUN_PYTHON.replace(" MASTER_PORT={port}", "")),
]
SCENARIOS += STOP33F
# accelerate launch and Lightning's DDP launcher (bench/real_runs_wrappers.py)
SCENARIOS += wrappers.scenarios(Scenario)
# GPU jobs (NCCL, CUDA) where CUDA is (bench/real_runs_gpu.py)
SCENARIOS += gpu.scenarios(Scenario)


def _torch_version() -> str:
    """The venv's torch version ("2.13.0+cpu"), read from its metadata (torch is not
    imported); "" without torch."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("torch")
    except PackageNotFoundError:
        return ""


def _cuda_build() -> bool:
    """Whether the venv's torch is a CUDA build (PyPI's Linux wheels; a CPU build's version
    ends in +cpu)."""
    return bool(_torch_version()) and "+cpu" not in _torch_version()


def _torch_major() -> int:
    """The venv's torch major version (2 when it cannot be read)."""
    try:
        return int(_torch_version().split(".")[0])
    except ValueError:
        return 2


def torchrun_flags(args: list[str]) -> list[str]:
    """``args`` as this torch's torchrun spells them: torch 1.x's ``run.py`` defines only
    ``--nproc_per_node``, ``--log_dir``, ``--master_port``...; dashed aliases came in 2.0."""
    if _torch_major() >= 2:
        return args
    def old(a: str) -> str:
        flag, eq, value = a.partition("=")
        return "--" + flag[2:].replace("-", "_") + eq + value
    return [old(a) if a.startswith("--") else a for a in args]


def command(s: Scenario, logs: Path, port: int) -> list[str]:
    py = sys.executable
    if s.launcher in wrappers.LAUNCHERS:
        return wrappers.command(s, logs.parent, port)
    if s.launcher in ("python", "spawn", "env"):
        return [py, s.train]
    args = [f"--nproc-per-node={s.nproc}"]
    args += s.torchrun_args(port) if s.torchrun_args else ["--master-port", str(port)]
    if s.launcher == "launch":  # torch 1.x's launcher, still shipped (deprecated) in 2.x
        return [py, "-m", "torch.distributed.launch", *torchrun_flags(args), s.train]
    if s.launcher == "logdir":
        return [str(Path(py).parent / "torchrun"),
                *torchrun_flags([*args, "--log-dir", str(logs), "--tee", "3", "--redirects",
                                 "3"]), s.train]
    return [py, "-m", "torch.distributed.run", *torchrun_flags(args), s.train]


def node_command(s: Scenario, out: Path, port: int) -> Callable[[Any, int], list[str]]:
    """The torchrun of node ``i`` of a namespace world (one rank per node unless nproc)."""
    def argv(cluster: Any, i: int) -> list[str]:
        _, logs = worlds.node_files(out, i)
        args = s.node_args(cluster, i, port) if s.node_args else []
        python = s.node_python.get(i, sys.executable)  # torchrun starts workers with its python
        cmd = [str(Path(python).parent / "torchrun"),
               *torchrun_flags([f"--nproc-per-node={s.nproc}", *args, "--log-dir", str(logs),
                                "--tee", "3", "--redirects", "3"]), TRAIN]
        if not s.script:
            return cmd
        # a job script with `set -x`: its trace ("+ export VAR=value") is in the console
        exports = "; ".join(f"export {k}={v}" for k, v in s.script.items())
        return ["sh", "-xc", f'{exports}; exec "$@"', "sh", *cmd]
    return argv


def run_scenario(s: Scenario, out: Path) -> float:
    """Run one scenario; its console goes to out/console.log, its log-dir to out/logs."""
    out.mkdir(parents=True, exist_ok=True)
    port = free_port()
    env = {k: v for k, v in os.environ.items()
           if k not in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "LOCAL_RANK")}
    env.update({"PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1", "PG_TIMEOUT_S": "5",
                **s.env})
    if s.launcher == "spawn":
        env.update({"SPAWN": str(s.nproc), "MASTER_PORT": str(port)})
    env.update(wrappers.environ(s, port))
    t0 = time.monotonic()
    if s.world == "slurm":
        worlds.run_sbatch(s.nodes, s.sbatch.format(port=port), env, out, ROOT, s.deadline_s,
                          scancel_after_s=s.scancel_after_s)
        if s.script_in_log:  # ddpcheck explain slurm-N.out job.sbatch
            (out / "job.sbatch").write_text(s.sbatch.format(port=port))
        return time.monotonic() - t0
    if s.world == "netns":
        worlds.run_on_hosts(s.nodes, node_command(s, out, port), env, out, ROOT, s.deadline_s,
                            prepare=(lambda c: s.prepare(c, port)) if s.prepare else None,
                            high_net=s.high_net, extra_net=s.extra_net)
        return time.monotonic() - t0
    argv = command(s, out / "logs", port)
    if s.stale_init_file:
        env["INIT_FILE"] = stale_init_file(s, env, out, port)
    if s.nofile:
        argv = ["sh", "-c", f'ulimit -n {s.nofile} && exec "$@"', "sh", *argv]
    if s.world == "shm":
        argv = worlds.shm_wrapped(argv)
    if s.world == "readonly":
        env["CKPT_DIR"] = str(out / "checkpoints")
        (out / "checkpoints").mkdir()
        if env.get("INIT_IN_CKPT_DIR"):  # file:// init on the read-only mount
            env["INIT_FILE"] = str(out / "checkpoints" / "init")
        argv = worlds.readonly_wrapped(env["CKPT_DIR"], argv)
    with contextlib.ExitStack() as stack:
        if s.world == "cgroup":
            procs = stack.enter_context(worlds.memory_cgroup(s.memory_limit))
            argv = worlds.cgroup_wrapped(procs, argv)
        if "INIT_FILE" in env:
            stack.callback(Path(env["INIT_FILE"]).unlink, missing_ok=True)
        run_local(s, out, argv, env, port)
    return time.monotonic() - t0


def stale_init_file(s: Scenario, env: dict[str, str], out: Path, port: int) -> str:
    """A file:// init file left by an earlier run of the same job whose ranks were killed
    after joining (FileStore removes its file only when every rank closes it)."""
    path = Path(tempfile.gettempdir()) / f"ddpc-init-{os.getpid()}-{port}"
    path.unlink(missing_ok=True)
    earlier = command(Scenario(s.name, s.expected, s.what, launcher="console", nproc=s.nproc),
                      out / "earlier", free_port())
    subprocess.run(earlier, cwd=ROOT, env={**env, "INIT_FILE": str(path),
                                           "FAULT": "crash-after-init"},
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)
    return str(path)


def run_local(s: Scenario, out: Path, argv: list[str], env: dict[str, str], port: int) -> None:
    """One launcher on this host (maybe in a mount namespace or a cgroup), to its deadline."""
    holder = None
    if s.hold_port:  # another process already listening on the master port
        holder = socket.socket()
        holder.bind(("0.0.0.0", port))
        holder.listen()
        if s.banner:
            threading.Thread(target=greet, args=(holder, s.banner), daemon=True).start()
    try:
        with open(out / "console.log", "wb") as console:
            if s.launcher == "env":
                proc = start_env_ranks(s, argv, env, port, console)
            else:
                proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=console,
                                        stderr=subprocess.STDOUT, start_new_session=True)
            try:
                if s.sigterm_after_s:  # the launcher alone, as Slurm signals the step's task
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        proc.wait(timeout=s.sigterm_after_s)
                    if proc.poll() is None:
                        proc.send_signal(s.signum)
                proc.wait(timeout=s.deadline_s)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                print(f"  ({s.name} killed at its {s.deadline_s:.0f} s deadline)", flush=True)
            try:  # workers the launcher left behind (it normally reaps them)
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    finally:
        if holder is not None:
            holder.close()


def greet(holder: socket.socket, banner: bytes) -> None:
    """Another server's side of the port: each connection gets ``banner`` and is left open
    (an sshd's greeting; a store client reads it as its ping's answer)."""
    held = []
    with contextlib.suppress(OSError):  # the socket closed at the scenario's end
        while True:
            conn, _ = holder.accept()
            conn.sendall(banner)
            held.append(conn)


def start_env_ranks(s: Scenario, argv: list[str], env: dict[str, str], port: int,
                    console: Any) -> subprocess.Popen:
    """One ``python train.py`` per rank with the variables a job script exports (srun's
    ``RANK=$SLURM_PROCID``...), all writing to one console, in one process group: a shell
    that waits for them all, so the caller's deadline and killpg cover every rank."""
    ranks = []
    for r in range(s.nproc):
        own = {"RANK": str(r), "LOCAL_RANK": str(r), "WORLD_SIZE": str(s.nproc),
               "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
        own.update({k: v for k, v in s.env.items() if k in own})
        own.update(s.rank_env.get(r, {}))
        ranks.append(" ".join(f"{k}={v}" for k, v in own.items()) + ' "$@" &')
    script = " ".join(ranks) + " wait"
    return subprocess.Popen(["sh", "-c", script, "sh", *argv], cwd=ROOT, env=env,
                            stdout=console, stderr=subprocess.STDOUT, start_new_session=True)


def score(s: Scenario, first: str, undetermined: bool, text: str) -> str:
    if s.expect() == "unexplained":
        ok = first == "unexplained" and s.mention in text and Path(s.train).name in text
        return "right" if ok else "abstained" if undetermined else "wrong"
    if first == s.expect():
        return "right"
    return "abstained" if undetermined else "wrong"


def explain_dir(s: Scenario, out: Path) -> tuple[str, str, str, bool]:
    """(verdict via the command, verdict in process, first code, undetermined)."""
    proc = subprocess.run([str(Path(sys.executable).parent / "ddpcheck"), "explain",
                           str(out), "--json", "-"], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    data = json.loads(proc.stdout)
    causes = [p for p in data["problems"] if not p.get("consequence_of")]
    cli_first = causes[0]["code"] if causes else "none"
    text = json.dumps(data)
    cli = score(s, cli_first, data["outcome"] == "undetermined", text)  # no-failure: an answer
    ex = explain_inputs(read_inputs([str(out)], None))
    firsts = [e.problem for e in ex.found if not e.problem.consequence_of]
    first = firsts[0].code if firsts else "none"
    lib = score(s, first, ex.undetermined, ex.render_text())
    return cli, lib, first, ex.undetermined


def explain_logs_only(s: Scenario, out: Path) -> str:
    """The score on the --log-dir tree alone (no console), "" when the run wrote none."""
    if not any(f.stat().st_size for f in (out / "logs").rglob("*.log")):
        return ""  # no tree, or workers that wrote nothing (killed before their first line)
    ex = explain_inputs(read_inputs([str(out / "logs")], None))
    firsts = [e.problem for e in ex.found if not e.problem.consequence_of]
    return score(s, firsts[0].code if firsts else "none", ex.undetermined, ex.render_text())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", default=[], help="scenario names to run")
    ap.add_argument("--record", type=Path, help="write each run's files under DIR/<name>")
    ap.add_argument("--keep", type=Path, help="run in DIR (kept) instead of a temp dir")
    ap.add_argument("--explain-only", type=Path,
                    help="no runs: explain the recorded runs in DIR (a --record output)")
    args = ap.parse_args(argv)
    chosen = [s for s in SCENARIOS if not args.only or s.name in args.only]
    if args.explain_only and (args.explain_only / "MANIFEST.json").is_file():
        # the code each run was recorded to show (its torch build's, Scenario.expect)
        recorded = {e["id"]: e["cause"]
                    for e in json.loads((args.explain_only / "MANIFEST.json").read_text())}
        chosen = [replace(s, expected=recorded.get(s.name, s.expect()), expected_cuda_build="")
                  for s in chosen]
    base = Path(tempfile.mkdtemp(prefix="explain-runs-")) if not args.keep else args.keep
    counts = {v: 0 for v in VERDICTS}
    manifest = []
    print(f"{'scenario':28} {'expected':28} {'first cause':28} {'cli':9} {'engine':9} "
          f"{'logs only':9} secs")
    logs_only = {v: 0 for v in VERDICTS}
    missing: dict[str, str] = {}  # world -> why this machine cannot make it
    for s in chosen:
        out = (args.explain_only or base) / s.name
        secs = 0.0
        if args.explain_only and not out.exists():
            print(f"{s.name:28} skipped: not recorded in {args.explain_only}")
            continue
        if not args.explain_only:
            why = wrappers.unavailable(s.launcher) or missing.setdefault(
                s.world, gpu.unavailable() if s.world == "gpu" else worlds.unavailable(s.world))
            if why:
                print(f"{s.name:28} skipped: {why}")
                continue
            if out.exists():
                shutil.rmtree(out)
            try:
                secs = run_scenario(s, out)
            except (OSError, RuntimeError, subprocess.SubprocessError) as exc:  # NetnsError
                print(f"{s.name:28} skipped: its world could not be made: {exc}")
                continue
        cli, lib, first, _ = explain_dir(s, out)
        counts[lib] += 1
        alone = explain_logs_only(s, out)
        if alone:
            logs_only[alone] += 1
        print(f"{s.name:28} {s.expect():28} {first:28} {cli:9} {lib:9} {alone or '-':9} "
              f"{secs:4.1f}", flush=True)
        if cli != lib:
            print(f"  ! the command and explain_inputs disagree on {s.name}")
        built = " (this torch: a CUDA build, on a host without a GPU)" \
            if s.expect() != s.expected else ""
        manifest.append({"id": s.name, "cause": s.expect(), "fault": s.what + built,
                         "launcher": s.launcher, "mention": s.mention, "verdict": lib,
                         "fresh": s.fresh, "script": Path(s.train).name})
        if args.record:
            dest = args.record / s.name
            if dest.exists():
                shutil.rmtree(dest)
            shutil.copytree(out, dest)
            if (dest / "logs").is_dir() and not any(
                    f.stat().st_size for f in (dest / "logs").rglob("*.log")):
                shutil.rmtree(dest / "logs")  # workers that wrote nothing: no tree to read
            for d in sorted(dest.rglob("*"), reverse=True):  # a --log-dir no worker wrote to
                if d.is_dir() and not any(d.iterdir()):
                    d.rmdir()
    if not args.only and not args.explain_only:
        for name, why in wrappers.SKIPPED.items():
            print(f"{name:28} not a scenario: {why}")
    n = sum(counts.values())
    print("total " + ", ".join(f"{v} {counts[v]}/{n}" for v in VERDICTS))
    m = sum(logs_only.values())
    print(f"--log-dir tree alone (no console), {m} runs: "
          + ", ".join(f"{v} {logs_only[v]}/{m}" for v in VERDICTS))
    if args.record:  # merged with what DIR already records, by scenario
        path = args.record / "MANIFEST.json"
        ids = {e["id"] for e in manifest}
        kept = [e for e in json.loads(path.read_text()) if e["id"] not in ids] \
            if path.exists() else []
        order = {s.name: i for i, s in enumerate(SCENARIOS)}
        merged = sorted([*kept, *manifest], key=lambda e: order.get(e["id"], len(order)))
        path.write_text(json.dumps(merged, indent=1) + "\n")
    if not args.keep and not args.explain_only:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
