"""Root cause before consequences, on real logs joined as one job's output."""

from __future__ import annotations

from ddpcheck.explain import explain_texts
from tests.helpers.paths import DATA

LOGS = DATA / "logs"


def _read(*names: str) -> list[tuple[str, str]]:
    return [(n, (LOGS / n).read_text()) for n in names]


def test_a_crash_comes_before_the_watchdog_timeouts_of_the_others():
    e = explain_texts(_read("watchdog/allreduce-basicsr-737.log", "device/oom-ddp-18853.log"))
    assert [p.code for p in e.problems] == ["cuda-out-of-memory", "collective-timeout"]
    assert e.problems[1].consequence_of == "cuda-out-of-memory"
    assert "consequences" in e.render_text()


def test_torchrun_teardown_signals_follow_the_worker_error():
    e = explain_texts(_read("ddpcheck-run/torchrun-gloo-ifname-eth9.log"))
    assert e.problems[0].code == "socket-ifname-invalid"
    assert e.problems[0].ranks == (0, 1)
    assert {p.code for p in e.problems[1:]} == {"rank-exited", "rank-killed"}
    assert all(p.consequence_of == "socket-ifname-invalid" for p in e.problems[1:])


def test_watchdog_compares_sequence_numbers_across_ranks():
    e = explain_texts(_read("watchdog/allreduce-llamafactory-7396.log"))
    (p,) = e.problems
    assert p.code == "collective-timeout" and p.ranks == (0, 4)
    assert "ALLREDUCE #1580" in p.cause
    d = explain_texts(_read("watchdog/desync-seq-lightning-118369.log")).problems[0]
    assert d.code == "collective-desync" and d.ranks == (0, 7)


def test_a_log_without_a_known_pattern_is_unexplained_with_its_error_lines():
    (p,) = explain_texts(_read("other/unrelated-debugger-5040.log")).problems
    assert p.code == "unexplained" and "Exception escaped from start_client" in p.observed


def test_ambiguous_evidence_names_the_candidates():
    (p,) = explain_texts(_read("rendezvous/c10d-connect-timeout-107021.log")).problems
    assert "firewall" in p.cause and "had not started" in p.cause
    (t,) = explain_texts(_read("rendezvous/errorfile-timeout-avhubert.log")).problems
    assert "does not decide" in t.cause
