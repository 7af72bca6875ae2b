"""Stop 28 audit of NO FAILURE FOUND: the failure words (explain/failures.py) and the end of
a log inside NCCL's communicator init (families/formation.py), each wording as its producer
prints it, with a near miss that must not count."""

from __future__ import annotations

import pytest

from ddpcheck.explain import explain_texts
from ddpcheck.explain.engine import NOT_AN_ERROR
from ddpcheck.explain.failures import failure_records, is_failure
from ddpcheck.explain.failurewords import TEARDOWN
from ddpcheck.explain.families.formation import nccl_unfinished
from ddpcheck.explain.reader import read_text

# (a producer's line printed when a job fails or dies, a healthy line with the same words)
PAIRS = [
    # CUDA driver API CUresult names (cuGetErrorName), as triton / numba / cupy print them;
    # CUDA_ERROR_NOT_READY is an event query's answer, no failure
    ("triton.runtime.errors: CUDA_ERROR_ILLEGAL_ADDRESS", "status CUDA_ERROR_NOT_READY"),
    # the runtime's and HIP's enum names (cudaGetErrorName, hipGetErrorName)
    ("cupy_backends.cuda.api.runtime.CUDARuntimeError: cudaErrorMemoryAllocation",
     "cudaErrorNotReady (query)"),
    ("hipErrorNoBinaryForGpu: Unable to find code object for all current devices",
     "hipSuccess"),
    # glibc malloc_printerr (malloc/malloc.c) and __fortify_fail (debug/fortify_fail.c)
    ("double free or corruption (!prev)", "free memory: 120 GiB"),
    ("free(): invalid pointer", "free(): 12 GiB released"),
    ("munmap_chunk(): invalid pointer", "munmap_chunk(): ok"),
    ("malloc(): unaligned tcache chunk detected", "malloc(): 4096 bytes"),
    ("corrupted size vs. prev_size", "checkpoint size vs. previous size: +0.1%"),
    ("*** stack smashing detected ***: terminated", "stack depth detected: 12"),
    # Open MPI (orte help-orterun.txt, help-mpi-api.txt), MPICH/Intel MPI's Hydra
    ("mpirun detected that one or more processes exited with non-zero status, thus causing",
     "mpirun detected 8 slots on node-1"),
    ("MPI_ABORT was invoked on rank 0 in communicator MPI_COMM_WORLD",
     "MPI_Init was invoked on rank 0"),
    ("=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES",
     "=   termination of the application: normal"),
    # the kernel: kernel/panic.c, kernel/watchdog.c, kernel/watchdog_perf.c
    ("Kernel panic - not syncing: hung_task: blocked tasks", "kernel: panic=10 set"),
    ("watchdog: BUG: soft lockup - CPU#12 stuck for 23s! [python:40213]",
     "soft lockup detector enabled"),
    ("NMI watchdog: Watchdog detected hard LOCKUP on cpu 3", "hard lockup detector on"),
    # Slurm's end states (slurm_protocol_defs.c job_state_string) as seff, scontrol, sacct
    # print them; healthy: COMPLETED, RUNNING, and PG NCCL's "TIMEOUT(ms): 5000" option line
    ("State: TIMEOUT (exit code 0)", "State: COMPLETED (exit code 0)"),
    ("JobState=NODE_FAIL Reason=NodeDown Dependency=(null)", "JobState=RUNNING Reason=None"),
    ("4821337      train        gpu    acct      8     TIMEOUT      0:0",
     "TIMEOUT(ms): 5000"),
    ("4821337.0    python              acct      8  OUT_OF_ME+    0:125",
     "4821337.0    python              acct      8   COMPLETED      0:0"),
    ("4821337      train        gpu    acct      8 CANCELLED by 1001  0:15",
     "sacct --state=CANCELLED,TIMEOUT -X"),
    ("State: PREEMPTED (exit code 0)", "preempted=False"),
    # torchelastic agent's UNHEALTHY state (agent/server/api.py _invoke_run)
    ("[default] Worker group UNHEALTHY. 3/3 attempts left; will restart worker group",
     "[default] Worker group SUCCEEDED."),
    # torch DataLoader (dataloader.py), Ray's actor / worker deaths
    ("DataLoader worker (pid(s) 52013) exited unexpectedly", "DataLoader workers exited: 4"),
    ("The actor died unexpectedly before finishing this task.", "the actor finished its task"),
    # docker compose's "<service> exited with code N" (and runners that word it so)
    ("trainer-1 exited with code 137", "trainer-1 exited with code 0"),
    # bash (jobs.c): a child ended by SIGTERM, foreground
    ("Terminated", "Terminated 3 idle tokenizer workers"),
    ("./train.sh: line 12: 40213 Terminated              python train.py",
     "all processes terminated normally"),
]


