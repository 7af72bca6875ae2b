"""bench.explain_score: the verdict of each case and the batch scored on its own.

Runs the bench's own functions on a tiny corpus written here (two healthy-looking logs and
one failure), so the counts it prints are checked against cases whose answer is known.
"""

from __future__ import annotations

import json
from pathlib import Path

from bench import explain_score

FAILED = "RuntimeError: CUDA error: invalid device ordinal\n"


def _corpus(tmp_path: Path) -> Path:
    (tmp_path / "dev").mkdir()
    (tmp_path / "heldout").mkdir()
    (tmp_path / "dev" / "a.log").write_text(FAILED)
    (tmp_path / "heldout" / "b.log").write_text(FAILED)
    (tmp_path / "dev" / "c.log").write_text(FAILED)
    cases = [
        {"id": "a", "split": "dev", "file": "dev/a.log", "cause": "none", "family": "healthy"},
        {"id": "b", "split": "heldout", "file": "heldout/b.log", "cause": "none",
         "family": "healthy", "batch": "stop24"},
        {"id": "c", "split": "dev", "file": "dev/c.log", "cause": "none", "family": "healthy",
         "batch": "stop24"},
    ]
    (tmp_path / "corpus-t.json").write_text(json.dumps({"about": "t", "cases": cases}))
    return tmp_path


def test_a_failure_called_healthy_is_wrong_and_batches_are_kept(tmp_path: Path) -> None:
    cases = explain_score.load_cases([_corpus(tmp_path)], old=False)
    assert [c.batch for c in cases] == ["", "stop24", "stop24"]
    assert explain_score.judge(cases[0])[0] == "wrong"  # a failed job labelled healthy


def test_the_batch_is_printed_on_its_own(tmp_path: Path, capsys) -> None:
    explain_score.main(["--corpus", str(_corpus(tmp_path)), "--no-old"])
    out = capsys.readouterr().out
    batch = out.split("batch stop24")[1]
    assert "n=  1" in batch.split("heldout")[1].splitlines()[0]
    assert "all" in batch and "n=  2" in batch.split("all")[1].splitlines()[0]


def _edit_cases(corpus: Path, edit) -> None:
    """Change the tiny corpus's case list in place (``edit`` gets the list)."""
    manifest = corpus / "corpus-t.json"
    doc = json.loads(manifest.read_text())
    edit(doc["cases"])
    manifest.write_text(json.dumps(doc))


def _unread_corpus(tmp_path: Path, monkeypatch) -> Path:
    """The tiny corpus with case c in a batch the bench treats as unread."""
    monkeypatch.setattr(explain_score, "UNREAD_BATCHES", ("unread",))
    corpus = _corpus(tmp_path)
    _edit_cases(corpus, lambda cases: cases[2].update(batch="unread"))
    return corpus


def test_an_unread_batch_is_scored_but_its_dev_misses_are_not_listed(tmp_path: Path, capsys,
                                                                      monkeypatch) -> None:
    corpus = _unread_corpus(tmp_path, monkeypatch)
    explain_score.main(["--corpus", str(corpus), "--no-old", "--show-dev-misses"])
    out = capsys.readouterr().out
    misses = out.split("dev misses:")[1]
    assert "a: want none" in misses and " c:" not in misses  # c is scored, never listed
    assert "batch unread (" in out and "read any of it" in out


def test_an_unread_batch_stays_out_of_the_dev_lines(tmp_path: Path, capsys,
                                                    monkeypatch) -> None:
    explain_score.main(["--corpus", str(_unread_corpus(tmp_path, monkeypatch)), "--no-old"])
    out = capsys.readouterr().out
    assert "n=  1" in out.split("\ndev:")[1].split("ALL")[1].splitlines()[0]  # a only


def test_dev_only_prints_no_held_out_figure_and_no_unread_case(tmp_path: Path, capsys,
                                                               monkeypatch) -> None:
    corpus = _unread_corpus(tmp_path, monkeypatch)
    explain_score.main(["--corpus", str(corpus), "--no-old", "--dev-only"])
    out = capsys.readouterr().out
    assert "heldout" not in out and "held-out target" not in out and "batch " not in out
    assert "n=  1" in out.split("\ndev:")[1].split("ALL")[1].splitlines()[0]  # a only


def test_a_wrong_answer_naming_the_other_stores_twin_is_counted_on_its_own(
        tmp_path: Path, capsys) -> None:
    corpus = _corpus(tmp_path)
    (corpus / "dev" / "a.log").write_text("RuntimeError: Address already in use\n")
    # explain says master-port-in-use
    _edit_cases(corpus, lambda cases: cases[0].update(cause="endpoint-port-in-use"))
    explain_score.main(["--corpus", str(corpus), "--no-old", "--dev-only"])
    dev = capsys.readouterr().out.split("\ndev:")[1]
    assert "wrong   2" in dev.split("ALL")[1].splitlines()[0]  # a, and c (a failure)
    assert "of the wrong: 1 name the other store's twin" in dev


def test_the_evidence_audit_splits_the_misses_and_scores_the_decidable_cases(
        tmp_path: Path, capsys) -> None:
    corpus = _corpus(tmp_path)
    (corpus / "dev" / "d.log").write_text("a log that shows nothing\n")
    _edit_cases(corpus, lambda cases: cases.append(
        {"id": "d", "split": "dev", "file": "dev/d.log", "cause": "none", "family": "healthy"}))
    audit = {"a": {"log_shows_cause": True, "why": "names-cause"},
             "c": {"log_shows_cause": False, "why": "label-doubt"}}
    (corpus / "EVIDENCE-t.json").write_text(json.dumps({"about": "t", "cases": audit}))
    explain_score.main(["--corpus", str(corpus), "--no-old"])
    dev = capsys.readouterr().out.split("\ndev:")[1].split("\nheldout:")[0]
    # a and c are wrong (failures labelled healthy), d is right: both misses audited
    assert "2 audited misses (of 2): the log shows the cause in 1, not in 1 (label-doubt 1)" \
        in dev
    assert "right among the 2 cases whose log can show the cause: 1 (50.0%), wrong 1 " \
        "(50.0%); a confident wrong answer on a log that cannot show the cause: 1" in dev
