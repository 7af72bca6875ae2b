"""README's first command, exactly, in a fresh clone's root, with a non-editable install.

The suite itself runs from an editable install; users run `pip install .`. A checkout in
the current directory must never shadow the installed package in the workers (their
`python -m` puts the current directory first on sys.path). The virtual environment gets
this machine's torch and the other dependencies through a path entry, not ddpcheck: the
editable ddpcheck of the suite's own environment stays out of it.
"""

from __future__ import annotations

import os
import re
import site
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.world


def readme_first_command() -> str:
    return re.findall(r"```\n(.+?)\n```", (ROOT / "README.md").read_text())[0]


@pytest.fixture(scope="module")
def fresh_clone(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    base = tmp_path_factory.mktemp("fresh")
    clone = base / "ddpcheck"
    clone.mkdir()
    # What a fresh clone holds: the tracked (and new, not ignored) files of this checkout,
    # so the suite tests the work it runs on, committed or not.
    files = subprocess.run(["git", "ls-files", "-z", "-co", "--exclude-standard"], cwd=ROOT,
                           capture_output=True, check=True, timeout=60).stdout
    subprocess.run(["tar", "--null", "-T", "-", "-cf", "-"], input=files, cwd=ROOT, check=True,
                   stdout=open(base / "src.tar", "wb"), timeout=120)
    subprocess.run(["tar", "-xf", str(base / "src.tar")], cwd=clone, check=True, timeout=120)
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    purelib = next(Path(p) for p in (venv / "lib").glob("python*/site-packages"))
    deps = [p for p in site.getsitepackages() if Path(p, "torch").is_dir()]
    (purelib / "machine-deps.pth").write_text("\n".join(deps) + "\n")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("DDPCHECK_", "PYTHON", "SLURM_", "PBS_"))}
    env.update(PATH=f"{venv / 'bin'}:{env.get('PATH', '')}", VIRTUAL_ENV=str(venv),
               PIP_NO_INPUT="1", PIP_DISABLE_PIP_VERSION_CHECK="1", DDPCHECK_STAGES="node,"
               "rendezvous,collectives")
    return clone, env


def test_readme_first_command_is_ready_in_the_clone_root(fresh_clone) -> None:
    clone, env = fresh_clone
    done = subprocess.run(["bash", "-c", readme_first_command()], cwd=clone, env=env,
                          capture_output=True, text=True, timeout=600)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-3000:]
    assert "READY: " in out and "NOT READY" not in out
    where = subprocess.run(["python", "-c", "import ddpcheck; print(ddpcheck.__file__)"],
                           cwd="/", env=env, capture_output=True, text=True, timeout=60)
    assert "site-packages" in where.stdout, "the install must be a real (non-editable) one"


def test_the_installed_command_also_runs_from_elsewhere(fresh_clone, tmp_path: Path) -> None:
    clone, env = fresh_clone
    done = subprocess.run(["ddpcheck", "run", "--stages", "node,rendezvous"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]


def test_a_checkout_without_the_probes_on_pythonpath_is_named_not_a_silent_not_ready(
        fresh_clone, tmp_path: Path) -> None:
    """A broken environment for the workers: ddpcheck importable, its probes not."""
    clone, env = fresh_clone
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