@pytest.mark.parametrize(("failure", "near_miss"), PAIRS)
def test_a_dying_jobs_line_counts_and_its_near_miss_does_not(failure, near_miss):
    assert is_failure(failure), failure
    assert not is_failure(near_miss), near_miss


@pytest.mark.parametrize("line", [f for f, _ in PAIRS])
def test_a_log_that_holds_only_such_a_line_is_no_healthy_log(line):
    e = explain_texts([("job.log", "epoch 3 loss 0.12\n" + line + "\n")])
    assert e.exit_code == 1 and not e.verdict().startswith("NO FAILURE FOUND"), line


@pytest.mark.parametrize("line", [m for _, m in PAIRS])
def test_a_healthy_log_with_the_near_miss_stays_healthy(line):
    e = explain_texts([("job.log", "epoch 3 loss 0.12\n" + line + "\nTraining done\n")])
    assert e.exit_code == 0, line


def test_a_launchers_or_schedulers_end_line_says_a_process_ended_not_why():
    # the launchers' summaries and Slurm's end states are teardown: no candidate of their own
    for line in ("mpirun detected that one or more processes exited with non-zero status",
                 "MPI_ABORT was invoked on rank 1 in communicator MPI_COMM_WORLD",
                 "=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES", "Terminated",
                 "State: TIMEOUT (exit code 0)", "4821337  train  gpu  acct  8  NODE_FAIL  0:0",
                 "trainer-1 exited with code 137"):
        assert TEARDOWN.search(line), line
    # torchrun's teardown and an OOM kill, then mpirun's summary: still the OOM
    e = explain_texts([("job.log", "WARNING:torch.distributed.elastic.multiprocessing.api:"
                        "Sending process 9 closing signal SIGTERM\nERROR:torch.distributed."
                        "elastic.multiprocessing.api:failed (exitcode: -9) local_rank: 3 "
                        "(pid: 5) of binary: python\nmpirun detected that one or more "
                        "processes exited with non-zero status, thus causing\n")])
    assert e.problems[0].code == "host-out-of-memory"
    # near miss: a DataLoader worker that died is a failure no rule reads, not teardown
    assert not TEARDOWN.search("DataLoader worker (pid(s) 52013) exited unexpectedly")


def test_failure_records_keep_bash_terminated_only_as_a_whole_line():
    text = "step 10\nTerminated\nTerminated 3 idle workers\n"
    got = [r.text for r in failure_records(read_text("job.log", text), NOT_AN_ERROR)]
    assert got == ["Terminated"]


# --- NCCL's communicator init, unfinished (families/formation.py nccl_unfinished)

def _n(text: str, pid: int = 1234, dev: int = 0) -> str:
    return f"gpu1:{pid}:{pid + 6} [{dev}] NCCL INFO {text}"


# init.cc 2.18.3-2.20: START / COMPLETE with the comm's address and commId
START_218 = _n("comm 0x55d5a3c0 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 1000 commId 0x8e1f2a "
               "- Init START")
DONE_218 = START_218.replace("Init START", "Init COMPLETE")


def _note(*files: list[str]) -> tuple[int, str | None]:
    named = [(f"r{i}.log", "\n".join(lines) + "\n") for i, lines in enumerate(files)]
    e = explain_texts(named)
    return e.exit_code, next((n for n in e.notes if "NCCL's communicator" in n), None)


def test_a_log_that_ends_inside_ncclcomminitrank_says_so_beside_no_failure_found():
    code, note = _note([_n("Bootstrap : Using eth0:10.0.0.1<0>"), START_218,
                        _n("Setting affinity for GPU 0 to ffff"), _n("Channel 00/02 :    0   1")])
    # a working run's pasted start-up looks the same: still exit 0, the note says where
    assert code == 0 and note is not None and "0x55d5a3c0" in note and "r0.log:2" in note
    # variants: 2.21+ names the function, 2.27 a split's "key 0- Init START", 2.30 "[Rank r]"
    for start in (_n("ncclCommInitRank comm 0x7f10 rank 1 nranks 8 cudaDev 1 nvmlDev 1 busId "
                     "2000 commId 0xabc - Init START", dev=1),
                  _n("ncclCommSplit comm 0x7f20 rank 0 nranks 4 cudaDev 0 nvmlDev 0 busId 1000 "
                     "parent 0x7f10 splitCount 1 color 0 key 0- Init START"),
                  _n("[Rank 3] ncclCommInitRankConfig comm 0x7f30 rank 3 nranks 4 cudaDev 3 "
                     "nvmlDev 3 busId 4000 commId 0xdef - Init START", dev=3)):
        assert _note([start, _n("Trees [0] 1/-1/-1->0->-1")])[1] is not None, start


