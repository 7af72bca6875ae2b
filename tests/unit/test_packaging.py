"""A normal (non-editable) install ships the probes as ddpcheck.checks."""

from __future__ import annotations

import subprocess
import sys

from tests.helpers.paths import ROOT


def test_non_editable_install_contains_the_checks_package(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "-q",
         "--target", str(tmp_path / "site"), str(ROOT)],
        capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    checks = tmp_path / "site" / "ddpcheck" / "checks"
    names = {p.name for p in checks.glob("test_*.py")}
    assert {"test_node.py", "test_collectives.py", "test_ddp.py"} <= names
    probe = subprocess.run(
        [sys.executable, "-c", "import ddpcheck.checks, ddpcheck.explain.families, "
         "ddpcheck.report.catalog as c; "
         "print(ddpcheck.checks.__file__); print(len(c.list_probes()))"],
        capture_output=True, text=True, cwd=tmp_path, env={"PYTHONPATH": str(tmp_path / "site")})
    assert probe.returncode == 0, probe.stderr
    path, count = probe.stdout.split()
    assert path.startswith(str(tmp_path)) and int(count) >= 20
