"""Rules written at stop 33 from the s33 real runs (each scored before the rule was written):
a rank outside the world, an agent started beyond --nnodes, torch.save into a directory the
node lacks. Each with a near miss."""

from __future__ import annotations

from ddpcheck.explain import explain_texts
from tests.unit.explain.families.helpers import first_cause

GLOO_RANK = ("RuntimeError: [enforce fail at /__w/pytorch/pytorch/third_party/gloo/gloo/"
             "context.cc:23] rank < size. 2 vs 2")
PEER_WAIT = ("torch.distributed.DistStoreError: wait timeout after 5000ms, keys: "
             "/default_pg/0//cpu//0/1")


def test_a_rank_outside_the_world_is_rank_out_of_range():
    assert first_cause("Traceback (most recent call last):", GLOO_RANK, PEER_WAIT) == \
        "rank-out-of-range"
    assert first_cause("node3:1234:1234 [0] NCCL WARN Invalid rank requested : 8/8") == \
        "rank-out-of-range"


def test_near_miss_other_gloo_enforcements_are_not_a_rank_out_of_range():
    assert first_cause("RuntimeError: [enforce fail at ../third_party/gloo/gloo/transport/tcp/"
                       "pair.cc:446] op.preamble.length <= op.nbytes. 16 vs 8") != \
        "rank-out-of-range"


AGENT_NODE0 = ("torch.distributed.DistStoreError: wait timeout after 8000ms, keys: "
               "/none/torchelastic/role_info/0, /none/torchelastic/role_info/1")
AGENT_NODE1 = ("torch.distributed.DistStoreError: wait timeout after 8000ms, keys: "
               "/none/torchelastic/assigned_ranks/2")
SOCKET_WAIT = ("[W1125 03:00:04.124100599 socket.cpp:494] [c10d] waitForInput: socket "
               "SocketImpl(fd=12, addr=[::]:32489, remote=[fd00::1]:6111) timed out after "
               "8000ms")


def _first(files: list[tuple[str, str]]):
    e = explain_texts(files)
    return next(p for p in e.problems if not p.consequence_of)


def test_an_agent_beyond_nnodes_is_node_rank_invalid_from_both_agents_waits():
    # real run s33-netns-node-rank-out-of-range: --nnodes 2, node ranks 0 and 2
    p = _first([("node0.log", f"{SOCKET_WAIT}\n{AGENT_NODE0}\n"),
                ("node1.log", f"{SOCKET_WAIT}\n{AGENT_NODE1}\n")])
    assert p.code == "node-rank-invalid"
    assert "--node-rank 2 in a job of 2 nodes" in p.cause and "0..1" in p.fix


def test_near_miss_either_agents_wait_alone_decides_nothing():
    # node 1 alone: node 0's agent may wait for a node that was never started
    assert first_cause(SOCKET_WAIT, AGENT_NODE1) != "node-rank-invalid"
    assert first_cause(SOCKET_WAIT, AGENT_NODE0) != "node-rank-invalid"
    # a rank inside the world, node 0 waiting for the roles of 4 nodes: a node missing
    four = AGENT_NODE0 + ", /none/torchelastic/role_info/2, /none/torchelastic/role_info/3"
    assert _first([("node0.log", four + "\n"), ("node1.log", AGENT_NODE1 + "\n")]).code != \
        "node-rank-invalid"


def test_torch_save_into_a_missing_directory_is_checkpoint_failed():
    p = _first([("job.log", '  File "train.py", line 90, in save\n'
                            "    torch.save(model.state_dict(), path)\n"
                            "RuntimeError: Parent directory /scratch/run-42/checkpoints does "
                            "not exist.\n")])
    assert p.code == "checkpoint-failed" and "/scratch/run-42/checkpoints" in p.cause


def test_near_miss_a_missing_file_to_load_is_not_this_rule():
    assert first_cause("FileNotFoundError: [Errno 2] No such file or directory: "
                       "'/data/train.json'") != "checkpoint-failed"


LOOPBACK_GAVE_UP = ("torch.distributed.DistNetworkError: The client socket has timed out after "
                    "8000ms while trying to connect to (127.0.0.1, 40893).")
CLIENTS = ("torch.distributed.DistStoreError: Timed out after 9 seconds waiting for clients. "
           "1/2 clients joined.")


