"""A rank last seen creating a process group is not busy alone (firstfailure.GROUP_SETUP)."""

from __future__ import annotations

from ddpcheck.explain import explain_texts
from tests.helpers.paths import DATA

SUBGROUP = (DATA / "explain" / "runs" / "s30b-subgroup-some-ranks" / "console.log").read_text()


def _causes(text: str):
    ex = explain_texts([("console.log", text)])
    return ex, [p for p in ex.problems if not p.consequence_of]


def test_a_rank_creating_a_subgroup_while_the_other_waits_is_no_solo_step():
    """The real run: rank 1 alone calls dist.new_group (a collective of every rank) while
    rank 0 all_reduces; its last line names an evaluation subgroup. Explain abstains."""
    ex, causes = _causes(SUBGROUP)
    assert causes[0].code != "rank-zero-only-step-timeout"
    assert ex.undetermined


def test_the_same_rank_evaluating_alone_is_still_busy_alone():
    """Near miss: the last line is an evaluation, with no process group in it."""
    text = SUBGROUP.replace("creating the evaluation subgroup", "evaluating on the validation set")
    _, causes = _causes(text)
    assert causes[0].code == "rank-zero-only-step-timeout" and causes[0].ranks == (1,)
