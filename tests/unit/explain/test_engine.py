"""The engine on logs it was not written from: development cases changed the way unseen logs
differ (tests/helpers/explain_perturb.py). Never a held-out case."""

from __future__ import annotations

import pytest

from tests.helpers import explain_perturb as perturb

# At most this share of the changed cases may get a confident wrong cause (today: 1 of ~146
# when the deciding lines go, 3 when the confirmed code's rules go: rules of two codes that
# read one line, e.g. "Unable to find address for: X" as a host or an interface name).
MAX_WRONG = 0.03


@pytest.fixture(scope="module")
def cases() -> list[perturb.DevCase]:
    found = list(perturb.dev_cases())
    assert len(found) >= 100
    return found


def test_without_its_deciding_lines_a_case_is_not_given_another_cause(cases):
    got = perturb.tally(cases, perturb.drop_deciding_lines)
    assert len(got["wrong"]) <= MAX_WRONG * len(cases), got["wrong"]
    assert len(got["abstain"]) + len(got["none"]) >= 0.9 * len(cases)


def test_without_the_rules_of_its_code_a_case_is_not_given_another_cause(cases):
    got = perturb.tally(cases, perturb.code_out)
    assert len(got["wrong"]) <= MAX_WRONG * len(cases), got["wrong"]


def test_without_the_rules_of_its_family_a_case_is_not_given_another_cause(cases):
    got = perturb.tally(cases, perturb.family_out)
    assert len(got["wrong"]) <= MAX_WRONG * len(cases), got["wrong"]


def test_prefixes_and_timestamps_stripped_give_the_same_answer(cases):
    got = perturb.tally(cases, perturb.stripped)
    assert got["same"] == [c.id for c in cases], {k: v for k, v in got.items() if k != "same"}


def test_ranks_interleaved_otherwise_give_the_same_answer(cases):
    prefixed = [c for c in cases if perturb.has_rank_prefixes(c)]
    assert prefixed
    for seed in (1, 2, 3):
        got = perturb.tally(prefixed, lambda c, s=seed: perturb.interleaved(c, s))
        assert len(got["same"]) == len(prefixed), (seed, got)


# Healthy logs added beside each case here: every case gets this many, in turn, so every
# healthy log meets about len(cases) * NOISES_PER_CASE / len(noises) cases (~36 of 196). Every
# pair (27 x 196 explains, ~25 s) is bench.explain_robustness's "add a healthy log" line.
NOISES_PER_CASE = 5


def noise_pairs(n_cases: int, n_noises: int) -> list[tuple[int, int]]:
    """(case, noise) index pairs: case i with noises i*k .. i*k+k-1 (mod n_noises)."""
    k = min(NOISES_PER_CASE, n_noises)
    return [(i, (i * k + j) % n_noises) for i in range(n_cases) for j in range(k)]


def test_noise_pairs_give_every_case_and_every_healthy_log_its_share():
    pairs = noise_pairs(196, 27)
    per_noise = {n: sum(1 for _, m in pairs if m == n) for n in range(27)}
    assert {i for i, _ in pairs} == set(range(196))
    assert min(per_noise.values()) >= 196 * NOISES_PER_CASE // 27
    assert all(len({n for i, n in pairs if i == c}) == NOISES_PER_CASE for c in range(196))


def test_a_healthy_log_added_beside_a_case_never_gives_another_cause(cases):
    noises = perturb.healthy_texts()
    assert len(noises) >= 10
    wrong = [(cases[i].id, noises[n][0]) for i, n in noise_pairs(len(cases), len(noises))
             if perturb.outcome(perturb.with_noise(cases[i], noises[n]), cases[i].cause)
             == "wrong"]
    assert wrong == []


def test_a_hint_before_the_cause_grade_line_of_its_code_does_not_make_the_problem_a_hint():
    from ddpcheck.diagnoses import RANK_KILLED
    from ddpcheck.explain.causality import CAUSE, HINT
    from ddpcheck.explain.engine import _match
    from ddpcheck.explain.matching import pattern
    from ddpcheck.explain.reader import record

    hint = pattern(RANK_KILLED, r"bare hint line", "next", grade=HINT)
    cause = pattern(RANK_KILLED, r"cause in its own words", "next")
    records = [record("log", 1, "E1124 10:00:01 bare hint line"),
               record("log", 2, "E1124 10:00:02 cause in its own words")]
    (found,) = _match(records, [hint, cause])
    assert found.grade == CAUSE
    assert found.first.lineno == 1  # still the first line of the problem in time
    (alone,) = _match(records[:1], [hint, cause])
    assert alone.grade == HINT


def test_torchruns_error_file_bookkeeping_is_no_failure_line():
    """error_handler.py dump_error_file logs it at ERROR after any worker wrote error.json
    (runs/netns-socket-ifname-lo); it must not stand as an unexplained first failure."""
    from ddpcheck.explain import explain_texts

    line = ("E1124 14:07:25.323000 13620 torch/distributed/elastic/multiprocessing/errors/"
            "error_handler.py:145] no error file defined for parent, to copy child error file "
            "(/tmp/logs/none_04jcdl0d/attempt_0/0/error.json)\n")
    e = explain_texts([("console.log", line)])
    assert not [p for p in e.problems if p.code == "unexplained"]


def test_the_title_of_torchruns_failure_summary_is_no_failure_line():
    """errors/__init__.py format_msg: "{entrypoint} FAILED" above its Failures block."""
    from ddpcheck.explain import explain_texts

    e = explain_texts([("console.log", "bench/real_runs_train.py FAILED\n")])
    assert not [p for p in e.problems if p.code == "unexplained"]
    e = explain_texts([("pytest.log", "tests/test_a.py::test_b FAILED\n")])
    assert [p.code for p in e.problems] == ["unexplained"]


def test_the_json_outcome_is_one_word_for_each_verdict():
    from ddpcheck.explain import explain_texts

    healthy = explain_texts([("job.log", "step 1 loss 0.3\ndone\n")])
    assert healthy.to_json()["outcome"] == "no-failure" and healthy.exit_code == 0
    named = explain_texts([("job.log", "RuntimeError: Address already in use\n")])
    assert named.to_json()["outcome"] == "explained"
    assert named.to_json()["root_cause_determined"] is True
    vague = explain_texts([("job.log", "torch.distributed.elastic.rendezvous.api."
                                       "RendezvousTimeoutError\n")])
    assert vague.to_json()["outcome"] == "undetermined"
    assert vague.to_json()["root_cause_determined"] is False
