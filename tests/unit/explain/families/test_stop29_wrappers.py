"""How launch wrappers frame a failure (stop 29): Lightning's warning format, its launcher's
child-process observer. Lines as recorded in tests/data/explain/runs-wrappers (Lightning 2.6.6,
torch 2.13, CPU/gloo), each with the wrapper's source that prints it."""

from __future__ import annotations

from ddpcheck.explain import explain_texts
from ddpcheck.explain.failurewords import LOGGED_WARNING
from tests.unit.explain.families.helpers import first_cause

SITE = "/work/venv-wrappers/lib/python3.11/site-packages"
# lightning/fabric/plugins/environments/slurm.py:204 (_validate_srun_used, rank_zero_warn),
# printed through lightning/fabric/utilities/warnings.py _custom_format_warning: no category
SRUN = (f"{SITE}/lightning/fabric/plugins/environments/slurm.py:204: The `srun` command is "
        "available on your system but is not used. HINT: If your intention is to run Lightning "
        "on SLURM, prepend your python command with `srun` like so: srun python "
        "/work/wt-wrappers/bench/real_runs_wrapp ...")
PYTREE = (f"{SITE}/lightning/pytorch/utilities/_pytree.py:21: `isinstance(treespec, LeafSpec)` "
          "is deprecated, use `isinstance(treespec, TreeSpec) and treespec.is_leaf()` instead.")
KEYERROR = ("[rank1]: Traceback (most recent call last):",
            '[rank1]:   File "/work/wt-wrappers/bench/real_runs_train.py", line 92, in inject',
            '[rank1]:     _ = batch["labels"]  # a KeyError of the user\'s own code',
            "[rank1]: KeyError: 'labels'")
# lightning/fabric/strategies/launchers/subprocess_script.py _ChildProcessObserver._run
OBSERVER = ("[rank: 1] Child process with PID {pid} terminated with code {code}. Forcefully "
            "terminating all other processes to avoid zombies 🧟")


def test_lightnings_uncategorised_warning_lines_are_warnings():
    assert LOGGED_WARNING.search(SRUN) and LOGGED_WARNING.search(PYTREE)
    assert LOGGED_WARNING.search(r"C:\Users\me\envs\x\lib\site-packages\lightning\pytorch"
                                 r"\trainer\connectors\data_connector.py:425: The "
                                 "'train_dataloader' does not have many workers")


def test_near_miss_pytest_summary_lines_and_other_packages_stay_what_they_were():
    for line in (f"{SITE}/pytorch_lightning/tests/test_ddp.py:12: AssertionError",
                 f"{SITE}/lightning/pytorch/tests/test_ddp.py:12: in test_fit",
                 f"{SITE}/torch/distributed/run.py:792: the agent",
                 f'  File "{SITE}/lightning/pytorch/trainer/trainer.py", line 584, in fit'):
        assert not LOGGED_WARNING.search(line), line


FORMED = ("Initializing distributed: GLOBAL_RANK: 0, MEMBER: 1/2",
          "Initializing distributed: GLOBAL_RANK: 1, MEMBER: 2/2",
          "distributed_backend=gloo",
          "All distributed processes registered. Starting with 2 processes")
STORE = ("torch.distributed.DistStoreError: Timed out after 13 seconds waiting for clients. "
         "{n}/{w} clients joined.")


def test_the_srun_hint_explains_nothing_once_the_world_formed():
    """runs-wrappers/lightning-user-exception: the hint was read cause-grade and named
    slurm-without-srun over rank 1's KeyError, after Lightning said all ranks registered."""
    assert first_cause(SRUN, FORMED[0], FORMED[1], PYTREE, FORMED[2], FORMED[3],
                       *KEYERROR) == "unexplained"


def test_the_srun_hint_explains_nothing_when_every_member_started():
    """The first recording of lightning-user-exception: rank 1 came 13 s late on two busy
    cores; Lightning's own launcher had started both members (1/2 and 2/2)."""
    assert first_cause(SRUN, FORMED[0], STORE.format(n=1, w=2), FORMED[1]) != \
        "slurm-without-srun"


def test_near_miss_members_of_other_nodes_never_started_is_what_the_hint_explains():
    # one node's 4 of 8 members entered init and the store waited for the rest
    assert first_cause(SRUN, *[f"Initializing distributed: GLOBAL_RANK: {r}, MEMBER: {r + 1}/8"
                               for r in range(4)], STORE.format(n=4, w=8)) == \
        "slurm-without-srun"


def test_near_miss_the_srun_warning_alone_still_says_what_it_says():
    # a warning answers when the log shows no failure at all (and in Python's own format)
    assert first_cause(SRUN) == "slurm-without-srun"
    assert first_cause(SRUN.replace("204: The", "204: PossibleUserWarning: The")) == \
        "slurm-without-srun"


def test_lightnings_observer_names_the_rank_a_signal_ended():
    """runs-wrappers/lightning-sigkill-rank0-busy: rank 1 SIGKILLed while rank 0 evaluated."""
    members = ("Initializing distributed: GLOBAL_RANK: 0, MEMBER: 1/2\n"
               "Initializing distributed: GLOBAL_RANK: 1, MEMBER: 2/2\n")
    e = explain_texts([("console.log", members + SRUN + "\n" + OBSERVER.format(pid=4242, code=-9)
                        + "\n")])
    root = e.problems[0]
    assert root.code == "host-out-of-memory" and root.ranks == (1,)
    # its "[rank: 1]" is the child's LOCAL rank (stop 30, globalranks.OBSERVER): with no line
    # that places this node among the ranks, it is no global rank
    e = explain_texts([("console.log", SRUN + "\n" + OBSERVER.format(pid=4242, code=-9) + "\n")])
    assert e.problems[0].code == "host-out-of-memory" and e.problems[0].ranks == ()
    assert first_cause(OBSERVER.format(pid=4242, code=-11)) == "rank-killed"