def test_a_communicator_that_completed_or_a_run_that_went_on_has_no_note():
    assert _note([START_218, DONE_218]) == (0, None)
    # 2.3's completion line, 2.12+'s destroy of a communicator
    assert _note([_n("Bootstrap : Using [0]eth0:10.0.0.1<0>"), _n("Trees [0] -1/-1/-1->0->1"),
                  _n("comm 0x7f00 rank 0 nranks 2 - COMPLETE")]) == (0, None)
    assert _note([START_218, _n("comm 0x55d5a3c0 rank 0 nranks 2 cudaDev 0 busId 1000 - "
                                "Abort COMPLETE")]) == (0, None)
    # the job's own output after NCCL's lines: the run went on
    assert _note([START_218, "epoch 1 loss 0.31"]) == (0, None)
    # another process's START is not this one's COMPLETE (the address is per process)
    assert _note([START_218, DONE_218.replace("1234:1240", "999:1005")])[1] is not None


def test_before_nccl_2_18_3_the_bootstrap_and_init_steps_stand_for_the_start():
    steps = [_n("Bootstrap : Using [0]eth0:10.0.0.1<0>"), _n("NET/Plugin : No plugin found"),
             _n("Using network Socket"), _n("Channel 00/02 :    0   1"),
             _n("Trees [0] 1/-1/-1->0->-1 [1] -1/-1/-1->0->1")]
    assert _note(steps)[1] is not None
    assert "no `Init COMPLETE`" in (_note(steps)[1] or "")
    # 2.7-2.17's completion line: formed
    assert _note([*steps, _n("comm 0x7f00 rank 0 nranks 2 cudaDev 0 busId 1000 - Init "
                             "COMPLETE")]) == (0, None)
    # near misses: a fragment without NCCL's start (the bootstrap), and one that ends at
    # transport lines NCCL also prints after init (a first send/recv's P2P connections)
    assert _note(steps[2:])[1] is None
    assert _note([*steps, _n("Channel 00/1 : 0[0] -> 1[1] via P2P/IPC")])[1] is None


def test_a_failure_line_is_read_as_before_and_gets_no_note():
    e = explain_texts([("r.log", "\n".join([START_218, "RuntimeError: CUDA error: invalid device "
                                            "ordinal"]) + "\n")])
    assert e.problems[0].code == "invalid-device-ordinal"
    assert not any("NCCL's communicator" in n for n in e.notes)


def test_nccl_unfinished_reads_records():
    recs = read_text("r.log", START_218 + "\n")
    assert nccl_unfinished(recs) is not None
    assert nccl_unfinished(read_text("r.log", "epoch 1\n")) is None


# --- other producers' "entered init" / "world formed" lines (families/formation.py)

def _shown(*files: list[str]) -> str:
    e = explain_texts([(f"f{i}.log", "\n".join(lines) + "\n") for i, lines in enumerate(files)])
    return e.problems[0].code if e.problems else "none"


# torch/distributed/elastic/rendezvous/dynamic_rendezvous.py next_rendezvous (1.9-2.13)
RDZV_JOIN = ("I0129 19:30:00.934000 8689 torch/distributed/elastic/rendezvous/dynamic_rendezvous"
             ".py:1149] The node 'gpu1_8689_0' attempts to join the next round of the "
             "rendezvous 'job42'.")
RDZV_JOINED = ("I0129 19:30:05.102000 8689 torch/distributed/elastic/rendezvous/dynamic_"
               "rendezvous.py:1186] The node 'gpu1_8689_0' has joined round 0 of the rendezvous "
               "'job42' as rank 0 in a world of size 2.")


