"""The job scripts in jobs/: valid shell, one ``ddpcheck run`` each, only flags that exist."""

from __future__ import annotations

import re
import subprocess

import pytest

from ddpcheck.launcher.cli import build_parser
from tests.helpers.paths import ROOT

JOBS = sorted(p for p in (ROOT / "jobs").rglob("*") if p.is_file())


def run_flags() -> set[str]:
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    return {opt for action in sub.choices["run"]._actions for opt in action.option_strings}


def test_there_is_a_slurm_a_pbs_and_a_by_hand_script():
    assert {p.parent.name for p in JOBS} >= {"slurm", "pbs", "by-hand"}


@pytest.mark.parametrize("script", JOBS, ids=lambda p: p.name)
def test_script_is_valid_bash(script):
    done = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("script", JOBS, ids=lambda p: p.name)
def test_script_is_strict_commented_and_marks_site_specific_lines(script):
    text = script.read_text()
    assert "set -euo pipefail" in text
    assert "# EDIT" in text
    assert text.splitlines()[1].startswith("#"), "a header comment says what the script does"


@pytest.mark.parametrize("script", JOBS, ids=lambda p: p.name)
def test_script_runs_ddpcheck_once_with_existing_flags_only(script):
    code = [ln for ln in script.read_text().splitlines() if not ln.lstrip().startswith("#")]
    joined = " ".join(ln.rstrip("\\") for ln in code)
    calls = re.findall(r"ddpcheck run (.*)", joined)
    assert len(calls) == 1, calls
    used = set(re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", calls[0]))
    assert used, "the call passes flags"
    assert used <= run_flags(), f"unknown flags: {used - run_flags()}"
