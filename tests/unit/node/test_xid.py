"""Xid events from recorded kernel logs, judged with NVIDIA's Xid catalogue."""

from __future__ import annotations

from pathlib import Path

from ddpcheck.node import xid

DATA = Path(__file__).parents[2] / "data" / "gpu"


def log(name: str) -> str:
    return (DATA / name).read_text()


def test_a_fatal_xid_is_a_problem_and_program_xids_are_notes():
    events = xid.parse_xids(log("dmesg-xid-31-62-45.txt"))
    assert [(e.xid, e.count) for e in events] == [(31, 1), (62, 1), (45, 5)]
    found, notes = xid.check_xids(events, {"0a:00": "GPU 0 (00000000:0A:00.0, GPU-760d)"})
    assert [f.problem.code for f in found] == ["gpu-xid-error"]
    p = found[0].problem
    assert p.observed.startswith("GPU 0 (00000000:0A:00.0, GPU-760d): Xid 62 (Internal "
                                 "micro-controller halt)")
    assert "docs.nvidia.com/deploy/xid-errors" in p.fix and "state=drain" in p.fix
    assert len(notes) == 2 and "Xid 31" in notes[0]


def test_another_programs_pid_and_name_never_reach_the_report():
    events = xid.parse_xids(log("dmesg-xid-31-62-45.txt"))
    assert all("pid=" not in e.last and "cuda_plot" not in e.last for e in events)


def test_program_xids_alone_do_not_fail_the_node():
    found, notes = xid.check_xids(xid.parse_xids(log("dmesg-xid-13-program.txt")))
    assert found == [] and "Xid 13 (Graphics Engine Exception) x3" in notes[0]


def test_fallen_off_the_bus_without_an_xid_line_is_xid_79():
    events = xid.parse_xids(log("dmesg-fallen-off-the-bus.txt"))
    assert [(e.bus, e.xid) for e in events] == [("0000:b3:00.0", 79)]
    found, _ = xid.check_xids(events)
    assert "GPU at PCI 0000:b3:00.0: Xid 79 (GPU has fallen off the bus)" in \
        found[0].problem.observed


def test_an_unreadable_kernel_log_is_said_never_taken_for_healthy():
    denied = log("dmesg-not-permitted.txt")
    events, unread = xid.kernel_xids(1.0, lambda argv, t: denied)
    assert events == [] and "Operation not permitted" in unread[0].text()
    assert "not readable" in unread[0].text()


def test_journalctl_is_read_when_dmesg_is_denied():
    def runner(argv, timeout):
        return log("dmesg-not-permitted.txt") if argv[0] == "dmesg" else \
            log("dmesg-xid-31-62-45.txt")

    events, unread = xid.kernel_xids(1.0, runner)
    assert unread == [] and 62 in [e.xid for e in events]


def test_nvlink5_xids_fail_only_when_the_driver_says_fatal():
    # Lines as quoted in leptonai/gpud#1174 (kmsg input).
    text = ("NVRM: Xid (PCI:0019:01:00): 149, NETIR Fatal XC0 i0 Link -1 (0x000fe406 "
            "0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)\n"
            "NVRM: Xid (PCI:0018:01:00): 145, RLW_RXPIPE Nonfatal XC0 i0 Link 13 (0x0409a0c2 "
            "0x00000008 0x00000001 0x00000000 0x00100000 0x00000004)\n")
    found, notes = xid.check_xids(xid.parse_xids(text))
    assert [f.problem.observed.split(" x1")[0] for f in found] == [
        "GPU at PCI 0019:01:00: Xid 149 (NVLink error, fatal)"]
    assert len(notes) == 1 and "Xid 145" in notes[0]
