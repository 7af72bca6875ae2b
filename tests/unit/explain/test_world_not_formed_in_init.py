"""A store wait that timed out inside init_process_group is a world that never formed, not
a collective timeout (firstfailure._in_init)."""

from __future__ import annotations

from ddpcheck.explain import explain_texts
from tests.helpers.paths import DATA

PLUS_ONE = (DATA / "explain" / "runs" / "s32-spawn-world-plus-one" / "console.log").read_text()
IN_INIT = """-- Process 1 terminated with the following error:
Traceback (most recent call last):
  File "/usr/lib/python3.11/site-packages/torch/multiprocessing/spawn.py", line 87, in _wrap
    fn(i, *args)
  File "/home/u/train.py", line 239, in main
    dist.init_process_group("gloo", timeout=timedelta(seconds=5))
  File "/lib/torch/distributed/distributed_c10d.py", line 1899, in init_process_group
    default_pg, _ = _new_process_group_helper(
  File "/lib/torch/distributed/distributed_c10d.py", line 2169, in _new_process_group_helper
    backend_class = ProcessGroupGloo(
torch.distributed.DistStoreError: wait timeout after 5000ms, keys: /default_pg/0//cpu//0/0
"""


def _first(text: str):
    ex = explain_texts([("console.log", text)])
    return ex, [p for p in ex.problems if not p.consequence_of][0]


def test_the_real_run_of_a_world_size_larger_than_the_ranks_started():
    ex, first = _first(PLUS_ONE)
    assert first.code == "world-not-formed" and ex.undetermined  # a symptom: it cannot tell
    assert "world size" in first.cause and "init_process_group" in first.observed


def test_the_same_wait_in_a_collective_stays_a_collective_timeout():
    in_collective = IN_INIT.replace("line 1899, in init_process_group",
                                    "line 2501, in all_reduce")
    ex, first = _first(in_collective)
    assert first.code == "collective-timeout" and ex.undetermined
    _, first = _first(IN_INIT)
    assert first.code == "world-not-formed"
