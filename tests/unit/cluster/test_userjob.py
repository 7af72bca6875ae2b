"""Tests for ddpcheck.cluster.userjob: the conditions of the user's own torchrun that ddpcheck's
launch does differently (who hosts the store, the FQDN rank 0 advertises)."""

from __future__ import annotations

import pytest

from ddpcheck.cluster import userjob


def test_an_endpoint_torch_does_not_recognise_on_its_node_is_named() -> None:
    p = userjob.hosting_problem("10.9.0.5", "node0", True, would_host=lambda h: False)
    assert p is not None and p.code == "endpoint-not-recognised" and p.hosts == ("node0",)
    assert "would not host the store" in p.observed


def test_an_endpoint_that_also_matches_another_node_is_named() -> None:
    p = userjob.hosting_problem("head", "node1", False, would_host=lambda h: True)
    assert p is not None and p.code == "endpoint-matches-other-node"


@pytest.mark.parametrize("here,torch_says", [(True, True), (False, False)])
def test_agreeing_choices_are_no_problem(here: bool, torch_says: bool) -> None:
    assert userjob.hosting_problem("n0", "n0", here, would_host=lambda h: torch_says) is None
