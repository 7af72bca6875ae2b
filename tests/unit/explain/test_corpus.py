"""explain over the real logs of tests/data/logs/CORPUS.json: right codes, no wrong cause."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ddpcheck.explain import explain_texts
from ddpcheck.explain.causality import UNDETERMINED
from tests.helpers.paths import DATA

LOGS = DATA / "logs"
CORPUS = json.loads((LOGS / "CORPUS.json").read_text())["logs"]
# Answers that claim no cause (the verdict says the root cause is undetermined): never a
# confident wrong one.
HEDGED = set(UNDETERMINED)


def first_cause(path: Path) -> str:
    e = explain_texts([(path.name, path.read_text())])
    causes = [p.code for p in e.problems if not p.consequence_of]
    return causes[0] if causes else "none"


@pytest.mark.parametrize("entry", CORPUS, ids=[c["file"] for c in CORPUS])
def test_explain_names_the_expected_code(entry):
    assert first_cause(LOGS / entry["file"]) == entry["expected"], entry["source"]


def test_corpus_is_large_and_every_log_has_a_source():
    assert len(CORPUS) >= 40
    for entry in CORPUS:
        assert entry["source"].startswith("https://") and entry["cause"] and entry["expected"]
        assert (LOGS / entry["file"]).read_text().strip()


def test_accuracy_at_least_90_percent_and_no_confident_wrong_cause():
    answers = [(first_cause(LOGS / c["file"]), c["expected"]) for c in CORPUS]
    right = sum(got == want for got, want in answers)
    confident_wrong = [(g, w) for g, w in answers if g != w and g not in HEDGED | {"none"}]
    assert right / len(answers) >= 0.9, answers
    assert confident_wrong == []
