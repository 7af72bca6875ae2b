"""What every test tier shares (test side only): each test carries its tier's marker.

Runs in the pytest process. A test below ``tests/world``, ``tests/cluster`` or ``tests/gpu``
gets the marker of that tier (``world``, ``cluster``, ``gpu``; declared in pyproject.toml),
so ``-m world`` or ``-m "not cluster"`` select by tier whatever the module declares. The
tiers' own conftest.py files add their fixtures (``tests/world``: ``ddpcheck_run``;
``tests/cluster``: namespace hosts and Slurm; ``tests/gpu``: the skip without CUDA).
"""

from __future__ import annotations

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
