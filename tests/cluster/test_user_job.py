"""Conditions of the user's own torchrun that ddpcheck's launch does differently, on
namespace hosts: a node's FQDN (what a user's torchrun advertises as MASTER_ADDR when that
node gets rank 0) resolving on another node to an address it does not have (that other
node's entry is wrong; tests/cluster/test_paths.py has the name missing).

Test side only: real launchers on namespace hosts; the fault is one hosts-file entry.
"""

from __future__ import annotations

from .netns import ETC_NETNS
from .test_multinode_run import FEW_STAGES, finish_all, start


def test_a_name_that_resolves_to_the_wrong_machine_is_named_before_torchrun(make_cluster,
                                                                            tmp_path):
    cluster = make_cluster(2)
    hosts = ETC_NETNS / cluster[0].ns / "hosts"
    wrong = cluster[1].addr.rsplit(".", 1)[0] + ".250"
    text = hosts.read_text().replace(f"{cluster[1].addr}\tnode1", f"{wrong}\tnode1")
    with open(hosts, "w") as fh:  # in place: the namespace's bind mount sees it
        fh.write(text)
    runs = start(cluster, tmp_path, *FEW_STAGES)
    assert finish_all(runs) == [1, 1], runs[0].out + runs[1].out
    for run in runs:  # node0's own hosts file is wrong (node1 resolves its name right)
        problem = run.problem("dial-name-wrong-address")
        assert problem["hosts"] == ["node0"] and wrong in problem["observed"], run.out
        assert "the name 'node1' its ranks dial to reach node1" in problem["observed"], run.out
        assert not list((tmp_path / f"results-{run.host.name}").glob("rank-*.jsonl"))
