"""Pytest fixtures for a real Slurm cluster on namespace hosts (test side only).

Made available to every test under ``tests/cluster`` by one line in
``conftest.py``::

    from .slurm_fixtures import *  # noqa: F401,F403  (Slurm fixtures)

They build on conftest's ``make_cluster`` and :mod:`.slurm`, and skip, with
the reason, where Slurm cannot run: namespaces unavailable, the Debian
packages ``slurmctld slurmd slurm-client munge`` not installed, or the
daemons not starting (the reason then holds their log tails). With
``DDPCHECK_REQUIRE_SLURM=1`` in the environment the last two fail instead of
skipping (for CI, where the packages are installed on purpose).

Fixtures:

* ``slurm_available`` -- only skips unless Slurm clusters can be built here.
* ``make_slurm(n=2, *, conf=None, cpus=None, **cluster_opts)`` -- factory:
  builds an ``n``-host :class:`netns.Cluster` (``cluster_opts`` go to it)
  and a running :class:`slurm.SlurmCluster` on it (files under
  ``tmp_path/slurm<k>``); both are torn down after the test, whatever
  happened.
* ``slurm2`` -- a running two-node Slurm cluster (node0, node1).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any, Callable, NoReturn

import pytest

from .netns import Cluster
from .slurm import SlurmCluster, SlurmStartError
from .slurm import available as slurm_installed

__all__ = ["make_slurm", "slurm2", "slurm_available"]

REQUIRE_ENV = "DDPCHECK_REQUIRE_SLURM"


def _unavailable(reason: str) -> NoReturn:
    if os.environ.get(REQUIRE_ENV, "") not in ("", "0"):
        pytest.fail(f"{reason} ({REQUIRE_ENV} is set)", pytrace=False)
    pytest.skip(reason)


@pytest.fixture
def slurm_available(netns_available: None) -> None:
    """Skip (with the reason) unless namespace hosts can be built and the
    Slurm/munge programs are installed."""
    ok, why = slurm_installed()
    if not ok:
        _unavailable(f"Slurm unavailable: {why}")


@pytest.fixture
def make_slurm(
    slurm_available: None, make_cluster: Callable[..., Cluster], tmp_path: Any
) -> Iterator[Callable[..., SlurmCluster]]:
    """Factory ``make_slurm(n=2, *, conf=None, cpus=None, **cluster_opts) -> SlurmCluster``."""
    made: list[SlurmCluster] = []

    def factory(n: int = 2, *, conf: dict | None = None, cpus: int | None = None,
                **cluster_opts: Any) -> SlurmCluster:
        cluster = make_cluster(n, **cluster_opts)
        slurm = SlurmCluster(cluster, tmp_path / f"slurm{len(made)}", conf=conf, cpus=cpus)
        made.append(slurm)
        try:
            return slurm.start()
        except SlurmStartError as exc:
            _unavailable(f"Slurm daemons do not start here: {exc}")

    try:
        yield factory
    finally:
        errors = []
        for slurm in reversed(made):  # before make_cluster deletes the namespaces
            try:
                slurm.close()
            except Exception as exc:
                errors.append(exc)
        if errors:
            raise errors[0]


@pytest.fixture
def slurm2(make_slurm: Callable[..., SlurmCluster]) -> SlurmCluster:
    """A running two-node Slurm cluster: node0 (slurmctld + slurmd) and node1 (slurmd)."""
    return make_slurm(2)
