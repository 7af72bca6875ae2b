"""torch 1.10's fingerprint check: each rank prints only its own collective."""

from __future__ import annotations

from tests.unit.explain.families.helpers import first_cause

LINE = ("RuntimeError: Detected mismatch between collectives on ranks. Rank {r} is running "
        "inconsistent collective: CollectiveFingerPrint(OpType={op}, TensorShape")


def test_one_op_on_two_ranks_is_a_size_mismatch():
    assert first_cause(LINE.format(r=0, op="ALLGATHER"), "=[41, 256, 8, 8, 8], TensorDtypes=Float",
                       LINE.format(r=1, op="ALLGATHER"), "=[40, 256, 8, 8, 8], TensorDtypes=Float"
                       ) == "collective-size-mismatch"


def test_two_ops_are_a_desync():
    assert first_cause(LINE.format(r=0, op="ALLREDUCE"), LINE.format(r=1, op="BROADCAST")) == \
        "collective-desync"


def test_one_ranks_line_cannot_tell_which():
    got = first_cause(LINE.format(r=0, op="ALLREDUCE"))
    assert got not in ("collective-size-mismatch", "collective-desync", "none")


def test_a_matching_fingerprint_line_is_not_a_mismatch():
    assert first_cause("CollectiveFingerPrint(OpType=ALLGATHER, TensorShape=[41, 256])") == "none"
