"""explain on whole logs of real failed jobs, recorded by ``bench/explain_real_runs.py``.

Each directory of ``tests/data/explain/runs/`` is what a user had after a real torchrun /
mp.spawn / python job (torch 2.13, gloo, CPU) with one injected fault: ``console.log`` and,
for torchrun ``--log-dir``, the per-rank stdout/stderr and error.json tree. ``MANIFEST.json``
names the fault and its code. Nothing runs here: the files are explained as they are.
"""

from __future__ import annotations

import json

import pytest

from ddpcheck.explain.engine import explain_inputs
from ddpcheck.explain.inputs import read_inputs
from tests.helpers.paths import DATA

RUNS = DATA / "explain" / "runs"
MANIFEST = json.loads((RUNS / "MANIFEST.json").read_text())


def _explain(name: str):
    return explain_inputs(read_inputs([str(RUNS / name)], None))


@pytest.mark.parametrize("entry", MANIFEST, ids=[e["id"] for e in MANIFEST])
def test_the_injected_cause_is_the_first_root_cause_or_explain_abstains(entry):
    ex = _explain(entry["id"])
    causes = [p for p in ex.problems if not p.consequence_of]
    assert causes, entry["fault"]
    if entry["verdict"] == "abstained":  # the log does not tell: never a confident guess
        assert ex.undetermined, (entry["fault"], causes[0].code)
        return
    assert causes[0].code == entry["cause"], entry["fault"]
    if entry["mention"]:  # the user's own exception, quoted with its frame
        text = ex.render_text()
        assert entry["mention"] in text and "real_runs_train.py" in text


def test_the_recorded_runs_cover_every_launcher_and_are_whole():
    assert {e["launcher"] for e in MANIFEST} >= {"logdir", "console", "spawn", "python"}
    for e in MANIFEST:
        assert (RUNS / e["id"] / "console.log").read_text().strip(), e["id"]
    # torchrun --log-dir: the per-rank files beside the console, for every run whose workers
    # started (an agent that failed before them, e.g. its store's port in use, writes none)
    trees = [e["id"] for e in MANIFEST if list((RUNS / e["id"]).rglob("stderr.log"))]
    assert len(trees) >= 8
    assert all(list((RUNS / i).rglob("error.json")) for i in ("user-exception", "disk-full"))


def test_a_user_exception_names_the_rank_that_failed_first_and_its_frame():
    ex = _explain("user-exception")
    root = ex.problems[0]
    assert root.code == "unexplained" and root.ranks == (1,)
    assert "KeyError: 'labels'" in root.observed and "in inject" in root.observed
    assert {p.code for p in ex.problems[1:]} >= {"peer-unreachable"}
    assert all(p.consequence_of for p in ex.problems[1:])


def test_the_log_dir_alone_names_the_rank_whose_error_json_is_earliest():
    """No console (no Root Cause block): torchrun's own rule, the earliest error.json."""
    (tree,) = (RUNS / "user-exception" / "logs").iterdir()
    ex = explain_inputs(read_inputs([str(tree)], None))
    root = ex.problems[0]
    assert root.code == "unexplained" and root.ranks == (1,)
    assert "KeyError: 'labels'" in root.observed


def test_the_log_dir_alone_without_the_killed_ranks_lines_abstains():
    """A SIGKILLed rank leaves no error.json and no traceback: only the console says so."""
    ex = explain_inputs(read_inputs([str(RUNS / "sigkill" / "logs")], None))
    assert ex.undetermined


def test_a_sigkill_before_torchruns_sigterm_teardown_is_the_root_on_its_own_rank():
    """Console only: the peers' "Connection reset by peer" came first in the text, but the
    Root Cause block's rank 1 shows exitcode -9 while torchrun ended the others by SIGTERM."""
    ex = _explain("sigkill-console")
    assert ex.problems[0].code == "host-out-of-memory" and ex.problems[0].ranks == (1,)
    assert not ex.undetermined


def test_a_rank_busy_alone_is_where_the_cause_is_and_next_says_how_to_confirm_it():
    ex = _explain("fresh-rank1-slow-save")
    busy = ex.problems[0]
    assert busy.code == "rank-zero-only-step-timeout" and busy.ranks == (1,)  # not the waiter
    next_run = ex.to_json()["next"][busy.code]
    assert "py-spy dump" in next_run and "--stages" not in next_run


def test_the_rank_sigkill_hit_is_named_not_the_ranks_torchrun_tore_down_with_sigterm():
    killed = _explain("fresh-sigkill-rank2-of-3").problems[0]
    assert killed.code == "host-out-of-memory" and killed.ranks == (2,)
    assert "-15" not in killed.observed
