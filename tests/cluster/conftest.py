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
* ``mesh_bandwidth_runs`` -- session-scoped: the three runs of a 3-host rate-limited mesh
  (two healthy, one with a slowed link and ``--baseline``) that test_compare_run.py and
  test_links_run.py both read, run once for the session.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Callable

import pytest

from .hosts import start_runs
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
# The 3-host mesh of the bandwidth verdicts and baselines: every link a tc token bucket (so the
# network, not which host got a core, sets the figures), one link slowed in the last run.
MESH_ARGS = ["--nproc-per-node", "1", "--stages", "rendezvous,bandwidth", "--rdzv-timeout", "40",
             "--probe-timeout", "30", "--timeout", "200"]
LINK_RATE, SLOW_RATE = "1gbit", "300mbit"


@pytest.fixture(scope="session")
def mesh_bandwidth_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Three runs on one 3-host mesh at LINK_RATE, each (exit code, stdout, stderr, report)
    per host: "base" and "again" healthy, then "slow" with node0 <-> node2 at SLOW_RATE,
    ``--baseline`` base-node0.json and ``--junitxml`` slow.xml. Also "tmp": where the report
    files are. The cluster is gone when the tests read them (they only read files)."""
    _require_netns()
    tmp = tmp_path_factory.mktemp("mesh")

    def run_all(cluster: Cluster, tag: str, *extra: str) -> list[tuple[int, str, str, dict]]:
        out = []
        for run in start_runs(cluster.hosts, tmp, *MESH_ARGS, *extra, tag=tag, output="split"):
            code = run.finish(timeout=260)
            assert run.has_report(), run.out + run.err
            out.append((code, run.out, run.err, run.report()))
        return out

    with Cluster(3, topology="mesh") as cluster:
        for host in cluster.hosts:
            host.rate_limit(LINK_RATE)
        runs: dict[str, Any] = {"tmp": tmp, "base": run_all(cluster, "base"),
                                "again": run_all(cluster, "again")}
        cluster[0].rate_limit_link(cluster[2], SLOW_RATE)
        runs["slow"] = run_all(cluster, "slow", "--baseline", str(tmp / "base-node0.json"),
                               "--junitxml", str(tmp / "slow.xml"))
    return runs


from .slurm_fixtures import *  # noqa: E402,F401,F403  (Slurm fixtures: make_slurm, slurm2, slurm_available)
