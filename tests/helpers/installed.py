"""A fresh copy of this checkout and a virtual environment for installing it as users do.

Test side only (world and Slurm tiers). The copy holds the files a clone would (tracked and
new, not ignored), so the suite tests the work it runs on. The environment gets this
machine's torch and the other dependencies through a path entry, not ddpcheck itself: the
editable ddpcheck of the suite's own environment stays out, and ``pip install .`` (or
README's command) makes a real, non-editable install.
"""

from __future__ import annotations

import os
import site
import subprocess
import sys
from pathlib import Path

from tests.helpers.paths import ROOT


def fresh_clone(base: Path, install: bool = False) -> tuple[Path, dict[str, str]]:
    """(the copy's root, the environment that runs its venv); installed when ``install``."""
    clone = base / "ddpcheck"
    clone.mkdir(parents=True)
    files = subprocess.run(["git", "ls-files", "-z", "-co", "--exclude-standard"], cwd=ROOT,
                           capture_output=True, check=True, timeout=60).stdout
    tar = subprocess.run(["tar", "--null", "-T", "-", "-cf", "-"], input=files, cwd=ROOT,
                         capture_output=True, check=True, timeout=120).stdout
    subprocess.run(["tar", "-xf", "-"], input=tar, cwd=clone, check=True, timeout=120)
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=180)
    purelib = next(Path(p) for p in (venv / "lib").glob("python*/site-packages"))
    deps = [p for p in site.getsitepackages() if Path(p, "torch").is_dir()]
    (purelib / "machine-deps.pth").write_text("\n".join(deps) + "\n")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("DDPCHECK_", "PYTHON", "SLURM_", "PBS_"))}
    env.update(PATH=f"{venv / 'bin'}:{env.get('PATH', '')}", VIRTUAL_ENV=str(venv),
               PIP_NO_INPUT="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    if install:
        ensure_installed(clone, env)
    return clone, env


def ensure_installed(clone: Path, env: dict[str, str]) -> None:
    """``pip install .`` (non-editable) into the venv, once."""
    if not Path(env["VIRTUAL_ENV"], "bin", "ddpcheck").exists():
        subprocess.run([str(Path(env["VIRTUAL_ENV"], "bin", "pip")), "install", "-q",
                        "--no-deps", "."], cwd=clone, env=env, check=True,
                       capture_output=True, timeout=600)
