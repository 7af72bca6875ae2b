"""nvidia-smi's query interface read by column name, on recorded real outputs."""

from __future__ import annotations

from pathlib import Path

from ddpcheck.node import gpuquery

DATA = Path(__file__).parents[2] / "data" / "gpu"


def read(name: str) -> str:
    return (DATA / name).read_text()


def test_columns_are_read_by_name_with_units_and_both_throttle_spellings():
    rows = gpuquery.parse_table(read("nvidia-smi-query-throttle-idle.csv")).rows
    g = gpuquery.gpu_from_row(rows[0])
    assert g is not None and g.idle is True and g.slowdowns == ()
    renamed = "index, clocks_event_reasons.hw_slowdown\n0, Active\n"
    g2 = gpuquery.gpu_from_row(gpuquery.parse_table(renamed).rows[0])
    assert g2 is not None and g2.slowdowns == ("hw_slowdown",)


def test_pcie_link_pairs_and_values_with_units():
    rows = gpuquery.parse_table(read("nvidia-smi-query-pcie-x8-of-x16.csv")).rows
    gpus = [gpuquery.gpu_from_row(r) for r in rows]
    assert [g.pcie_width for g in gpus if g] == [(8, 8), (8, 16)]
    mem = gpuquery.parse_table(read("nvidia-smi-query-memory-used-4gpu.csv")).rows
    assert [gpuquery.as_int(r["memory.used"]) for r in mem] == [529, 5, 74709, 567]


def test_not_supported_and_na_read_as_unknown():
    assert gpuquery.as_int("[N/A]") is None and gpuquery.as_flag("[Not Supported]") is None
    assert gpuquery.as_flag("Yes") and gpuquery.as_flag("Not Active") is False


def test_an_unknown_field_is_dropped_and_the_query_retried():
    calls: list[str] = []

    def runner(argv, timeout):
        calls.append(argv[1])
        if "compute_cap" in argv[1]:
            return read("nvidia-smi-query-invalid-field.txt")
        return "index, name\n0, NVIDIA A100-SXM4-80GB\n"

    res = gpuquery.query("query-gpu", ("index", "compute_cap", "name"), runner, 1.0)
    assert [r["name"] for r in res.rows] == ["NVIDIA A100-SXM4-80GB"]
    assert calls == ["--query-gpu=index,compute_cap,name", "--query-gpu=index,name"]


def test_a_rejected_throttle_field_is_retried_under_its_new_name():
    seen: list[str] = []

    def runner(argv, timeout):
        seen.append(argv[1])
        if "clocks_throttle_reasons.hw_slowdown" in argv[1]:
            return 'Field "clocks_throttle_reasons.hw_slowdown" is not a valid field to query.\n'
        return "index, clocks_event_reasons.hw_slowdown\n0, Not Active\n"

    gpuquery.query("query-gpu", ("index", "clocks_throttle_reasons.hw_slowdown"), runner, 1.0)
    assert seen[-1] == "--query-gpu=index,clocks_event_reasons.hw_slowdown"


def test_remapped_rows_attach_by_uuid_and_compute_apps_carry_pid_and_memory_only():
    rows = gpuquery.parse_table(read("nvidia-smi-query-remapped-rows.csv")).rows
    gpus = gpuquery.with_remaps([gpuquery.GpuHealth(1, uuid="GPU-455e672a-...")], rows)
    assert gpus[0].remap_pending is False and gpus[0].remap_failed is False
    apps = gpuquery.apps_from_rows(gpuquery.parse_table(
        read("nvidia-smi-compute-apps-leftover.csv")).rows)
    assert [(a.pid, a.used_mib) for a in apps] == [(1912379, 518), (3891903, 74698),
                                                   (1912379, 518)]
    assert gpuquery.parse_table(read("nvidia-smi-compute-apps-none.csv")).rows == ()


def test_a_silent_or_failing_nvidia_smi_is_an_error_not_a_healthy_gpu():
    gpus, why = gpuquery.read_gpus(lambda argv, t: None, 0.5)
    assert gpus == [] and "did not answer within 0.5 s" in why
    gpus, why = gpuquery.read_gpus(lambda argv, t: read("nvidia-smi-failed-no-driver.txt"))
    assert gpus == [] and "NVIDIA-SMI has failed" in why
