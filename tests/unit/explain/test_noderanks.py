"""Two nodes at --node-rank 0: both agents' role_info gather times out (explain.noderanks)."""

from __future__ import annotations

from ddpcheck.explain import explain_texts
from ddpcheck.explain.engine import explain_inputs
from ddpcheck.explain.inputs import read_inputs
from tests.helpers.paths import DATA

GATHER = ("torch.distributed.DistStoreError: wait timeout after 8000ms, keys: "
          "/none/torchelastic/role_info/0, /none/torchelastic/role_info/1")
FRAME = ["Traceback (most recent call last):",
         '  File "/opt/venv/lib/python3.11/site-packages/torch/distributed/elastic/agent/'
         'server/api.py", line 635, in _assign_worker_ranks',
         "    role_infos_bytes = store.multi_get("]


def _first(*files: tuple[str, list[str]]):
    ex = explain_texts([(name, "\n".join(lines) + "\n") for name, lines in files])
    return next((p for p in ex.problems if not p.consequence_of), None)


def test_the_real_run_names_the_repeated_node_rank():
    ex = explain_inputs(read_inputs([str(DATA / "explain" / "runs" /
                                         "s30-netns-same-node-rank")], None))
    root = ex.problems[0]
    assert root.code == "rank-overlap" and "--node-rank" in root.fix
    assert not ex.undetermined


def test_the_gather_timing_out_on_two_nodes_is_two_agents_at_group_rank_zero():
    root = _first(("node0.log", [*FRAME, GATHER]), ("node1.log", [*FRAME, GATHER]))
    assert root is not None and root.code == "rank-overlap"
    assert "same --node-rank" in root.cause


def test_one_node_alone_does_not_tell_who_was_missing():
    root = _first(("node0.log", [*FRAME, GATHER]))
    assert root is None or root.code != "rank-overlap"


def test_a_wait_for_other_keys_on_two_nodes_is_not_the_gather():
    other = GATHER.replace("role_info/0, /none/torchelastic/role_info/1",
                           "assigned_ranks/1")
    root = _first(("node0.log", [other]), ("node1.log", [other]))
    assert root is None or root.code != "rank-overlap"
