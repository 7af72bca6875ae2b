"""Tests for ddpcheck.stages: stage names, the stage marker, parse_stages."""

from __future__ import annotations

import pytest

from ddpcheck.stages import MARKER, STAGES, parse_stages, stage

RUN_ORDER = ("node", "rendezvous", "collectives", "bandwidth", "ddp", "placement", "checkpoint")


def test_stages_run_in_the_documented_order_and_each_has_a_description():
    assert tuple(STAGES) == RUN_ORDER
    assert all(desc.strip() for desc in STAGES.values())


@pytest.mark.parametrize("text", ["all", "", " ", ",", " all "])
def test_parse_stages_all_or_nothing_means_every_stage(text):
    assert parse_stages(text) == RUN_ORDER


def test_parse_stages_returns_run_order_whatever_order_was_given():
    assert parse_stages("checkpoint,node,ddp") == ("node", "ddp", "checkpoint")


def test_parse_stages_ignores_whitespace_empty_items_and_duplicates():
    assert parse_stages(" collectives , ,node,collectives ") == ("node", "collectives")


@pytest.mark.parametrize("text, bad", [("nope", "nope"), ("node,nope,ddp", "nope"),
                                       ("all,node", "all"), ("NODE", "NODE")])
def test_parse_stages_names_the_first_unknown_stage_and_lists_the_valid_ones(text, bad):
    with pytest.raises(ValueError) as err:
        parse_stages(text)
    assert f"unknown stage {bad!r}" in str(err.value)
    assert ", ".join(RUN_ORDER) in str(err.value)


@pytest.mark.filterwarnings("ignore::pytest.PytestUnknownMarkWarning")
def test_stage_decorator_applies_the_ddpcheck_stage_marker():
    @stage("ddp")
    def probe():
        pass

    marks = probe.pytestmark
    assert [(m.name, m.args) for m in marks] == [(MARKER, ("ddp",))]


def test_stage_decorator_rejects_an_unknown_stage():
    with pytest.raises(ValueError, match="unknown stage 'nope'"):
        stage("nope")
