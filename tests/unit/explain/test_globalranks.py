"""explain.globalranks: torchrun's local-rank labels turned into global ranks."""

from __future__ import annotations

from ddpcheck.explain import explain_texts
from ddpcheck.explain.globalranks import apply
from ddpcheck.explain.reader import read_text

NODE1 = """[default0]:step 10 loss 2.1
[default1]:step 10 loss 2.2
[default1]:[rank3]: Traceback (most recent call last):
[default1]:[rank3]:   File "train.py", line 9, in <module>
[default1]:[rank3]: ValueError: bad batch
[default0]:step 11 loss 2.0
"""


def _ranks(texts: dict[str, str]) -> dict[tuple[str, int], int | None]:
    records = [r for src, text in texts.items() for r in read_text(src, text)]
    return {(r.source, r.lineno): r.rank for r in apply(records, texts)}


def test_a_tee_console_gets_its_nodes_offset_from_torchs_own_rank_prefix():
    ranks = _ranks({"node1.out": NODE1})
    assert [ranks[("node1.out", i)] for i in range(1, 7)] == [2, 3, 3, 3, 3, 2]


def test_a_console_that_shows_no_offset_or_two_keeps_its_ranks():
    assert _ranks({"n.out": "[default1]:step 1\n[default0]:step 1\n"}) == \
        {("n.out", 1): 1, ("n.out", 2): 0}
    two = "[default0]:[rank2]: boom\n[default0]:[rank4]: boom\n[default1]:step\n"
    assert _ranks({"n.out": two})[("n.out", 3)] == 1


def test_each_node_file_gets_its_own_offset():
    node0 = "[default0]:step 10\n[default1]:[rank1]: ok\n[default1]:step 10\n"
    ranks = _ranks({"node0.out": node0, "node1.out": NODE1})
    assert ranks[("node0.out", 3)] == 1 and ranks[("node1.out", 2)] == 3


def test_the_log_dir_tree_gets_the_attempts_offset():
    tree = {"logs/r/attempt_0/1/stderr.log": "[rank5]: Traceback (most recent call last):\n"
                                             "ValueError: x\n",
            "logs/r/attempt_0/0/stdout.log": "step 1\n"}
    ranks = _ranks(tree)
    assert ranks[("logs/r/attempt_0/0/stdout.log", 1)] == 4
    assert ranks[("logs/r/attempt_0/1/stderr.log", 2)] == 5


def test_explain_names_the_global_rank_of_a_second_nodes_worker():
    text = ("[default0]:[rank2]: hello from rank 2\n"
            "[default1]:RuntimeError: CUDA error: invalid device ordinal\n")
    e = explain_texts([("node1.out", text)])
    assert e.problems[0].code == "invalid-device-ordinal" and e.problems[0].ranks == (3,)
