"""explain on whole logs of real failed jobs, recorded by ``bench/explain_real_runs.py``.

Each directory of ``tests/data/explain/runs/`` is what a user had after a real torchrun /
mp.spawn / python job (torch 2.13, gloo, CPU) with one injected fault: ``console.log`` and,
for torchrun ``--log-dir``, the per-rank stdout/stderr and error.json tree. ``MANIFEST.json``
names the fault and its code. Nothing runs here: the files are explained as they are.
``runs-torch1.13/``, ``runs-torch2.1/``, ... hold the same scenarios recorded under that torch
release (bench/explain_real_runs.py run with a venv of it); each of their MANIFEST verdicts is
checked the same way.
"""

from __future__ import annotations

import json

import pytest

from ddpcheck.explain.engine import explain_inputs
from ddpcheck.explain.inputs import read_inputs
from tests.helpers.paths import DATA

RUNS = DATA / "explain" / "runs"
MANIFEST = json.loads((RUNS / "MANIFEST.json").read_text())
# The same scenarios recorded under older torch releases (runs-torch1.13, runs-torch2.1, ...:
# the venv's torch, same bench), whose launcher, store and gloo word things their own way, and
# under launch wrappers (runs-wrappers: accelerate launch, Lightning's and DeepSpeed's
# launchers, bench/real_runs_wrappers.py).
VERSIONS = sorted(d for d in (DATA / "explain").glob("runs-torch*")
                  if (d / "MANIFEST.json").is_file())
WRAPPED = DATA / "explain" / "runs-wrappers"
# GPU jobs (NCCL on an H100, bench/real_runs_gpu.py), recorded on the device tool's machine
GPU = DATA / "explain" / "runs-gpu"
EVERY = [(d, e) for d in [RUNS, *VERSIONS, WRAPPED, GPU]
         for e in json.loads((d / "MANIFEST.json").read_text())]


def _explain(name: str, runs=RUNS):
    return explain_inputs(read_inputs([str(runs / name)], None))


@pytest.mark.parametrize(("runs", "entry"), EVERY,
                         ids=[f"{d.name}/{e['id']}" for d, e in EVERY])
def test_the_injected_cause_is_the_first_root_cause_or_explain_abstains(runs, entry):
    ex = _explain(entry["id"], runs)
    causes = [p for p in ex.problems if not p.consequence_of]
    if entry["cause"] == "none":  # a healthy run, however much it logged
        assert not causes and ex.exit_code == 0, (entry["fault"], causes)
        return
    assert causes, entry["fault"]
    if entry["verdict"] == "abstained":  # the log does not tell: never a confident guess
        assert ex.undetermined, (entry["fault"], causes[0].code)
        return
    assert causes[0].code == entry["cause"], entry["fault"]
    if entry["mention"]:  # the user's own exception, quoted with its frame
        text = ex.render_text()
        assert entry["mention"] in text and entry.get("script", "real_runs_train.py") in text


@pytest.mark.parametrize("runs", VERSIONS, ids=[d.name for d in VERSIONS])
def test_each_older_torch_recorded_every_scenario_with_its_console(runs):
    entries = json.loads((runs / "MANIFEST.json").read_text())
    # the 36 scenarios of stop 29 (scenarios added later to the bench are recorded in runs/
    # first; an older release's directory gets them when it is recorded again)
    assert {e["id"] for e in entries} <= {e["id"] for e in MANIFEST} and len(entries) >= 36
    for e in entries:  # one console of two nodes may be empty (a store host killed waiting)
        assert any(c.read_text().strip() for c in (runs / e["id"]).glob("console*.log")), e
        assert (runs / e["id"] / "console.log").is_file(), e["id"]


def test_the_recorded_runs_cover_every_launcher_and_are_whole():
    assert {e["launcher"] for e in MANIFEST} >= {"logdir", "console", "spawn", "python"}
    for e in MANIFEST:
        assert (RUNS / e["id"] / "console.log").read_text().strip(), e["id"]
    # torchrun --log-dir: the per-rank files beside the console, for every run whose workers
    # started (an agent that failed before them, e.g. its store's port in use, writes none)
    trees = [e["id"] for e in MANIFEST if list((RUNS / e["id"]).rglob("stderr.log"))]
    assert len(trees) >= 8
    assert all(list((RUNS / i).rglob("error.json")) for i in ("user-exception", "disk-full"))


def test_a_user_exception_names_the_rank_that_failed_first_and_its_frame():
    ex = _explain("user-exception")
    root = ex.problems[0]
    assert root.code == "unexplained" and root.ranks == (1,)
    assert "KeyError: 'labels'" in root.observed and "in inject" in root.observed
    assert {p.code for p in ex.problems[1:]} >= {"peer-unreachable"}
    assert all(p.consequence_of for p in ex.problems[1:])


