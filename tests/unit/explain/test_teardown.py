"""torchrun's own SIGKILL of a worker that outlived its SIGTERM is no OOM (explain.teardown)."""

from __future__ import annotations

from ddpcheck.explain import explain_texts
from tests.helpers.paths import DATA

SIGSTOP = DATA / "explain" / "runs" / "s30-rank-sigstop" / "console.log"
FORCED = ("W1124 18:46:26.473000 23956 torch/distributed/elastic/multiprocessing/api.py:1047] "
          "Unable to shutdown process 23991 via 15, forcefully exiting via 9")


def _explain(text: str):
    return explain_texts([("console.log", text)])


def _causes(ex):
    return [p for p in ex.problems if not p.consequence_of]


def test_a_stopped_rank_killed_by_torchrun_is_the_rank_the_timeout_waited_for():
    """The real run: rank 1 SIGSTOPped, rank 0's gloo recv timed out, torchrun's SIGTERM went
    unanswered for 30 s and its SIGKILL made the summary say exitcode -9."""
    ex = _explain(SIGSTOP.read_text())
    root = _causes(ex)[0]
    assert root.code == "collective-timeout" and root.ranks == (1,)
    assert "not the OOM killer" in root.cause and "stopped" in root.cause
    assert "ps -o pid,stat,wchan" in root.fix
    assert "host-out-of-memory" not in {p.code for p in ex.problems}
    killed = [p for p in ex.problems if p.code == "rank-killed"]
    assert killed and killed[0].consequence_of == "collective-timeout"
    # who and why are settled by the log's structure: a determined root, not "a symptom"
    assert not ex.undetermined and ex.verdict().startswith("EXPLAINED")
    assert "a symptom, not its root cause" not in ex.render_text()


def test_without_torchruns_forced_kill_line_the_sigkill_stays_the_oom_hint():
    """Near miss: the same console without api.py's "Unable to shutdown" line."""
    text = "\n".join(line for line in SIGSTOP.read_text().splitlines()
                     if "Unable to shutdown" not in line)
    assert _causes(_explain(text))[0].code == "host-out-of-memory"


def test_a_forced_kill_of_another_pid_leaves_this_sigkill_alone():
    text = SIGSTOP.read_text().replace(FORCED, FORCED.replace("23991", "40404"))
    assert _causes(_explain(text))[0].code == "host-out-of-memory"


def test_older_pythons_and_torch_1x_spell_the_signals_by_name_and_exitting():
    for said in ("via Signals.SIGTERM, forcefully exiting via Signals.SIGKILL",
                 "via Signals.SIGTERM, forcefully exitting via Signals.SIGKILL"):
        text = SIGSTOP.read_text().replace("via 15, forcefully exiting via 9", said)
        root = _causes(_explain(text))[0]
        assert (root.code, root.ranks) == ("collective-timeout", (1,)), said


def test_a_forced_kill_with_no_waiter_is_only_a_symptom_never_an_oom():
    ex = _explain("\n".join([
        "W1124 10:00:00.000000 77 torch/distributed/elastic/multiprocessing/api.py:1028] "
        "Sending process 500 closing signal SIGTERM",
        "W1124 10:00:30.000000 77 torch/distributed/elastic/multiprocessing/api.py:1047] "
        "Unable to shutdown process 500 via 15, forcefully exiting via 9",
        "E1124 10:00:30.200000 77 torch/distributed/elastic/multiprocessing/api.py:1002] "
        "failed (exitcode: -9) local_rank: 1 (pid: 500) of binary: /usr/bin/python",
    ]) + "\n")
    assert "host-out-of-memory" not in {p.code for p in ex.problems}
    assert ex.undetermined