def test_a_loopback_dial_beside_a_store_waiting_for_clients_is_master_addr_loopback():
    # real run s33b-netns-master-addr-loopback: both nodes --master-addr 127.0.0.1
    p = _first([("node0.log", CLIENTS + "\n"), ("node1.log", LOOPBACK_GAVE_UP + "\n")])
    assert p.code == "master-addr-loopback" and "127.0.0.1:40893" in p.cause
    refused = ("[E socket.cpp:860] [c10d] The client socket has failed to connect to any "
               "network address of (localhost, 29500).")
    assert _first([("node0.log", CLIENTS + "\n"), ("node1.log", refused + "\n")]).code == \
        "master-addr-loopback"


def test_near_miss_a_loopback_dial_alone_or_to_a_routable_address_is_not_loopback():
    # one file: rank 0 not up yet or crashed on this very node
    assert first_cause(LOOPBACK_GAVE_UP) != "master-addr-loopback"
    # the same two facts in one file (one node's console): no other node in sight
    assert first_cause(CLIENTS, LOOPBACK_GAVE_UP) != "master-addr-loopback"
    routable = LOOPBACK_GAVE_UP.replace("127.0.0.1", "10.0.0.1")
    assert _first([("node0.log", CLIENTS + "\n"), ("node1.log", routable + "\n")]).code != \
        "master-addr-loopback"


CANCELLED = """srun: Job step aborted: Waiting up to 4 seconds for job step to finish.
slurmstepd-node0: error: *** STEP 1.0 ON node0 CANCELLED AT 2026-11-25T03:33:43 ***
slurmstepd-node0: error: *** JOB 1 ON node0 CANCELLED AT 2026-11-25T03:33:43 ***
srun: forcing job termination
W1125 03:33:43.069000 1403 site-packages/torch/distributed/elastic/agent/server/api.py:753] \
Received 15 death signal, shutting down workers
torch.distributed.elastic.multiprocessing.api.SignalException: Process 1403 got signal: 15
srun: error: node0: task 0: Exited with exit code 1
"""


def test_torchruns_sigterm_after_a_slurm_cancellation_is_its_consequence():
    # real run s33c-slurm-job-cancelled (scancel mid-run): was root-cause-ambiguous
    e = explain_texts([("slurm-1.out", CANCELLED)])
    causes = [p.code for p in e.problems if not p.consequence_of]
    assert causes == ["slurm-job-cancelled"]
    assert any(p.code == "run-interrupted" and p.consequence_of == "slurm-job-cancelled"
               for p in e.problems)


def test_near_miss_torchruns_sigterm_without_a_cancellation_stays_its_own():
    lines = [ln for ln in CANCELLED.splitlines() if "CANCELLED" not in ln]
    assert first_cause(*lines) == "run-interrupted"


PER_TASK = """[E1125 03:46:39.896640905 socket.cpp:1028] [c10d] The client socket has timed out \
after 5000ms while trying to connect to (node1, 40991).
Traceback (most recent call last):
torch.distributed.DistStoreError: Timed out after 6 seconds waiting for clients. 1/2 clients \
joined.
srun: error: node0: task 0: Exited with exit code 1
torch.distributed.DistNetworkError: The client socket has timed out after 5000ms while trying \
to connect to (node1, 40991).
srun: error: node1: task 1: Exited with exit code 1
"""


def test_a_dial_to_another_node_than_sruns_task_0_is_master_addr_not_rank0_node():
    # real run s33d-slurm-master-addr-per-task: each task's MASTER_ADDR=$(hostname)
    p = _first([("slurm-3.out", PER_TASK)])
    assert p.code == "master-addr-not-rank0-node" and "node0" in p.cause
    assert "scontrol show hostnames" in p.fix


def test_near_miss_under_torchrun_srun_tasks_are_nodes_not_ranks():
    # srun started one torchrun per node: task 0 is node 0's agent, which says nothing of
    # where the store is (c10d's endpoint may be any node)
    agent = ("torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n")
    assert _first([("slurm-3.out", agent + PER_TASK)]).code != "master-addr-not-rank0-node"
    # the dial names rank 0's own node: not this rule
    same = PER_TASK.replace("(node1, 40991)", "(node0, 40991)")
    assert _first([("slurm-3.out", same)]).code != "master-addr-not-rank0-node"


