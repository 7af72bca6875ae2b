"""``ddpcheck run`` with --expect-busbw on gloo: judged only at the sizes the rule allows.

World tier: real torchrun, 2 gloo ranks on this host. The expectation is out of reach, so
the run must fail, and the failure must say which sizes were judged; the rows below the
judge rule's size are in the report, unjudged.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.world


def test_expect_busbw_is_judged_only_from_4_mib_on_gloo(ddpcheck_run):
    run = ddpcheck_run("--stages", "rendezvous,bandwidth", "--expect-busbw", "100000")
    assert run.finish() == 1, run.stdout + run.stderr
    report = run.report()
    [p] = [p for p in report["problems"] if p["code"] == "below-expected-bandwidth"]
    assert "(--expect-busbw)" in p["observed"]
    assert "judged at messages of at least 4 MiB" in p["observed"]
    sweep = report["measurements"]["allreduce_sweep"]
    assert {r["size"] for r in sweep if r["judged"]} == {4 << 20, 16 << 20}
    assert all(r["iters"] >= 2 for r in sweep)
    assert "# Judged bus bandwidth" in run.stdout
