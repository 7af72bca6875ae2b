"""What every test tier shares (test side only): each test carries its tier's marker.

Runs in the pytest process. A test below ``tests/world``, ``tests/cluster`` or ``tests/gpu``
gets the marker of that tier (``world``, ``cluster``, ``gpu``; declared in pyproject.toml),
so ``-m world`` or ``-m "not cluster"`` select by tier whatever the module declares. The
tiers' own conftest.py files add their fixtures (``tests/world``: ``ddpcheck_run``;
``tests/cluster``: namespace hosts and Slurm; ``tests/gpu``: the skip without CUDA).

``readme_fresh_install`` (session): a fresh clone where README's first command ran, once for
the session (tests/world/test_fresh_clone.py checks what it did; the Slurm sbatch test runs
its jobs on the same non-editable install).
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
TIERS = ("world", "cluster", "gpu")


def tier_of(path: Path) -> str | None:
    """The tier a test file belongs to, from its directory below tests/; None for unit."""
    try:
        top = path.resolve().relative_to(TESTS).parts[0]
    except (ValueError, IndexError):
        return None
    return top if top in TIERS else None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        tier = tier_of(Path(str(getattr(item, "path", item.fspath))))
        if tier is not None:
            item.add_marker(getattr(pytest.mark, tier))


def readme_first_command() -> str:
    return re.findall(r"```\n(.+?)\n```", (TESTS.parent / "README.md").read_text())[0]


@dataclass(frozen=True)
class FreshInstall:
    """A fresh clone (``clone``), the environment of its venv (``env``), and what README's
    first command printed when run in the clone's root (``first_run``)."""

    clone: Path
    env: dict[str, str]
    first_run: subprocess.CompletedProcess


@pytest.fixture(scope="session")
def readme_fresh_install(tmp_path_factory: pytest.TempPathFactory) -> FreshInstall:
    """README's first command, exactly, in a fresh clone's root and a venv with only torch:
    run once for the session, before any test touches the clone (so it installs from
    scratch)."""
    from tests.helpers.installed import fresh_clone

    clone, env = fresh_clone(tmp_path_factory.mktemp("fresh"))
    done = subprocess.run(["bash", "-c", readme_first_command()], cwd=clone, env=env,
                          capture_output=True, text=True, timeout=600)
    return FreshInstall(clone, env, done)