def test_the_log_dir_alone_names_the_rank_whose_error_json_is_earliest():
    """No console (no Root Cause block): torchrun's own rule, the earliest error.json."""
    (tree,) = (RUNS / "user-exception" / "logs").iterdir()
    ex = explain_inputs(read_inputs([str(tree)], None))
    root = ex.problems[0]
    assert root.code == "unexplained" and root.ranks == (1,)
    assert "KeyError: 'labels'" in root.observed


def test_the_log_dir_alone_without_the_killed_ranks_lines_abstains():
    """A SIGKILLed rank leaves no error.json and no traceback: only the console says so."""
    ex = explain_inputs(read_inputs([str(RUNS / "sigkill" / "logs")], None))
    assert ex.undetermined


def test_a_sigkill_before_torchruns_sigterm_teardown_is_the_root_on_its_own_rank():
    """Console only: the peers' "Connection reset by peer" came first in the text, but the
    Root Cause block's rank 1 shows exitcode -9 while torchrun ended the others by SIGTERM."""
    ex = _explain("sigkill-console")
    assert ex.problems[0].code == "host-out-of-memory" and ex.problems[0].ranks == (1,)
    assert not ex.undetermined


def test_a_rank_busy_alone_is_where_the_cause_is_and_next_says_how_to_confirm_it():
    ex = _explain("fresh-rank1-slow-save")
    busy = ex.problems[0]
    assert busy.code == "rank-zero-only-step-timeout" and busy.ranks == (1,)  # not the waiter
    next_run = ex.to_json()["next"][busy.code]
    assert "py-spy dump" in next_run and "--stages" not in next_run


def test_the_rank_sigkill_hit_is_named_not_the_ranks_torchrun_tore_down_with_sigterm():
    killed = _explain("fresh-sigkill-rank2-of-3").problems[0]
    assert killed.code == "host-out-of-memory" and killed.ranks == (2,)
    assert "-15" not in killed.observed


# The worlds of bench/real_runs_worlds.py: two namespace hosts (one console and one --log-dir
# tree per node), a 1 MiB /dev/shm, a memory cgroup.
def test_two_nodes_consoles_and_log_dirs_are_all_recorded():
    ids = {e["id"] for e in MANIFEST if e["id"].startswith("netns-") and e["id"] !=
           "netns-socket-ifname-no-address"}
    assert len(ids) >= 8
    for i in ids:
        assert (RUNS / i / "console-node1.log").read_text().strip(), i


def test_of_two_nodes_the_earliest_root_cause_block_names_the_node_that_dialled_loopback():
    """node1's name maps to 127.0.1.1: node0's rank 0 is refused at 127.0.1.1 and fails
    first; node1's own block (rank 1, 25 s later) is read first but is not the first."""
    ex = _explain("netns-hostname-loopback")
    root = ex.problems[0]
    assert root.code == "hostname-loopback" and not ex.undetermined
    assert "127.0.1.1" in root.observed


def test_a_master_addr_missing_from_one_nodes_hosts_file_is_named_on_that_node():
    ex = _explain("netns-master-addr-not-in-hosts")
    root = ex.problems[0]
    assert root.code == "master-addr-unresolvable" and "node0:" in root.observed
    hit = next(e for e in ex.found if e.problem.code == root.code)
    assert hit.evidence[0].split(":")[0].endswith("console-node1.log")


def test_a_tiny_dev_shm_behind_the_dataloader_wrapper_is_the_cause():
    root = _explain("shm-too-small").problems[0]
    assert root.code == "dev-shm-too-small" and "No space left on device" in root.observed


def test_the_memory_cgroups_oom_kill_is_named_on_the_rank_it_killed():
    root = _explain("cgroup-oom").problems[0]
    assert root.code == "host-out-of-memory" and root.ranks == (1,)


def test_what_the_logs_of_both_nodes_cannot_tell_stays_undetermined():
    """No line says which node was meant to host the store (an endpoint on node0's second
    NIC, --master-addr of the other node), nor that a firewall, not a wrong interface,
    refused gloo's port: explain abstains."""
    for name in ("netns-endpoint-not-recognised", "netns-master-addr-other-node",
                 "netns-peer-ports-rejected"):
        assert _explain(name).undetermined, name


def test_a_rank_named_absent_by_the_monitored_barrier_that_raised_is_the_root():
    """TORCH_DISTRIBUTED_DEBUG=DETAIL: rank 0's monitoredBarrier names rank 1 as not arriving
    (rank-never-joined, on rank 1); rank 1's own exception is why, quoted with its frame."""
    ex = _explain("verbose-user-exception")
    root = ex.problems[0]
    assert root.code == "unexplained" and root.ranks == (1,)
    assert "KeyError: 'labels'" in root.observed and "real_runs_train.py" in root.observed
    joined = next(p for p in ex.problems if p.code == "rank-never-joined")
    assert joined.ranks == (1,) and joined.consequence_of == "unexplained"