def _agent(desc: str, rdzv: str = "none") -> str:
    return (f"W1125 03:58:43.251000 11331 site-packages/torch/distributed/elastic/rendezvous/"
            f"dynamic_rendezvous.py:1298] The node '{desc}' has failed to shutdown the "
            f"rendezvous '{rdzv}' due to an error of type RendezvousConnectionError.")


def test_two_torchrun_agents_of_one_rendezvous_on_one_host_are_two_launchers():
    # real run s33e-slurm-two-torchruns-per-node: srun under --ntasks-per-node=2
    p = _first([("slurm-5.out", "\n".join([_agent("node1_11330_0"), _agent("node1_11331_0"),
                                           "srun: error: node1: tasks 2-3: Exited with exit "
                                           "code 1"]) + "\n")])
    assert p.code == "two-launchers-on-node" and p.hosts == ("node1",)
    assert "--ntasks-per-node=1" in p.fix


def test_near_miss_agents_on_two_hosts_or_one_agent_restarted_are_one_launcher_each():
    assert first_cause(_agent("node0_500_0"), _agent("node1_501_0")) != "two-launchers-on-node"
    assert first_cause(_agent("node1_500_0"), _agent("node1_500_1")) != "two-launchers-on-node"
    assert first_cause(_agent("node1_500_0", "job-a"), _agent("node1_501_0", "job-b")) != \
        "two-launchers-on-node"


KILL_ON_BAD_EXIT = """2026-11-25 04:22:09 rank 1: invalid configuration, giving up
[rank0]: Traceback (most recent call last):
[rank0]:   File "/work/main/bench/real_runs_train.py", line 183, in train
[rank0]:     dist.all_reduce(grad)
[rank0]: RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] \
Connection closed by peer [10.213.25.2]:62110. This is typically caused by a remote worker \
crashing.
srun: error: node1: task 1: Exited with exit code 1
srun: launch/slurm: _step_signal: Terminating StepId=1.0
slurmstepd-node0: error: *** STEP 1.0 ON node0 CANCELLED AT 2026-11-25T04:22:10 ***
srun: error: node0: task 0: Terminated
"""


def test_sruns_quiet_task_exit_is_the_rank_that_left_not_the_step_cancellation():
    # real run s33f-slurm-kill-on-bad-exit: rank 1 sys.exit(1), no traceback of its own
    e = explain_texts([("slurm-7.out", KILL_ON_BAD_EXIT)])
    causes = [p for p in e.problems if not p.consequence_of]
    assert causes[0].code == "rank-exited" and causes[0].ranks == (1,)
    assert not e.undetermined


def test_near_miss_the_quiet_task_with_its_own_traceback_or_under_torchrun_is_not_quiet():
    own = KILL_ON_BAD_EXIT.replace("2026-11-25 04:22:09 rank 1: invalid configuration, giving "
                                   "up\n", "[rank1]: Traceback (most recent call last):\n"
                                   '[rank1]:   File "train.py", line 5, in main\n'
                                   "[rank1]: KeyError: 'labels'\n")
    assert first_cause(*own.splitlines()) != "rank-exited"
    agent = "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n"
    assert first_cause(*(agent + KILL_ON_BAD_EXIT).splitlines()) != "rank-exited"


def test_a_program_slurmstepd_cannot_exec_is_launch_failed():
    # real run s33f-slurm-export-none
    assert first_cause("srun: error: node1: task 1: Exited with exit code 2",
                       "slurmstepd-node1: error: execve(): torchrun: No such file or "
                       "directory") == "launch-failed"
    assert first_cause("srun: error: node1: task 1: Exited with exit code 2") != \
        "launch-failed"


def test_sruns_quiet_task_exit_before_any_peer_printed_is_still_the_rank_that_left():
    # runs-torch2.15/s33f-slurm-kill-on-bad-exit: srun ended rank 0 before its traceback
    lines = [ln for ln in KILL_ON_BAD_EXIT.splitlines() if not ln.startswith("[rank0]")]
    assert first_cause(*lines) == "rank-exited"
    # near miss: no step ended either, nothing printed by any rank: undecided
    bare = [ln for ln in lines if "StepId" not in ln and "CANCELLED" not in ln]
    assert first_cause(*bare) != "rank-exited"