def test_near_miss_an_observer_line_with_a_positive_code_is_an_exit_not_a_kill():
    e = explain_texts([("console.log", OBSERVER.format(pid=4242, code=1) + "\n")])
    assert [p.code for p in e.problems] == ["rank-exited"] and e.undetermined


# Lightning's launcher prints no summary of its ranks: their tracebacks share one console
GLOO_PEER = ("[rank0]: RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/"
             "pair.cc:553] Connection closed by peer [127.0.0.1]:20914. This is typically "
             "caused by a remote worker crashing.")
RANK0_TB = ("[rank0]: Traceback (most recent call last):",
            '[rank0]:   File "/work/wt-wrappers/bench/real_runs_wrapped_train.py", line 42, '
            "in sync_metric", "[rank0]:     dist.all_reduce(metric)")


def test_in_one_console_the_rank_whose_own_error_came_before_the_others_waits_is_first():
    """runs-wrappers/lightning-user-exception: rank 1's KeyError, then rank 0's lost peer."""
    e = explain_texts([("console.log", "\n".join([*KEYERROR, *RANK0_TB, GLOO_PEER]) + "\n")])
    root = e.problems[0]
    assert root.code == "unexplained" and root.ranks == (1,)
    assert "KeyError: 'labels'" in root.observed


def test_a_wait_printed_first_or_in_another_file_still_follows_the_one_own_error():
    """Since the stop-29 merge, causality decides before line order does
    (``firstfailure._only_rank_not_waiting``, from torch 1.13's recorded runs): a lost peer
    follows some rank's leaving, and rank 1's KeyError is the only failure that is no wait."""
    e = explain_texts([("console.log", "\n".join([*RANK0_TB, GLOO_PEER, *KEYERROR]) + "\n")])
    assert e.problems[0].ranks == (1,)
    e = explain_texts([("rank1.log", "\n".join(KEYERROR) + "\n"),
                       ("rank0.log", "\n".join([*RANK0_TB, GLOO_PEER]) + "\n")])
    assert e.problems[0].ranks == (1,)


def test_near_miss_when_every_rank_only_waited_no_rank_is_first():
    rank1 = [line.replace("[rank0]", "[rank1]") for line in (*RANK0_TB, GLOO_PEER)]
    e = explain_texts([("console.log", "\n".join([*RANK0_TB, GLOO_PEER, *rank1]) + "\n")])
    assert e.undetermined


# DeepSpeed's launcher, deepspeed/launcher/launch.py (0.19.8), as recorded in
# runs-wrappers/deepspeed-*; its error line names the last rank spawned, not the failed one
DS = "[2026-11-24 16:45:35,020] [INFO] [launch.py:245:main] "
DS_SPAWN = [DS + f"process {6746 + r} spawned with command: ['/work/venv-wrappers/bin/python', "
            f"'-u', 'bench/real_runs_wrapped_train.py', '--local_rank={r}']" for r in (0, 1)]
DS_KILL = ["[2026-11-24 16:45:55,127] [INFO] [launch.py:253:sigkill_handler] Killing subprocess "
           f"{6746 + r}" for r in (0, 1)]
DS_CODE = ("[2026-11-24 16:45:55,127] [ERROR] [launch.py:259:sigkill_handler] ['/work/venv-"
           "wrappers/bin/python', '-u', 'bench/real_runs_wrapped_train.py', '--local_rank=1'] "
           "exits with return code = {code}")
RANK0_LOST = [*RANK0_TB, '[rank0]:   File "/usr/lib/python3.11/site-packages/torch/distributed/'
              'distributed_c10d.py", line 3252, in all_reduce', "[rank0]:     work.wait()",
              GLOO_PEER]


def test_deepspeeds_recorded_sigkill_is_the_root_though_a_peer_printed_first():
    e = explain_texts([("console.log", "\n".join([*DS_SPAWN, *RANK0_LOST, *DS_KILL,
                                                   DS_CODE.format(code=-9)]) + "\n")])
    assert e.problems[0].code == "host-out-of-memory" and not e.undetermined
    assert e.problems[0].ranks == ()  # the line's --local_rank=1 is the last one spawned


def test_near_miss_deepspeeds_code_1_after_a_lost_peer_decides_nothing():
    e = explain_texts([("console.log", "\n".join([*DS_SPAWN, *RANK0_LOST, *DS_KILL,
                                                   DS_CODE.format(code=1)]) + "\n")])
    assert e.undetermined


def test_a_rank_deepspeed_saw_exit_0_never_joined_the_collective_its_peer_lost_it_in():
    done = DS + "Process 6747 exits successfully."
    e = explain_texts([("console.log", "\n".join([*DS_SPAWN, *RANK0_LOST, done, *DS_KILL,
                                                   DS_CODE.format(code=1)]) + "\n")])
    root = e.problems[0]
    assert root.code == "rank-never-joined" and root.ranks == (1,)
    # near miss: the rank that exited 0 is the one that lost its peer: nothing left early
    done0 = DS + "Process 6746 exits successfully."
    e = explain_texts([("console.log", "\n".join([*DS_SPAWN, *RANK0_LOST, done0]) + "\n")])
    assert e.problems[0].code != "rank-never-joined"
