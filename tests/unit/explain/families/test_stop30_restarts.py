"""Launch wrappers and warnings (stop 30): DeepSpeed's launcher line names no failed rank,
Lightning's observer names a local one, and a warning is no cause of an exception a rank
raised itself. Lines as recorded in tests/data/explain/runs-wrappers and runs/ (torch 2.13,
DeepSpeed 0.19.8, Lightning 2.6.6, CPU/gloo), each with the producer's source."""

from __future__ import annotations

from ddpcheck.explain import explain_texts
from ddpcheck.explain.engine import explain_inputs
from ddpcheck.explain.globalranks import apply
from ddpcheck.explain.inputs import read_inputs
from ddpcheck.explain.reader import read_text
from tests.helpers.paths import DATA
from tests.unit.explain.families.helpers import first_cause

WRAPPED = DATA / "explain" / "runs-wrappers"
RUNS = DATA / "explain" / "runs"
# lightning/fabric/strategies/launchers/subprocess_script.py _ChildProcessObserver._run:
# rank=(i + 1), the child's index among this node's processes
OBSERVER = ("[rank: 1] Child process with PID 26153 terminated with code -9. Forcefully "
            "terminating all other processes to avoid zombies 🧟")
# lightning/fabric/utilities/distributed.py _init_dist_connection
MEMBER = "Initializing distributed: GLOBAL_RANK: {g}, MEMBER: {m}/{w}"
# ProcessGroupGloo.cpp: the loopback fallback, a warning torch prints where the host name
# does not resolve (common in containers; harmless on one node)
LOOPBACK = ("[default0]:[W1124 16:50:20.123456 ProcessGroupGloo.cpp:514] Warning: Unable to "
            "resolve hostname to a (local) address. Using the loopback address as fallback. "
            "Manually set the network interface to bind to with GLOO_SOCKET_IFNAME. (function "
            "operator())")


def _observer_rank(*lines: str) -> int | None:
    text = "\n".join(lines) + "\n"
    return next(r.rank for r in apply(read_text("n.out", text), {"n.out": text})
                if "Child process" in r.text)


def test_lightnings_observer_rank_is_local_made_global_from_the_nodes_members():
    # one node, the whole world: local is global
    assert _observer_rank(MEMBER.format(g=0, m=1, w=2), MEMBER.format(g=1, m=2, w=2),
                          OBSERVER) == 1
    # node 1 of two, two processes each: its members are ranks 2 and 3, local 1 is rank 3
    assert _observer_rank(MEMBER.format(g=2, m=3, w=4), MEMBER.format(g=3, m=4, w=4),
                          OBSERVER) == 3


def test_lightnings_sigterm_notifier_names_a_local_rank_too():
    # signal_connector.py _sigterm_notifier_fn: rank_prefixed_message(..., trainer.local_rank)
    text = "\n".join([MEMBER.format(g=2, m=3, w=4), MEMBER.format(g=3, m=4, w=4),
                      "[rank: 0] Received SIGTERM: 15"]) + "\n"
    assert apply(read_text("n", text), {"n": text})[2].rank == 2
    alone = "[rank: 0] Received SIGTERM: 15\n"
    assert apply(read_text("n", alone), {"n": alone})[0].rank is None


def test_near_miss_an_observer_rank_the_log_cannot_place_is_no_rank():
    assert _observer_rank(OBSERVER) is None  # no member line: the node's offset is unknown
    # members not one node's whole run (one missing): unknown too
    assert _observer_rank(MEMBER.format(g=5, m=6, w=8), MEMBER.format(g=6, m=7, w=8),
                          OBSERVER) is None
    # Lightning's other "[rank: N]" lines (rank_prefixed_message with the global rank) keep it
    text = "[rank: 3] Seed set to 42\n"
    assert apply(read_text("n", text), {"n": text})[0].rank == 3


def test_the_recorded_lightning_kill_stays_on_rank_1():
    ex = explain_inputs(read_inputs([str(WRAPPED / "lightning-sigkill-rank0-busy")], None))
    causes = [p for p in ex.problems if not p.consequence_of]
    assert causes[0].code == "host-out-of-memory" and 1 in causes[0].ranks


