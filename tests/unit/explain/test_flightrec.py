"""Reading Flight Recorder dumps: recorded real gloo dumps, JSON, and what is not a dump."""

from __future__ import annotations

import json
import pickle

from ddpcheck.explain.flightrec import looks_like_dump, read_dump
from tests.helpers.paths import DATA

FR = DATA / "flightrec"


def test_a_recorded_gloo_dump_gives_the_rank_and_its_collectives_in_order():
    path = FR / "desync" / "fr_trace_1"
    trace = read_dump(str(path), path.read_bytes())
    assert trace is not None and trace.rank == 1 and trace.version == "2.10"
    assert [(e.seq, e.op) for e in trace.entries] == [
        (1, "all_reduce"), (2, "barrier"), (3, "broadcast")]
    assert trace.entries[2].input_sizes == "[[3]]"
    assert trace.entries[2].user_frame.endswith("in _rank")  # the caller, not torch


def test_the_json_form_reads_the_same_and_pg_config_names_members():
    data = {"version": "2.10", "pg_config": {"0": {"name": "0", "desc": "default_pg",
                                                   "ranks": "[0, 1, 2]"}},
            "entries": [{"collective_seq_id": 5, "profiling_name": "nccl:all_gather",
                         "process_group": ["0", "default_pg"], "input_sizes": [[2]],
                         "output_sizes": [[6]], "retired": False, "state": "started"}]}
    trace = read_dump("dumps/nccl_trace_rank_7.json", json.dumps(data).encode())
    assert trace is not None and trace.rank == 7
    assert trace.pg_ranks == (("0", (0, 1, 2)),)
    assert trace.entries[0].op == "all_gather" and not trace.entries[0].retired


def test_a_pickle_with_a_class_in_it_is_refused_not_run():
    class Evil:
        def __reduce__(self):
            return (print, ("ran",))

    data = pickle.dumps({"entries": [Evil()]})
    assert looks_like_dump(data)
    assert read_dump("fr_trace_0", data) is None


def test_text_logs_and_nameless_files_are_not_dumps():
    assert not looks_like_dump(b"[rank0]: Traceback (most recent call last):")
    assert read_dump("no-rank-here", pickle.dumps({"entries": []})) is None