def test_a_log_that_ends_in_torchruns_rendezvous_is_the_agents_world_not_formed():
    e = explain_texts([("n1.log", RDZV_JOIN + "\n")])
    assert e.problems[0].code == "world-not-formed" and e.undetermined
    assert "torchrun's rendezvous" in e.problems[0].observed
    assert "--rdzv-endpoint" in e.problems[0].cause
    # variant: the etcd backend's join and wait (etcd_rendezvous.py)
    assert _shown(["INFO:torch.distributed.elastic.rendezvous.etcd_rendezvous:Attempting to "
                   "join next rendezvous"]) == "world-not-formed"
    assert _shown(["INFO:torch.distributed.elastic.rendezvous.etcd_rendezvous:Waiting for "
                   "remaining peers."]) == "world-not-formed"


def test_a_rendezvous_that_completed_is_no_unformed_world():
    assert _shown([RDZV_JOIN, RDZV_JOINED]) == "none"
    assert _shown([RDZV_JOIN, "INFO:torch.distributed.elastic.agent.server.api:[default] "
                   "Rendezvous complete for workers. Result:"]) == "none"
    assert _shown(["INFO:torch.distributed.elastic.rendezvous.etcd_rendezvous:Rendezvous "
                   "version 1 is complete. Final state: {'status': 'final'}"]) == "none"
    # near miss: a node that joined and then the job's own output
    assert _shown([RDZV_JOIN, "epoch 1 loss 0.3"]) == "none"


def test_megatrons_entry_and_its_model_parallel_lines():
    # megatron/training/initialize.py _initialize_distributed: rank 0, before the init
    assert _shown(["> building GPT2BPETokenizer tokenizer ...",
                   "> initializing torch distributed ..."]) == "world-not-formed"
    # after init_process_group returned (current, and the older mpu's wording)
    for formed in ("> initialized tensor model parallel with size 1",
                   "> initialized pipeline model parallel with size 2",
                   "> initializing model parallel with size 1"):
        assert _shown(["> initializing torch distributed ...", formed]) == "none", formed
    # near miss: another producer's wording (a NeMo recipe's log), not read as an entry
    assert _shown(["> initializing torch distributed with 1 workers."]) == "none"


def test_accelerates_state_line_says_a_process_got_through_init():
    # accelerate/state.py PartialState.__repr__, logged by scripts after the init
    ds_entry = ["[2024-06-11 00:23:36,254] [INFO] [comm.py:637:init_distributed] cdb=None"]
    assert _shown(ds_entry) == "world-not-formed"
    for state in ("Distributed environment: DEEPSPEED  Backend: nccl",
                  "Distributed environment: DistributedType.MULTI_GPU  Backend: nccl"):
        assert _shown(ds_entry, ["Num processes: 2", state, "Process index: 1"]) == "none", state
    # near miss: a single process (no distributed init at all) says nothing of the world
    assert _shown(["Distributed environment: NO", "Num processes: 1", *ds_entry]) == \
        "world-not-formed"


# torchrun 2.13 with LOGLEVEL=INFO, real runs here: its launch-config dump, and a two-node
# rendezvous with one node started, killed after 20 s (launcher/api.py, agent/server/api.py)
CONFIG = ["I1124 14:07:43.015000 14069 torch/distributed/launcher/api.py:254]   run_id"
          "                   : j1",
          "I1124 14:07:43.015000 14069 torch/distributed/launcher/api.py:254]   signals_to_handle"
          "        : SIGTERM,SIGINT,SIGHUP,SIGQUIT"]
RDZVING = ("I1124 14:07:43.020000 14069 torch/distributed/elastic/agent/server/api.py:707] "
           "[default] Rendezvous'ing worker group")


def test_torchruns_config_dump_is_no_failure_and_its_rendezvous_is_read():
    assert not is_failure(CONFIG[1])
    # near miss: a signal the agent received is still one
    assert is_failure("W1124 14:07:50.1 14069 torch/distributed/elastic/agent/server/api.py:753"
                      "] Received Signals.SIGTERM death signal, shutting down workers")
    e = explain_texts([("n1.log", "\n".join([*CONFIG, RDZVING]) + "\n")])
    assert e.problems[0].code == "world-not-formed" and "torchrun's rendezvous" in \
        e.problems[0].observed
    done = [*CONFIG, RDZVING, "I1124 14:08:21.9 14680 torch/distributed/elastic/agent/server/"
            "api.py:932] [default] worker group successfully finished. Waiting 300 seconds "
            "for other agents to finish."]
    assert explain_texts([("n1.log", "\n".join(done) + "\n")]).exit_code == 0
