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


def _node(n: int, lines: list[str]) -> list[str]:
    """One node's console: the agent's own first line differs per node (its pid, its host)."""
    return [f"W1124 18:48:20.0{n}0000 {4711 + n} torch/distributed/run.py:803] node{n} up",
            *lines]


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
    root = _first(("node0.log", _node(0, [*FRAME, GATHER])),
                  ("node1.log", _node(1, [*FRAME, GATHER])))
    assert root is not None and root.code == "rank-overlap"
    assert "same --node-rank" in root.cause


def test_two_copies_of_one_console_are_one_node():
    """Near miss: the same lines under two names (a file given twice, a copied Slurm .out)
    are one agent's wait, which does not tell who was missing."""
    one = _node(0, [*FRAME, GATHER])
    root = _first(("node0.log", one), ("copy/node0.log", one))
    assert root is None or root.code != "rank-overlap"


def test_one_node_alone_does_not_tell_who_was_missing():
    root = _first(("node0.log", [*FRAME, GATHER]))
    assert root is None or root.code != "rank-overlap"


def test_a_wait_for_other_keys_on_two_nodes_is_not_the_gather():
    other = GATHER.replace("role_info/0, /none/torchelastic/role_info/1",
                           "assigned_ranks/1")
    root = _first(("node0.log", [other]), ("node1.log", [other]))
    assert root is None or root.code != "rank-overlap"


def test_torch_2_5_ends_the_gather_in_another_error_with_the_same_frame():
    """torch 2.5.1 (runs-torch2.5/s30-netns-same-node-rank): the wait ends in "DistNetworkError:
    failed to format addr, unknown family=0"; the gather's own line is in both tracebacks."""
    lines = [*FRAME, "torch.distributed.DistNetworkError: failed to format addr, unknown "
             "family=0"]
    root = _first(("node0.log", _node(0, lines)), ("node1.log", _node(1, lines)))
    assert root is not None and root.code == "rank-overlap"
    alone = _first(("node0.log", _node(0, lines)))  # near miss: one node's console does not tell
    assert alone is None or alone.code != "rank-overlap"


def test_the_recorded_torch_2_5_run_names_the_repeated_node_rank():
    ex = explain_inputs(read_inputs([str(DATA / "explain" / "runs-torch2.5" /
                                         "s30-netns-same-node-rank")], None))
    assert ex.problems[0].code == "rank-overlap"
