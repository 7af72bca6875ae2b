"""detect() on recorded job environments (tests/data/jobs) and shape_problems() on their shapes."""

from __future__ import annotations

import pytest

from ddpcheck import diagnoses
from ddpcheck.scheduler.contradictions import shape_problems
from ddpcheck.scheduler.detect import detect
from ddpcheck.scheduler.hostlist import expand_slurm_nodelist, parse_slurm_tasks_per_node
from tests.helpers.recorded_jobs import JOBS, job_of, reader, recorded

CODES = ("scheduler-env-invalid", "job-shape-mismatch", "too-many-tasks-per-node",
         "tasks-gpus-mismatch", "not-launched-per-node", "node-rank-invalid",
         "node-not-in-allocation")


def codes(problems: list[diagnoses.Problem]) -> list[str]:
    return [p.code for p in problems]


# --- the recorded environments -----------------------------------------------------------

SHAPES = {
    "slurm_2node_srun_step": dict(
        source="slurm", nodes=("gpu-07", "gpu-08"), nnodes=2, node_rank=1,
        endpoint="gpu-07:29500", job_id="48213", tasks_per_node=1, gpus_per_node=4,
        hostname="gpu-08", step_id="0"),
    "slurm_4node_gres8_batch": dict(
        source="slurm", nodes=("gpu-01", "gpu-02", "gpu-03", "gpu-04"), nnodes=4, node_rank=0,
        endpoint="gpu-01", job_id="1203377", tasks_per_node=None, gpus_per_node=8,
        hostname="gpu-01", step_id=None),
    "slurm_ntasks8_step": dict(
        source="slurm", nodes=("hgx-h100-003", "hgx-h100-017"), nnodes=2, node_rank=1,
        endpoint="hgx-h100-003", job_id="771042", tasks_per_node=8, gpus_per_node=8,
        hostname="hgx-h100-017", step_id="0"),
    "pbs_2node": dict(
        source="pbs", nodes=("gn017", "gn018"), nnodes=2, node_rank=0, endpoint="gn017",
        job_id="4211.pbs01", tasks_per_node=4, gpus_per_node=None,
        hostname="gn017.hpc.example.org", step_id=None),
    "torchrun_worker_kubeflow": dict(
        source="torchrun", nodes=(), nnodes=2, node_rank=1, endpoint="bert-ft-master-0:23456",
        job_id=None, tasks_per_node=4, gpus_per_node=None, hostname="bert-ft-worker-0",
        step_id=None),
    "byhand_master_env": dict(
        source="env", nodes=(), nnodes=None, node_rank=1, endpoint="10.0.0.4:29500",
        job_id=None, tasks_per_node=None, gpus_per_node=None, hostname="train-vm-2",
        step_id=None),
    "byhand_plain": dict(
        source="none", nodes=(), nnodes=None, node_rank=None, endpoint=None, job_id=None,
        tasks_per_node=None, gpus_per_node=None, hostname="ws-alice", step_id=None),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_recorded_shape(name: str) -> None:
    job = job_of(name)
    assert {field: getattr(job, field) for field in SHAPES[name]} == SHAPES[name]
    assert job.problems == ()


def test_every_recording_is_tested() -> None:
    assert sorted(p.stem for p in JOBS.glob("*.json")) == sorted(SHAPES)


@pytest.mark.parametrize("name", sorted(n for n in SHAPES if n.startswith("slurm")))
def test_slurm_recordings_are_self_consistent(name: str) -> None:
    """The recordings must look like what Slurm exports, or the tests above prove nothing."""
    env = recorded(name)["env"]
    assert env["SLURM_JOB_ID"] == env["SLURM_JOBID"]
    nodes = expand_slurm_nodelist(env["SLURM_JOB_NODELIST"])
    assert len(nodes) == int(env["SLURM_JOB_NUM_NODES"])
    assert env["SLURMD_NODENAME"] == nodes[int(env["SLURM_NODEID"])]
    assert len(parse_slurm_tasks_per_node(env["SLURM_JOB_CPUS_PER_NODE"])) == len(nodes)
    if "SLURM_STEP_ID" in env:
        assert env["SLURM_STEP_ID"] == env["SLURM_STEPID"]
        tasks = parse_slurm_tasks_per_node(env["SLURM_STEP_TASKS_PER_NODE"])
        assert sum(tasks) == int(env["SLURM_STEP_NUM_TASKS"]) == int(env["SLURM_NTASKS"])
        assert len(tasks) == int(env["SLURM_STEP_NUM_NODES"])
        assert 0 <= int(env["SLURM_LOCALID"]) < tasks[int(env["SLURM_NODEID"])]
        assert env["SLURM_PROCID"] in env["SLURM_GTIDS"].split(",")


def test_notes_say_where_values_came_from() -> None:
    job = job_of("slurm_2node_srun_step")
    assert job.origin("nodes") == "SLURM_STEP_NODELIST=gpu-[07-08]"
    assert job.origin("nnodes") == "SLURM_STEP_NUM_NODES=2"
    assert job.origin("node_rank") == "SLURM_NODEID=1"
    assert job.origin("tasks_per_node") == "SLURM_STEP_TASKS_PER_NODE=1(x2)"
    assert job.origin("gpus_per_node") == "SLURM_GPUS_ON_NODE=4"
    assert job.origin("hostname") == "SLURMD_NODENAME=gpu-08"  # not HOSTNAME=gpu-07
    assert job.origin("port") == "MASTER_PORT=29500"
    assert job.origin("missing") == ""


# --- Slurm precedence ------------------------------------------------------------------------

def test_step_variables_win_over_job_variables() -> None:
    # srun -N1 inside the 2-node job: the step runs on gpu-07 only
    job = job_of("slurm_2node_srun_step", "gpu-07", SLURMD_NODENAME="gpu-07", SLURM_NODEID="0",
                 SLURM_STEP_NODELIST="gpu-07", SLURM_NODELIST="gpu-07", SLURM_STEP_NUM_NODES="1",
                 SLURM_NNODES="1", SLURM_STEP_TASKS_PER_NODE="1", SLURM_TASKS_PER_NODE="1")
    assert (job.nodes, job.nnodes, job.node_rank, job.endpoint) == (
        ("gpu-07",), 1, 0, "gpu-07:29500")


def test_step_nodelist_falls_back_to_slurm_nodelist_then_job_nodelist() -> None:
    job = job_of("slurm_2node_srun_step", SLURM_STEP_NODELIST=None, SLURM_NODELIST="gpu-07")
    assert job.origin("nodes") == "SLURM_NODELIST=gpu-07"
    job = job_of("slurm_2node_srun_step", SLURM_STEP_NODELIST=None, SLURM_NODELIST=None)
    assert job.origin("nodes") == "SLURM_JOB_NODELIST=gpu-[07-08]"


@pytest.mark.parametrize("step_id", ["4294967290", "4294967291"])  # interactive, batch
def test_pseudo_steps_are_not_srun_steps(step_id: str) -> None:
    job = job_of("slurm_4node_gres8_batch", SLURM_STEP_ID=step_id, SLURM_STEPID=step_id,
                 SLURM_STEP_NODELIST="gpu-01", SLURM_STEP_NUM_NODES="1")
    assert (job.step_id, job.nnodes, job.origin("nodes")) == (
        None, 4, "SLURM_JOB_NODELIST=gpu-[01-04]")


def test_old_slurm_jobid_alone() -> None:
    job = job_of("slurm_4node_gres8_batch", SLURM_JOB_ID=None)
    assert (job.source, job.job_id) == ("slurm", "1203377")


def test_tasks_per_node_outside_a_step() -> None:
    # -n 16 over 2 nodes without --ntasks-per-node: the layout is SLURM_TASKS_PER_NODE
    job = job_of("slurm_4node_gres8_batch", SLURM_NTASKS="16", SLURM_TASKS_PER_NODE="8(x2)")
    assert job.tasks_per_node == 8
    job = job_of("slurm_4node_gres8_batch", SLURM_NTASKS_PER_NODE="8", SLURM_NTASKS="32",
                 SLURM_TASKS_PER_NODE="8(x4)")
    assert job.origin("tasks_per_node") == "SLURM_NTASKS_PER_NODE=8"
    assert any("counts CPUs" in n for n in job_of("slurm_4node_gres8_batch").notes)


def test_uneven_tasks_per_node_take_this_nodes_count() -> None:
    job = job_of("slurm_ntasks8_step", SLURM_STEP_TASKS_PER_NODE="9,7")
    assert job.tasks_per_node == 7  # SLURM_NODEID=1
    assert any("vary" in n for n in job.notes)


@pytest.mark.parametrize("changes,gpus,origin", [
    (dict(SLURM_GPUS_ON_NODE=None, SLURM_GPUS_PER_NODE="a100:4"), 4, "SLURM_GPUS_PER_NODE"),
    (dict(SLURM_GPUS_ON_NODE=None, SLURM_STEP_GPUS="0,1"), 2, "SLURM_STEP_GPUS"),
    (dict(SLURM_GPUS_ON_NODE=None, SLURM_STEP_GPUS=None), 4, "SLURM_JOB_GPUS"),
    (dict(SLURM_GPUS_ON_NODE=None, SLURM_STEP_GPUS=None, SLURM_JOB_GPUS=None), 4,
     "CUDA_VISIBLE_DEVICES"),
    (dict(SLURM_GPUS_ON_NODE="0", CUDA_VISIBLE_DEVICES=None), 0, "SLURM_GPUS_ON_NODE"),
])
def test_gpu_count_precedence(changes: dict[str, str | None], gpus: int, origin: str) -> None:
    job = job_of("slurm_2node_srun_step", **changes)
    assert job.gpus_per_node == gpus
    assert job.origin("gpus_per_node").startswith(origin + "=")


def test_no_gpus_anywhere() -> None:
    job = job_of("slurm_2node_srun_step", SLURM_GPUS_ON_NODE=None, SLURM_STEP_GPUS=None,
                 SLURM_JOB_GPUS=None, CUDA_VISIBLE_DEVICES="NoDevFiles")
    assert job.gpus_per_node is None


def test_endpoint_without_master_port_is_the_first_node() -> None:
    assert job_of("slurm_2node_srun_step", MASTER_PORT=None).endpoint == "gpu-07"


def test_master_addr_does_not_override_the_first_node() -> None:
    job = job_of("slurm_2node_srun_step", MASTER_ADDR="gpu-08-ib")
    assert job.endpoint == "gpu-07:29500"
    assert any(n.startswith("MASTER_ADDR=gpu-08-ib not used") for n in job.notes)


def test_salloc_shell_on_a_login_node() -> None:
    env = {"SLURM_JOB_ID": "5", "SLURM_JOBID": "5", "SLURM_JOB_NODELIST": "gpu-[01-02]",
           "SLURM_NODELIST": "gpu-[01-02]", "SLURM_JOB_NUM_NODES": "2", "SLURM_NNODES": "2",
           "SLURM_TASKS_PER_NODE": "1(x2)", "SLURM_SUBMIT_HOST": "login01"}
    job = detect(env, hostname="login01")
    assert (job.node_rank, job.hostname, job.origin("hostname")) == (
        None, "login01", "this machine: login01")
    assert codes(shape_problems(job, 2, 4)) == ["node-not-in-allocation"]


def test_rank_from_position_when_slurm_nodeid_is_missing() -> None:
    job = job_of("slurm_2node_srun_step", SLURM_NODEID=None)
    assert job.node_rank == 1
    assert job.origin("node_rank").startswith("the position of gpu-08")


# --- malformed variables are problems, not exceptions -----------------------------------------

def test_bad_nodelist_is_a_problem_and_the_next_variable_is_used() -> None:
    job = job_of("slurm_2node_srun_step", SLURM_STEP_NODELIST="gpu-[07-08")
    assert job.nodes == ("gpu-07", "gpu-08")
    assert job.origin("nodes") == "SLURM_NODELIST=gpu-[07-08]"
    [problem] = job.problems
    assert problem.code == "scheduler-env-invalid"
    assert problem.observed.startswith("SLURM_STEP_NODELIST='gpu-[07-08': bad Slurm hostlist")


def test_count_disagreeing_with_the_list_is_a_problem() -> None:
    job = job_of("slurm_2node_srun_step", SLURM_STEP_NUM_NODES="3")
    assert job.nnodes == 2
    assert codes(list(job.problems)) == ["scheduler-env-invalid"]
    assert "names 2" in job.problems[0].observed


@pytest.mark.parametrize("changes", [
    dict(SLURM_NODEID="one"), dict(SLURM_STEP_TASKS_PER_NODE="8(2)"),
    dict(SLURM_GPUS_ON_NODE="four"), dict(MASTER_PORT="99999"),
])
def test_malformed_values(changes: dict[str, str]) -> None:
    job = job_of("slurm_2node_srun_step", **changes)
    [name] = changes
    assert [p.observed.split("=")[0] for p in job.problems] == [name]
    assert all(p.code == "scheduler-env-invalid" for p in job.problems)


# --- PBS --------------------------------------------------------------------------------------

def test_pbs_rank_is_the_position_of_this_host() -> None:
    job = job_of("pbs_2node", "gn018")
    assert (job.node_rank, job.tasks_per_node, job.endpoint) == (1, 4, "gn017")


def test_pbs_master_port() -> None:
    assert job_of("pbs_2node", MASTER_PORT="29400").endpoint == "gn017:29400"


def test_pbs_uneven_slots() -> None:
    env = {"PBS_JOBID": "7.srv", "PBS_NODEFILE": "/aux/7.srv"}
    job = detect(env, read_file=lambda _: "a\nb\na\na\n\n", hostname="b")
    assert (job.nodes, job.nnodes, job.node_rank, job.tasks_per_node) == (("a", "b"), 2, 1, 1)


def test_pbs_nodefile_unreadable_on_a_sister_node() -> None:
    job = job_of("pbs_2node", "gn018", PBS_NODEFILE="/var/spool/pbs/aux/missing", PBS_NODENUM="1")
    assert (job.nodes, job.nnodes, job.node_rank) == ((), None, 1)
    [problem] = job.problems
    assert problem.code == "scheduler-env-invalid"
    assert "cannot read PBS_NODEFILE=/var/spool/pbs/aux/missing" in problem.observed
    assert "first node" in problem.cause


def test_pbs_host_not_in_nodefile() -> None:
    job = job_of("pbs_2node", "login01", PBS_NODENUM=None)
    assert job.node_rank is None
    assert codes(shape_problems(job, 2)) == ["node-not-in-allocation"]


# --- torchrun and by-hand variables ---------------------------------------------------------

def test_rdzv_variables_win_over_master_variables() -> None:
    job = job_of("torchrun_worker_kubeflow", PET_RDZV_ENDPOINT="bert-ft-master-0:29400",
                 PET_RDZV_ID="bert-ft")
    assert (job.endpoint, job.job_id) == ("bert-ft-master-0:29400", "bert-ft")


def test_pet_master_wins_over_master() -> None:
    job = job_of("torchrun_worker_kubeflow", PET_MASTER_ADDR="10.1.2.3", PET_MASTER_PORT=None)
    assert job.endpoint == "10.1.2.3"
    assert job_of("torchrun_worker_kubeflow", PET_MASTER_ADDR=None).endpoint == (
        "bert-ft-master-0:23456")


def test_elastic_range_falls_back_to_group_world_size() -> None:
    job = job_of("torchrun_worker_kubeflow", PET_NNODES="1:4")
    assert (job.nnodes, job.origin("nnodes")) == (2, "GROUP_WORLD_SIZE=2")


def test_symbolic_nproc_falls_back_to_local_world_size() -> None:
    job = job_of("torchrun_worker_kubeflow", PET_NPROC_PER_NODE="gpu")
    assert (job.tasks_per_node, job.origin("tasks_per_node")) == (4, "LOCAL_WORLD_SIZE=4")


def test_node_rank_precedence() -> None:
    assert job_of("torchrun_worker_kubeflow", PET_NODE_RANK=None, NODE_RANK="0").node_rank == 1
    assert job_of("byhand_master_env", GROUP_RANK="0").node_rank == 0  # now a torchrun env


def test_by_hand_ipv6_endpoint() -> None:
    assert job_of("byhand_master_env", MASTER_ADDR="fd00::4").endpoint == "[fd00::4]:29500"


def test_scheduler_wins_over_torchrun_variables() -> None:
    job = job_of("slurm_2node_srun_step", PET_NNODES="8", MASTER_ADDR="10.9.9.9")
    assert (job.source, job.nnodes) == ("slurm", 2)


def test_detect_reads_the_machine_hostname_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("ddpcheck.scheduler.detect.socket.gethostname",
                        lambda: "gn018.hpc.example.org")
    doc = recorded("pbs_2node")
    assert detect(doc["env"], read_file=reader(doc)).node_rank == 1


# --- shape_problems ---------------------------------------------------------------------------

def test_clean_shapes_have_no_problems() -> None:
    assert shape_problems(job_of("slurm_2node_srun_step"), 2, 4, 1) == []
    assert shape_problems(job_of("slurm_2node_srun_step"), 2, 2, 2) == []
    assert shape_problems(job_of("pbs_2node"), 2, 4) == []
    assert shape_problems(job_of("torchrun_worker_kubeflow"), 2, 4) == []
    assert shape_problems(job_of("byhand_master_env"), 2, 8) == []
    assert shape_problems(job_of("byhand_plain"), 1, 1) == []
    assert shape_problems(job_of("byhand_plain"), None, None) == []


def test_nodes_flag_against_a_slurm_allocation() -> None:
    env = dict(recorded("slurm_4node_gres8_batch")["env"], SLURM_JOB_NODELIST="gpu-[01-02]",
               SLURM_NODELIST="gpu-[01-02]", SLURM_JOB_NUM_NODES="2", SLURM_NNODES="2")
    problems = shape_problems(detect(env, hostname="gpu-01"), 4)
    assert codes(problems) == ["job-shape-mismatch", "not-launched-per-node"]
    assert problems[0].observed == "--nodes 4 but the Slurm allocation has 2 nodes (gpu-[01-02])"
    assert "sbatch --nodes=4" in problems[0].fix
    assert problems[0].hosts == ("gpu-01",)


def test_nodes_flag_against_an_srun_step() -> None:
    [problem] = shape_problems(job_of("slurm_2node_srun_step"), 4)
    assert problem.observed == "--nodes 4 but the srun step runs on 2 nodes (gpu-[07-08])"
    assert problem.fix.startswith("pass --nodes 2")


def test_nodes_flag_against_pbs_and_torchrun() -> None:
    [pbs] = shape_problems(job_of("pbs_2node"), 3)
    assert pbs.observed == "--nodes 3 but the PBS job has 2 nodes (gn[017-018])"
    assert "select=3" in pbs.fix
    [torch] = shape_problems(job_of("torchrun_worker_kubeflow"), 3)
    assert torch.observed == "--nodes 3 but PET_NNODES=2 says 2 nodes"
    assert torch.fix == "pass --nodes 2, or set PET_NNODES to 3"


def test_nproc_flag_against_torchrun() -> None:
    [problem] = shape_problems(job_of("torchrun_worker_kubeflow"), 2, 8)
    assert (problem.code, problem.observed) == (
        "job-shape-mismatch", "--nproc-per-node 8 but PET_NPROC_PER_NODE=4")


def test_srun_without_ntasks_per_node_1() -> None:
    [problem] = shape_problems(job_of("slurm_ntasks8_step"), 2, 8)
    assert problem.code == "too-many-tasks-per-node"
    assert problem.observed == ("srun started 8 ddpcheck tasks on hgx-h100-017 "
                                "(SLURM_STEP_TASKS_PER_NODE=8(x2)); each would start its own "
                                "torchrun")
    assert "srun --ntasks-per-node=1" in problem.fix
    assert problem.hosts == ("hgx-h100-017",)


def test_tasks_differ_from_gpus() -> None:
    job = job_of("slurm_ntasks8_step", SLURM_GPUS_ON_NODE="4")
    problems = shape_problems(job, 2, 4)
    assert codes(problems) == ["too-many-tasks-per-node", "tasks-gpus-mismatch"]
    assert problems[1].observed == ("8 Slurm tasks per node (SLURM_STEP_TASKS_PER_NODE=8(x2)) "
                                    "but 4 GPUs per node (SLURM_GPUS_ON_NODE=4)")
    assert "--ntasks-per-node=4" in problems[1].fix and "--gres=gpu:4" in problems[1].fix


def test_batch_script_tasks_differ_from_gpus() -> None:
    job = job_of("slurm_4node_gres8_batch", SLURM_NTASKS_PER_NODE="4", SLURM_NTASKS="16")
    assert codes(shape_problems(job, 4, 8)) == ["tasks-gpus-mismatch", "not-launched-per-node"]


def test_batch_script_runs_on_one_node_only() -> None:
    job = job_of("slurm_4node_gres8_batch")
    [problem] = shape_problems(job, 4, 8)
    assert problem.code == "not-launched-per-node"
    assert problem.observed == ("ddpcheck runs in the batch script on gpu-01 only (no srun "
                                "step), but the Slurm allocation has 4 nodes (gpu-[01-04])")
    assert problem.fix == "srun --ntasks-per-node=1 ddpcheck run --nodes 4 ..."
    assert shape_problems(job, 1, 8) == []  # checking one node from the batch script is fine


def test_node_rank_out_of_range() -> None:
    [problem] = shape_problems(job_of("byhand_master_env"), 1)
    assert problem.code == "node-rank-invalid"
    assert problem.observed == "node rank 1 (NODE_RANK=1) but --nodes 1: valid ranks are 0-0"
    job = job_of("torchrun_worker_kubeflow", PET_NODE_RANK="2")
    [problem] = shape_problems(job, None)
    assert problem.observed == ("node rank 2 (PET_NODE_RANK=2) but PET_NNODES=2 says 2 nodes: "
                                "valid ranks are 0-1")


def test_wrong_nodes_flag_hides_the_rank_it_implies() -> None:
    job = job_of("torchrun_worker_kubeflow")
    assert codes(shape_problems(job, 1)) == ["job-shape-mismatch"]


def test_host_not_in_slurm_node_list() -> None:
    job = job_of("slurm_2node_srun_step", SLURMD_NODENAME="gpu-99")
    [problem] = shape_problems(job, 2, 4)
    assert problem.code == "node-not-in-allocation"
    assert problem.observed == "this host (gpu-99) is not in the Slurm node list gpu-[07-08]"
    assert problem.hosts == ("gpu-99",)


def test_too_few_gpus_for_the_flags() -> None:
    [problem] = shape_problems(job_of("slurm_2node_srun_step"), 2, 4, 2)
    assert problem.code == "too-few-gpus"
    assert problem.observed == ("--nproc-per-node 4 x --gpus-per-replica 2 needs 8 GPUs per node "
                                "but the Slurm job gives this node 4 (SLURM_GPUS_ON_NODE=4)")
    assert problem.fix == ("lower --nproc-per-node to 2, or request 8 GPUs per node "
                           "(e.g. --gres=gpu:8)")


def test_codes_are_registered() -> None:
    for code in CODES:
        assert diagnoses.CATALOGUE[code].code == code
    problems = shape_problems(job_of("slurm_ntasks8_step", SLURM_GPUS_ON_NODE="4"), 3, 16)
    assert {p.code for p in problems} <= set(diagnoses.CATALOGUE)
    assert all(p.summary and p.cause and p.fix for p in problems)
