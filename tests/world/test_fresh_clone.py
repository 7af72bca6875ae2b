"""README's first command, exactly, in a fresh clone's root, with a non-editable install.

The suite itself runs from an editable install; users run `pip install .`. A checkout in
the current directory must never shadow the installed package in the workers (their
`python -m` puts the current directory first on sys.path). tests/helpers/installed.py makes the
copy and the virtual environment; the session fixture ``readme_fresh_install``
(tests/conftest.py) runs README's first command there once (the Slurm sbatch test reuses the
install).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.helpers.installed import ensure_installed

pytestmark = pytest.mark.world


@pytest.fixture(scope="module")
def fresh(readme_fresh_install) -> tuple[Path, dict[str, str]]:
    return readme_fresh_install.clone, readme_fresh_install.env


def test_readme_first_command_is_ready_in_the_clone_root(readme_fresh_install) -> None:
    """Every stage, as a user's first run has them: a probe that needs a package the install
    does not pull in (numpy through .numpy()) fails here."""
    env, done = readme_fresh_install.env, readme_fresh_install.first_run
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-3000:]
    assert "READY: " in out and "NOT READY" not in out
    where = subprocess.run(["python", "-c", "import ddpcheck; print(ddpcheck.__file__)"],
                           cwd="/", env=env, capture_output=True, text=True, timeout=60)
    assert "site-packages" in where.stdout, "the install must be a real (non-editable) one"
    assert Path(env["VIRTUAL_ENV"], "bin", "ddpcheck").exists(), "README's ddpcheck is the venv's"


def test_every_module_imports_with_only_the_declared_dependencies(fresh, tmp_path: Path) -> None:
    """The venv has torch and what `pip install .` pulls in, nothing of the suite's extras."""
    clone, env = fresh
    ensure_installed(clone, env)
    numpy = subprocess.run(["python", "-I", "-c", "import numpy"], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=120)
    assert numpy.returncode != 0, "the fresh venv must not see this machine's numpy"
    done = subprocess.run(["python", "-I", str(clone / ".ci" / "import_every_module.py")],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    assert "modules of the installed ddpcheck import" in done.stdout


def test_the_installed_command_also_runs_from_elsewhere(fresh, tmp_path: Path) -> None:
    clone, env = fresh
    ensure_installed(clone, env)
    done = subprocess.run(["ddpcheck", "run", "--stages", "node,rendezvous"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]


def test_a_checkout_without_the_probes_on_pythonpath_is_named_not_a_silent_not_ready(
        fresh, tmp_path: Path) -> None:
    """A broken environment for the workers: ddpcheck importable, its probes not."""
    clone, env = fresh
    ensure_installed(clone, env)
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    subprocess.run(["cp", "-r", str(clone / "ddpcheck"), str(shadow / "ddpcheck")], check=True)
    env = {**env, "PYTHONPATH": str(shadow)}
    done = subprocess.run(["ddpcheck", "run", "--stages", "node"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    out = done.stdout
    assert done.returncode == 1, out[-3000:]
    assert "session-error" in out and "ddpcheck.checks" in out, out[-3000:]
    assert "0 problems" not in out
