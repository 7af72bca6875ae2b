"""tests/conftest.py gives every test its tier's marker, by the directory it lives in."""

from __future__ import annotations

from tests.conftest import tier_of
from tests.helpers.paths import TESTS


def test_each_tier_directory_gives_its_marker_and_unit_tests_none() -> None:
    assert tier_of(TESTS / "world" / "test_run_single_node.py") == "world"
    assert tier_of(TESTS / "cluster" / "test_multinode_run.py") == "cluster"
    assert tier_of(TESTS / "gpu" / "test_nccl_run.py") == "gpu"
    assert tier_of(TESTS / "unit" / "cluster" / "test_store.py") is None
    assert tier_of(TESTS.parent / "checks" / "test_node.py") is None
