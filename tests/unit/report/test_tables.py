"""Tests for ddpcheck.report.tables: the sweep, link matrix, intra/inter and scaling tables.

Inputs are the recorded and hand-made figures of tests/data/links (tests/helpers/linkdata).
"""

from __future__ import annotations

from ddpcheck.judgements.bandwidth import sweep_row
from ddpcheck.judgements.links import hosts_of, scaling_table
from ddpcheck.report.tables import (
    columns,
    format_intra_inter,
    format_matrix,
    format_scaling,
    format_sweep,
    render_measurements,
)
from tests.helpers.linkdata import load_matrix, scaling_rows


# --- format_sweep ------------------------------------------------------------------------------
def rows():
    return [sweep_row(n, 4, "float", [t], 4).to_dict()
            for n, t in [(4096, 0.00002), (65536, 0.0001), (1 << 20, 0.001)]]


def test_format_sweep_has_title_header_units_one_row_per_size_and_peak():
    data = rows()
    lines = format_sweep(data, 4, "gloo").splitlines()
    assert lines[0] == "# all_reduce, 4 ranks, backend gloo"
    assert lines[1].split() == ["#", "size", "count", "type", "redop", "time", "min", "max",
                                "algbw", "busbw"]
    assert lines[2].split() == ["#", "(B)", "(elements)", "(us)", "(us)", "(us)", "(GB/s)",
                                "(GB/s)"]
    body = lines[3:-1]
    assert len(body) == len(data)
    for line, row in zip(body, data):
        cells = line.split()
        assert cells[:4] == [str(row["size"]), str(row["count"]), "float", "sum"]
        assert cells[-2:] == [f"{row['algbw']:.2f}", f"{row['busbw']:.2f}"]
    peak = max(r["busbw"] for r in data)
    assert lines[-1] == f"# Peak bus bandwidth : {peak:.2f} GB/s"
    assert len(lines) == 3 + len(data) + 1


def test_format_sweep_columns_are_right_aligned_to_the_header():
    lines = format_sweep(rows(), 4, "gloo").splitlines()
    assert len({len(line) for line in lines[1:-1]}) == 1


def test_format_sweep_without_rows_has_no_peak_line():
    lines = format_sweep([], 2, "nccl").splitlines()
    assert len(lines) == 3 and not any("Peak" in line for line in lines)


# --- scaling, links ---------------------------------------------------------------------------
def test_format_scaling_is_a_right_aligned_table():
    text = format_scaling(scaling_rows())
    assert text.splitlines() == [
        "world size  step time (ms)  samples/s  efficiency",
        "         1           130.1      246.0        100%",
        "         8           141.2     1813.0         92%",
        "        16           153.0     3346.4         85%",
        "        32           179.5     5704.7         72%",
    ]
    assert format_scaling(scaling_table(scaling_rows())) == text


def test_format_scaling_without_a_baseline():
    text = format_scaling([{"world_size": 2, "step_time_s": 0.1, "samples_per_s": 0.0}])
    assert text.splitlines()[1].endswith("-")


# --- tables ------------------------------------------------------------------------------------
def test_format_matrix_rows_send_columns_receive():
    m = load_matrix("slow_link_4node.json")
    assert format_matrix(hosts_of(m), m).splitlines() == [
        "GB/s from \\ to  gpu-a  gpu-b  gpu-c  gpu-d",
        "gpu-a               -   1.83   0.11   1.96",
        "gpu-b            1.74      -   1.91   1.85",
        "gpu-c            0.10   1.90      -   1.72",
        "gpu-d            1.88   1.74   1.74      -",
    ]


def test_format_matrix_marks_missing_figures_and_widens_for_big_ones():
    lines = format_matrix(["x", "y"], {("x", "y"): 123.456}).splitlines()
    assert lines[1].split() == ["x", "-", "123.46"]
    assert lines[2].split() == ["y", "?", "-"]
    assert len({len(line) for line in lines}) == 1


def test_format_intra_inter():
    text = format_intra_inter({"gpu-a": 231.4, "gpu-b": 229.87}, 22.1)
    assert text.splitlines() == [
        "node   intra-node busbw (GB/s)",
        "gpu-a                   231.40",
        "gpu-b                   229.87",
        "cross-node busbw (one rank per node): 22.10 GB/s",
        "the slowest node's intra-node busbw is 10.4x the cross-node busbw",
    ]


def test_format_intra_inter_single_node_and_nothing_measured():
    assert format_intra_inter({"gpu-a": 231.4}, None).splitlines()[-1] == \
        "cross-node busbw (one rank per node): not measured"
    assert format_intra_inter({}, 3.0).splitlines() == [
        "intra-node busbw: not measured", "cross-node busbw (one rank per node): 3.00 GB/s"]


# --- columns and the measurements section ------------------------------------------------------
def test_columns_print_cells_as_given_right_aligned_after_the_left_ones():
    assert columns([("host", "GB/s"), ("a", "1.50"), ("bb", "10.00")], left=1).splitlines() == [
        "host   GB/s", "a      1.50", "bb    10.00"]
    assert columns([("n",), ("007",)]).splitlines() == ["  n", "007"]  # never re-formatted
    assert columns([]) == ""


def test_measurements_render_in_reading_order_and_skip_what_was_not_measured():
    m = {"allreduce_sweep": rows(), "cross_node_busbw": 2.5,
         "link_matrix": {"a->b": 1.0, "b->a": 2.0}, "ddp_scaling": scaling_rows()}
    parts = render_measurements(m, 4, "gloo")
    assert [p.splitlines()[0] for p in parts] == [
        "# all_reduce, 4 ranks, backend gloo",
        "# point-to-point links, one direction (best of trials)",
        "# all-reduce busbw within nodes and across nodes",
        "# DDP scaling (subgroups of the first k ranks)"]
    assert render_measurements({}, 2, "gloo") == []


def test_format_sweep_marks_the_judged_rows_and_names_their_peak():
    data = [sweep_row(n, 4, "float", [t], 8, 20, n >= 256 << 20).to_dict()
            for n, t in [(4 << 20, 0.0001), (256 << 20, 0.0013)]]
    lines = format_sweep(data, 8, "nccl").splitlines()
    assert lines[3].split()[0] == str(4 << 20) and lines[4].split()[0] == "*"
    assert lines[-2].startswith(f"# Judged bus bandwidth : {data[1]['busbw']:.2f} GB/s")


def test_above_32_nodes_the_links_are_the_worst_the_slow_nodes_and_a_histogram() -> None:
    from ddpcheck.report.tables import MATRIX_MAX_HOSTS, render_measurements

    hosts = [f"n{i}" for i in range(1024)]
    matrix = {f"{hosts[i]}->{hosts[(i + 1) % 1024]}": (2.0 if i == 7 else 12.0)
              for i in range(1024)}
    text = "\n".join(render_measurements({"link_matrix": matrix, "link_hosts": hosts},
                                         8192, "nccl"))
    assert len(text.splitlines()) < 40 and len(hosts) > MATRIX_MAX_HOSTS
    assert "n7    n8" in text and "slowest nodes" in text and "links by GB/s" in text


def test_above_32_nodes_the_intra_node_busbw_is_its_spread_and_slowest_nodes() -> None:
    from ddpcheck.report.tables import render_measurements

    intra = {f"n{i}": 150.0 - (100 if i == 3 else 0) for i in range(1024)}
    text = "\n".join(render_measurements({"intra_node_busbw": intra, "cross_node_busbw": 20.0},
                                         8192, "nccl"))
    assert len(text.splitlines()) < 20 and "min 50.00" in text and "n3" in text
