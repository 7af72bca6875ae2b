"""A rank that exited quietly (sys.exit(1)), and a loopback peer in a one-node job
(explain.quietexit), on the real runs of stop 30's second batch and their near misses."""

from __future__ import annotations

import re

from ddpcheck.explain import explain_texts
from tests.helpers.paths import DATA

RUNS = DATA / "explain" / "runs"
EXIT_1 = (RUNS / "s30b-rank-sys-exit-1" / "console.log").read_text()
STALE = (RUNS / "s30b-stale-init-file" / "console.log").read_text()


def _causes(text: str):
    ex = explain_texts([("console.log", text)])
    return ex, [p for p in ex.problems if not p.consequence_of]


def test_the_rank_torchrun_lists_with_status_1_and_no_traceback_exited_first():
    """The real run: rank 1 sys.exit(1); rank 0's error.json (Connection closed by peer) is
    what the Root Cause block names."""
    ex, causes = _causes(EXIT_1)
    assert causes[0].code == "rank-exited" and causes[0].ranks == (1,)
    assert "sys.exit" in causes[0].cause and "status 1" in causes[0].cause
    # the rank and how it left are settled: explained, not "a symptom" (noticed at stop 31)
    assert not ex.undetermined and ex.render_text().rstrip().splitlines()[-1].startswith(
        "EXPLAINED")


def test_a_quiet_rank_that_also_printed_a_traceback_is_not_a_quiet_exit():
    """Near miss: the same summary, but rank 1 raised (torchrun without @record prints "To
    enable traceback" for every rank): its own exception is the cause, not a quiet exit."""
    text = EXIT_1.replace(
        "[default1]:2026-11-24", "[default1]:[rank1]: Traceback (most recent call last):\n"
        "[default1]:[rank1]:   File \"/srv/train.py\", line 9, in main\n"
        "[default1]:[rank1]: KeyError: 'labels'\n[default1]:2026-11-24", 1)
    _, causes = _causes(text)
    assert causes[0].code != "rank-exited"


def test_a_rank_ended_by_a_signal_is_no_quiet_exit():
    """Near miss: exitcode -6 (SIGABRT) and no traceback: a signal, not sys.exit."""
    text = re.sub(r"exitcode  : 1 \(pid", "exitcode  : -6 (pid", EXIT_1)
    _, causes = _causes(text)
    assert causes[0].code != "rank-exited"


def test_two_quiet_ranks_leave_it_to_the_other_rules():
    """Near miss: rank 0's entry also quiet with status 1: which left first is not said."""
    text = EXIT_1.replace("exitcode  : -15 (pid: 21473)  (SIGTERM)", "exitcode  : 1 (pid: 21473)")
    text = re.sub(r"error_file: /\S+error\.json\n  traceback : Traceback \(most recent call "
                  r"last\):", "error_file: <N/A>\n  traceback : To enable traceback see: "
                  "https://pytorch.org/docs/stable/elastic/errors.html\n  Traceback (most "
                  "recent call last):", text)
    _, causes = _causes(text)
    assert causes[0].code != "rank-exited" or causes[0].ranks != (1,)


def test_a_loopback_peer_refused_in_a_one_node_job_is_a_symptom_not_a_host_name():
    """The real run: a stale file:// init file sent rank 0 to an address of an earlier run's
    rank 1 (127.0.0.1, refused); every rank is local on one host, so no host name is wrong."""
    ex, causes = _causes(STALE)
    assert "hostname-loopback" not in {p.code for p in causes}
    assert ex.undetermined
    assert "file:// init file" in causes[0].cause


def test_the_same_refusal_with_ranks_on_two_hosts_keeps_the_loopback_hint():
    """Near miss: the summary puts rank 1 on another node (local_rank 0): two nodes."""
    text = STALE.replace("rank      : 1 (local_rank: 1)", "rank      : 1 (local_rank: 0)")
    text = text.replace("host      : localhost\n  rank      : 1",
                        "host      : node1\n  rank      : 1")
    _, causes = _causes(text)
    assert causes[0].code == "hostname-loopback"