def test_the_wrapper_runs_cover_both_wrappers_and_are_whole():
    entries = json.loads((WRAPPED / "MANIFEST.json").read_text())
    assert {e["launcher"] for e in entries} >= {"accelerate", "lightning"}
    for e in entries:
        assert (WRAPPED / e["id"] / "console.log").read_text().strip(), e["id"]


def test_lightnings_observer_names_the_rank_sigkill_hit():
    """No collective failed (rank 0 was evaluating): Lightning's child-process observer's
    "[rank: 1] Child process with PID N terminated with code -9" is the only word of it."""
    ex = explain_inputs(read_inputs([str(WRAPPED / "lightning-sigkill-rank0-busy")], None))
    root = ex.problems[0]
    assert root.code == "host-out-of-memory" and root.ranks == (1,) and not ex.undetermined


# Stop 30: failures users hit that the scenarios above lacked (bench/explain_real_runs.py
# STOP30), recorded before any rule was written for them.
STOP30 = [e for e in MANIFEST if e["id"].startswith("s30-")]


def test_stop_30s_runs_are_recorded_and_none_is_a_confident_wrong_answer():
    assert len(STOP30) >= 10
    assert all(e["verdict"] in ("right", "abstained") for e in STOP30)


def test_a_stopped_rank_is_the_one_the_timeout_waited_for_not_an_oom():
    root = _explain("s30-rank-sigstop").problems[0]
    assert root.code == "collective-timeout" and root.ranks == (1,)


def test_the_log_dir_alone_names_the_rank_whose_dataloader_worker_was_killed():
    (tree,) = (RUNS / "s30-loader-worker-killed" / "logs").iterdir()
    ex = explain_inputs(read_inputs([str(tree)], None))
    root = ex.problems[0]
    assert root.code == "host-out-of-memory" and root.ranks == (1,) and not ex.undetermined


def test_a_sigterm_to_torchrun_is_an_interrupted_run_and_two_rank_zero_nodes_an_overlap():
    assert _explain("s30-agent-sigterm").problems[0].code == "run-interrupted"
    assert _explain("s30-netns-same-node-rank").problems[0].code == "rank-overlap"


def test_what_the_logs_cannot_tell_stays_an_abstention():
    """A DROPped peer port and a node dialing another --master-port both read as a connect
    timeout (c10d retries a refused connect until its timeout, socket.cpp): either may be a
    firewall, a wrong address or port."""
    for name in ("s30-netns-peer-ports-dropped", "s30-netns-master-port-differs"):
        assert _explain(name).undetermined, name


# Stop 30, second batch (bench/explain_real_runs.py STOP30B), recorded and scored with main's
# explain before any rule was written for them.
STOP30B = [e for e in MANIFEST if e["id"].startswith("s30b-")]


def test_stop_30s_second_batch_is_recorded_and_none_is_a_confident_wrong_answer():
    assert len(STOP30B) >= 8
    assert all(e["verdict"] in ("right", "abstained") for e in STOP30B)
    # one healthy run among them: two nodes with different --nproc-per-node still finish
    assert {e["cause"] for e in STOP30B} >= {"none", "unexplained", "collective-desync"}


def test_a_rank_that_called_sys_exit_1_is_the_rank_that_exited_not_its_lost_peer():
    root = _explain("s30b-rank-sys-exit-1").problems[0]
    assert root.code == "rank-exited" and root.ranks == (1,) and not root.consequence_of


def test_a_dataloader_workers_exception_is_quoted_with_the_users_dataset_frame():
    ex = _explain("s30b-loader-worker-exception")
    root = ex.problems[0]
    assert root.code == "unexplained" and root.ranks == (1,)
    assert "ValueError: corrupt sample 20" in ex.render_text()


def test_a_stale_init_file_and_a_subgroup_of_one_rank_stay_abstentions():
    """Neither log names its cause: a refused loopback peer of one node (the stale file's
    address) and a rank last seen "creating the evaluation subgroup" while rank 0 timed out."""
    for name in ("s30b-stale-init-file", "s30b-subgroup-some-ranks"):
        ex = _explain(name)
        assert ex.undetermined, name
        assert {p.code for p in ex.problems} & {"hostname-loopback",
                                                 "rank-zero-only-step-timeout"} == set(), name


def test_ddp_with_uneven_inputs_is_a_desync_of_backward_and_the_final_barrier():
    root = _explain("s30b-ddp-uneven-inputs").problems[0]
    assert root.code == "collective-desync" and root.ranks == (0, 1)
    assert "backward" in root.observed and "barrier" in root.observed


def test_two_nodes_on_different_torch_releases_are_a_version_mismatch():
    ex = _explain("s30b-netns-torch-versions-differ")
    assert ex.problems[0].code == "version-mismatch" and not ex.undetermined


def test_two_nodes_with_different_nproc_per_node_finish_and_explain_says_so():
    ex = _explain("s30b-netns-nproc-differs")
    assert not ex.problems and ex.exit_code == 0
