"""A fresh copy of this checkout and a virtual environment for installing it as users do.

Test side only (world and Slurm tiers). The copy holds the files a clone would (tracked and
new, not ignored), so the suite tests the work it runs on. The environment gets this
machine's torch through a path entry to a folder holding torch and the distributions torch
requires, and nothing else: numpy, matplotlib and the other test extras of the suite's own
environment stay out (a run that needs one must fail here as it fails for users), and so
does the editable ddpcheck. ``pip install .`` (or README's command) then installs ddpcheck
and its declared dependencies, for real and non-editable, as on a fresh machine.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from importlib import metadata
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
    (purelib / "machine-torch.pth").write_text(f"{torch_only_site(base / 'torch-site')}\n")
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
                        "."], cwd=clone, env=env, check=True,
                       capture_output=True, timeout=600)


def torch_only_site(folder: Path) -> Path:
    """A folder of links to torch and the distributions it requires (their files and
    metadata), so a venv sees this machine's torch without its other packages."""
    folder.mkdir(parents=True, exist_ok=True)
    for dist in _requirement_closure("torch"):
        for top in {Path(str(f)).parts[0] for f in dist.files or ()}:
            source = Path(str(dist.locate_file(top)))
            if top not in ("..", "bin") and source.exists() and not (folder / top).exists():
                (folder / top).symlink_to(source)
    return folder


def _requirement_closure(name: str) -> list[metadata.Distribution]:
    """The distribution ``name`` and every one it requires (no extras), installed here."""
    seen: dict[str, metadata.Distribution] = {}
    todo = [name]
    while todo:
        key = re.sub(r"[-_.]+", "-", todo.pop()).lower()
        if key in seen:
            continue
        try:
            dist = metadata.distribution(key)
        except metadata.PackageNotFoundError:
            continue
        seen[key] = dist
        for req in dist.requires or ():
            if "extra ==" not in req:
                todo.append(re.split(r"[ ;<>=!~\[(]", req, maxsplit=1)[0])
    return list(seen.values())
