"""A rank timed out in loss.backward() (DDP's gradient all_reduce) beside one in another
collective: uneven inputs (tracebacks.BACKWARD, firstfailure._desync)."""

from __future__ import annotations

from ddpcheck.explain import explain_texts
from ddpcheck.explain.reader import read_text
from ddpcheck.explain.tracebacks import BACKWARD, crashes
from tests.helpers.paths import DATA

UNEVEN = (DATA / "explain" / "runs" / "s30b-ddp-uneven-inputs" / "console.log").read_text()


def _causes(text: str):
    ex = explain_texts([("console.log", text)])
    return ex, [p for p in ex.problems if not p.consequence_of]


def test_the_rank_in_backward_and_the_rank_in_the_barrier_ran_different_steps():
    """The real run: rank 1's shard had 2 batches fewer (no Join); it timed out in the final
    barrier while rank 0 timed out in step 4's loss.backward()."""
    ex, causes = _causes(UNEVEN)
    assert causes[0].code == "collective-desync" and not ex.undetermined
    assert "uneven inputs" in causes[0].cause and "join()" in causes[0].fix


def test_a_timeout_in_torchs_autograd_engine_is_the_backward_collective():
    ranked = {c.rank: c.collective for c in crashes(read_text("c", UNEVEN)) if c.rank is not None}
    assert ranked == {0: BACKWARD, 1: "barrier"}


def test_both_ranks_timed_out_in_backward_is_no_desync():
    """Near miss: the ranks' own lines only (no summary), rank 1's traceback replaced by the
    same backward frames as rank 0's."""
    zero = [ln for ln in UNEVEN.splitlines() if ln.startswith("[default0]:[rank0]:")]
    one = [ln.replace("[default0]:[rank0]:", "[default1]:[rank1]:") for ln in zero]
    _, causes = _causes("\n".join(zero + one))
    assert causes and causes[0].code != "collective-desync"
    # and the same two tracebacks with rank 1's in barrier are the desync
    real = [ln for ln in UNEVEN.splitlines() if ln.startswith("[default1]:[rank1]:")]
    assert _causes("\n".join(zero + real))[1][0].code == "collective-desync"


def test_a_users_own_backward_function_is_not_autograds_engine():
    """Near miss: a frame named backward in the user's model file is no collective."""
    text = UNEVEN.replace("/torch/autograd/graph.py", "/srv/model/graph.py").replace(
        "/torch/autograd/__init__.py", "/srv/model/__init__.py").replace(
        "/torch/_tensor.py", "/srv/model/_tensor.py")
    ranked = {c.rank: c.collective for c in crashes(read_text("c", text)) if c.rank is not None}
    assert ranked[0] != BACKWARD
