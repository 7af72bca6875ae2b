"""Tests for cluster.deadlines: every deadline grows with the world it waits on."""

from __future__ import annotations

from ddpcheck.cluster import deadlines
from tests.helpers.paths import ROOT


def test_an_agreement_grows_with_ranks_and_payload() -> None:
    assert deadlines.agreement(10, 1) < deadlines.agreement(10, 8192)
    assert deadlines.agreement(10, 8192, 1 << 10) < deadlines.agreement(10, 8192, 64 << 10)
    assert abs(deadlines.agreement(10, 2) - 10) < 0.01  # a small world stays quick


def test_a_probe_grows_with_nodes_and_rounds() -> None:
    base = deadlines.probe(30, 16, 2)
    assert deadlines.probe(30, 16, 2, rounds=3) == base + 3 * deadlines.ROUND_S
    assert deadlines.probe(30, 8192, 1024) > base + 1024 * deadlines.PER_NODE_S


def test_the_verdict_wait_covers_rank_0s_gather_and_report() -> None:
    assert deadlines.verdict(25, 1024, 8192) > deadlines.final_gather(0, 8192)
    assert deadlines.verdict(25, 1024, 8192) > deadlines.outcomes(25, 1024) > 25
    assert deadlines.verdict(25, 2, 4) < 26


def test_the_whole_run_default_grows_with_the_world_and_bounds_the_probes() -> None:
    small = deadlines.whole_run(300.0, 2, 1, 0)
    large = deadlines.whole_run(300.0, 8192, 1024, 15)
    assert 300.0 < small < 301.0
    # 30 agreements of 8,192 payloads alone may take 30 x 16.8 s: the default must cover them
    assert large > 300.0 + 30 * deadlines.agreement(0.0, 8192)
    probes = sum(line.startswith(("def test_", "    def test_"))
                 for f in (ROOT / "checks").glob("test_*.py")
                 for line in f.read_text().splitlines())
    assert probes <= deadlines.PROBES_BOUND, "raise PROBES_BOUND: a session runs more probes"


def test_the_deadline_grows_with_the_rounds() -> None:
    assert deadlines.round_budget(14, 10.0, 20.0) == 160.0
