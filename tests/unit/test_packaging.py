"""A normal (non-editable) install ships the probes as ddpcheck.checks."""

from __future__ import annotations

import shutil
import subprocess
import sys

from tests.helpers.paths import ROOT


def test_non_editable_install_contains_the_checks_package(tmp_path):
    # from a copy without build/: setuptools would reuse a stale build/lib of the checkout
    src = tmp_path / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(
        ".git", "build", "*.egg-info", "__pycache__", "tests", "bench", "checks"))
    shutil.copytree(ROOT / "checks", src / "checks",
                    ignore=shutil.ignore_patterns("__pycache__"))
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "-q",
         "--target", str(tmp_path / "site"), str(src)],
        capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    checks = tmp_path / "site" / "ddpcheck" / "checks"
    names = {p.name for p in checks.glob("test_*.py")}
    assert {"test_node.py", "test_collectives.py", "test_ddp.py"} <= names
    # every module of the source tree is installed (pyproject lists the packages by hand)
    source = {p.relative_to(ROOT).as_posix() for p in (ROOT / "ddpcheck").rglob("*.py")
              if "checks" not in p.relative_to(ROOT / "ddpcheck").parts[:1]}
    site = tmp_path / "site"
    installed = {p.relative_to(site).as_posix() for p in (site / "ddpcheck").rglob("*.py")}
    assert source <= installed, sorted(source - installed)
    probe = subprocess.run(
        [sys.executable, "-c", "import ddpcheck.checks, ddpcheck.explain.families, "
         "ddpcheck.report.catalog as c; "
         "print(ddpcheck.checks.__file__); print(len(c.list_probes()))"],
        capture_output=True, text=True, cwd=tmp_path, env={"PYTHONPATH": str(tmp_path / "site")})
    assert probe.returncode == 0, probe.stderr
    path, count = probe.stdout.split()
    assert path.startswith(str(tmp_path)) and int(count) >= 20