def test_deepspeeds_launcher_line_names_no_failed_rank():
    # deepspeed/launcher/launch.py sigkill_handler logs f"{cmd} exits with return code = ..."
    # with `cmd` the last rank it spawned ('--local_rank=1'), whichever rank failed: rank 0
    # exited 1 in deepspeed-rank-exits-early, rank 1 had exited 0 before
    for name in ("deepspeed-rank-exits-early", "deepspeed-user-exception", "deepspeed-sigkill"):
        ex = explain_inputs(read_inputs([str(WRAPPED / name)], None))
        for p in ex.problems:
            if "exits with return code" in p.observed and p.code in ("rank-exited",
                                                                      "rank-killed",
                                                                      "host-out-of-memory"):
                assert p.ranks == (), (name, p.code, p.ranks)
    ex = explain_inputs(read_inputs([str(WRAPPED / "deepspeed-rank-exits-early")], None))
    lead = next(p for p in ex.problems if not p.consequence_of)
    assert lead.code == "rank-never-joined" and lead.ranks == (1,)  # "exits successfully"


def test_a_users_own_exception_outranks_a_warning_printed_before_it():
    console = (RUNS / "user-exception-console" / "console.log").read_text()
    ex = explain_texts([("console.log", LOOPBACK + "\n" + console)])
    lead = next(p for p in ex.problems if not p.consequence_of)
    assert lead.code == "unexplained" and "KeyError: 'labels'" in lead.observed
    assert lead.ranks == (1,)
    assert any(p.code == "hostname-loopback" and p.consequence_of for p in ex.problems)


def test_near_miss_a_warning_keeps_its_lead_over_the_errors_it_explains():
    # gloo's own connect error after its loopback fallback is what the fallback makes peers
    # print (a RuntimeError, not an exception of the rank's own code)
    assert first_cause(LOOPBACK, "Traceback (most recent call last):",
                       '  File "train.py", line 3, in <module>',
                       "RuntimeError: Gloo connectFullMesh failed with [../third_party/gloo/"
                       "gloo/transport/tcp/pair.h:301] Connect timeout [none]") == \
        "hostname-loopback"
    # the recorded two-node run whose node1 warned: still the warning's cause
    ex = explain_inputs(read_inputs([str(RUNS / "netns-own-hostname-not-in-hosts")], None))
    assert next(p for p in ex.problems if not p.consequence_of).code == "hostname-loopback"


# --- one node's --log-dir tree alone (torch 1.13 / 2.1 print no [rankN]: in its files)

OLD = DATA / "explain" / "runs-torch2.1"


def _tree(root):
    return [(str(p), p.read_text()) for p in sorted(root.rglob("*")) if p.is_file()]


def test_one_trees_local_ranks_are_compared_and_said_to_be_local():
    ex = explain_inputs(read_inputs([str(OLD / "mismatch-op" / "logs")], None))
    lead = next(p for p in ex.problems if not p.consequence_of)
    assert lead.code == "collective-desync" and lead.ranks == (0, 1)
    assert any("local ranks" in n for n in ex.notes)
    ex = explain_inputs(read_inputs([str(OLD / "rank0-eval-timeout" / "logs")], None))
    assert next(p for p in ex.problems if not p.consequence_of).code == \
        "rank-zero-only-step-timeout"


def test_near_miss_two_agents_trees_or_a_global_rank_leave_the_ranks_as_they_were():
    # two agents' run directories (a shared log dir holds one <run_id>_<random> per agent):
    # local rank 0 of one is not local rank 0 of the other
    files = _tree(OLD / "mismatch-op" / "logs")
    other = [(name.replace("none_39bb3570", "none_5e0f2a11"), text) for name, text in files]
    ex = explain_texts([*files, *other])
    assert ex.undetermined and not any("local ranks" in n for n in ex.notes)
    # with the console beside it, its summary gives global ranks: no note
    ex = explain_inputs(read_inputs([str(OLD / "mismatch-op")], None))
    assert not any("local ranks" in n for n in ex.notes)
    # torch 2.13's files carry [rankN]: themselves: global, no note
    ex = explain_inputs(read_inputs([str(RUNS / "mismatch-op" / "logs")], None))
    assert not any("local ranks" in n for n in ex.notes)
