"""Pytest fixtures for namespace-cluster tests (test side only).

Runs inside the pytest process on the test machine. Every test collected
under ``tests/cluster`` gets the ``cluster`` marker from ``tests/conftest.py``
(select or deselect with ``-m cluster`` / ``-m "not cluster"``). The fixtures build hosts with
:mod:`.netns` and skip, with the reason, where that is impossible (not root,
no ``ip netns``, no iptables/tc).

Fixtures:

* ``make_cluster(n=2, **opts)`` -- factory; every cluster it makes is torn
  down at the end of the test, whatever happened. ``opts`` go to
  :class:`netns.Cluster` (``topology="mesh"``, ``names``, ``extra_net``,
  ``dummy``, ``self_loopback``, ...).
* ``cluster2`` / ``cluster3`` -- a running 2-/3-host cluster (node0..).
* ``netns_available`` -- only skips when clusters cannot be built (for tests
  that drive :class:`netns.Cluster` themselves).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Callable

import pytest

from .netns import Cluster, available


def _require_netns() -> None:
    ok, why = available()
    if not ok:
        pytest.skip(f"network-namespace cluster unavailable: {why}")


@pytest.fixture
def netns_available() -> None:
    """Skip the test (with the reason) unless namespace clusters can be built here."""
    _require_netns()


@pytest.fixture
def make_cluster(netns_available: None) -> Iterator[Callable[..., Cluster]]:
    """Factory ``make_cluster(n=2, **opts) -> Cluster`` (started; closed after the test)."""
    made: list[Cluster] = []

    def factory(n: int = 2, **opts: Any) -> Cluster:
        cluster = Cluster(n, **opts)
        made.append(cluster)
        return cluster.start()

    try:
        yield factory
    finally:
        errors = []
        for cluster in reversed(made):
            try:
                cluster.close()
            except Exception as exc:  # close them all, then report
                errors.append(exc)
        if errors:
            raise errors[0]


@pytest.fixture
def cluster2(make_cluster: Callable[..., Cluster]) -> Cluster:
    """Two running hosts, node0 and node1."""
    return make_cluster(2)


@pytest.fixture
def cluster3(make_cluster: Callable[..., Cluster]) -> Cluster:
    """Three running hosts, node0..node2."""
    return make_cluster(3)
from .slurm_fixtures import *  # noqa: E402,F401,F403  (Slurm fixtures: make_slurm, slurm2, slurm_available)
