"""Tests for ddpcheck.diagnoses: the catalogue's codes, Problem round trips, fail()."""

from __future__ import annotations

import json
import re

import pytest

from ddpcheck import diagnoses
from ddpcheck.diagnoses import CATALOGUE, Diagnosis, Problem, ProblemFound

KEBAB = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
MODULE_DIAGNOSES = [v for v in vars(diagnoses).values() if isinstance(v, Diagnosis)]


def test_catalogue_is_not_empty_and_holds_every_module_diagnosis():
    assert len(MODULE_DIAGNOSES) >= 20
    for d in MODULE_DIAGNOSES:
        assert CATALOGUE[d.code] is d


@pytest.mark.parametrize("code", sorted(CATALOGUE))
def test_codes_are_kebab_case(code):
    assert KEBAB.match(code), code


def test_codes_are_unique():
    module_codes = [d.code for d in MODULE_DIAGNOSES]
    assert len(module_codes) == len(set(module_codes))
    assert all(key == d.code for key, d in CATALOGUE.items())


def test_registering_a_code_twice_is_refused():
    before = dict(CATALOGUE)
    with pytest.raises(ValueError, match="duplicate diagnosis code rank-killed"):
        diagnoses._d("rank-killed", "s", "c", "f")
    assert CATALOGUE == before


@pytest.mark.parametrize("code", sorted(CATALOGUE))
def test_every_diagnosis_has_summary_cause_and_fix(code):
    d = CATALOGUE[code]
    for text in (d.summary, d.cause, d.fix):
        assert text.strip() and "\n" not in text


def test_problem_takes_the_catalogue_defaults_and_location():
    p = diagnoses.RANK_KILLED.problem("rank 2 was killed", ranks=["2"], hosts=("gpu-a",),
                                      stage="ddp")
    assert p == Problem("rank-killed", diagnoses.RANK_KILLED.summary, "rank 2 was killed",
                        diagnoses.RANK_KILLED.cause, diagnoses.RANK_KILLED.fix, "ddp",
                        ("gpu-a",), (2,), role=diagnoses.RANK_KILLED.role)


def test_problem_cause_and_fix_can_be_overridden():
    p = diagnoses.CHECKPOINT_FAILED.problem("disk full", cause="quota", fix="clean up")
    assert (p.cause, p.fix) == ("quota", "clean up")


def test_problem_rejects_unknown_location_fields():
    with pytest.raises(TypeError, match="unknown location fields"):
        diagnoses.RANK_KILLED.problem("x", node="gpu-a")


def test_problem_round_trips_through_to_dict_and_json():
    p = diagnoses.ENV_MISMATCH.problem("NCCL_IB_HCA differs", ranks=[3, 1], hosts=["b", "a"],
                                       stage="rendezvous")
    data = json.loads(json.dumps(p.to_dict()))
    assert data["ranks"] == [3, 1] and data["code"] == "env-mismatch"
    assert Problem.from_dict(data) == p


def test_from_dict_ignores_unknown_keys_and_fills_missing_location():
    data = {"code": "x", "summary": "s", "observed": "o", "cause": "c", "fix": "f",
            "ranks": ["4"], "extra": 1}
    p = Problem.from_dict(data)
    assert p.ranks == (4,) and p.hosts == () and p.stage == ""


def test_where_returns_a_located_copy():
    p = diagnoses.DDPCHECK_ERROR.problem("boom")
    q = p.where(stage="ddp", ranks=(1,))
    assert (q.stage, q.ranks, q.observed) == ("ddp", (1,), "boom")
    assert (p.stage, p.ranks) == ("", ())


def test_fail_gives_the_problem_found_a_probe_raises():
    with pytest.raises(ProblemFound) as err:
        raise diagnoses.WRONG_COLLECTIVE_RESULT.fail("got 3, expected 4", ranks=[1])
    (p,) = err.value.problems
    assert p.code == "wrong-collective-result" and p.observed == "got 3, expected 4"
    assert p.ranks == (1,)
    assert str(err.value) == "wrong-collective-result: got 3, expected 4"


def test_problem_found_carries_several_problems():
    a = diagnoses.RANK_KILLED.problem("a")
    b = diagnoses.RANK_EXITED.problem("b")
    exc = ProblemFound(a, b)
    assert exc.problems == (a, b)
    assert str(exc) == "rank-killed: a; rank-exited: b"


def test_a_problem_takes_its_role_from_the_catalogue_unless_told():
    assert diagnoses.RANK_KILLED.problem("x").role == diagnoses.ROOT_CAUSE
    assert diagnoses.COLLECTIVE_FAILED.problem("x").role == diagnoses.CONSEQUENCE
    assert diagnoses.DEV_SHM_TOO_SMALL.problem("x").role == ""
    told = diagnoses.RANK_UNRESPONSIVE.problem("x", role=diagnoses.ROOT_CAUSE)
    assert told.role == diagnoses.ROOT_CAUSE
    assert all(d.role in diagnoses.ROLES for d in CATALOGUE.values())


def test_a_problem_written_without_its_role_reads_back_with_the_catalogue_role():
    old = diagnoses.RANK_EXITED.problem("exited with code 1").to_dict()
    del old["role"]
    assert Problem.from_dict(old).role == diagnoses.ROOT_CAUSE
    told = diagnoses.RANK_UNRESPONSIVE.problem("stopped", role=diagnoses.ROOT_CAUSE)
    assert Problem.from_dict(json.loads(json.dumps(told.to_dict()))) == told
