"""Bandwidth expectations: what a GPU model should reach, and the verdict below it.

Pure (no torch), used by the worker's bandwidth and link probes. :func:`reference_busbw`
gives a conservative minimum intra-node all-reduce busbw for known GPU models (tables below,
with their sources); :func:`judge_expectation` turns a measured figure and an expectation
(``--expect-busbw`` or the reference) into ``below-expected-bandwidth``. GB/s means 10^9
bytes per second, as in nccl-tests and :mod:`ddpcheck.judgements.bandwidth`.
"""

from __future__ import annotations

import re

from ddpcheck.diagnoses import Problem, register

BELOW_EXPECTED_BANDWIDTH = register(
    "below-expected-bandwidth", "measured bandwidth is below what this hardware should reach",
    "traffic takes a slower path than the hardware offers: NCCL over TCP sockets instead of "
    "InfiniBand/RoCE or NVLink, peer-to-peer disabled (NCCL_P2P_DISABLE, a VM or ACS), a link "
    "trained at reduced speed or width, or a degraded NVLink",
    "rerun with NCCL_DEBUG=INFO and check the transports NCCL picks (NET/IB vs NET/Socket, "
    "P2P vs SHM); check nvidia-smi topo -m and nvidia-smi nvlink -s, ibstat; lower the "
    "expectation if it does not fit this hardware")


def gbps(value: float) -> str:
    """A bandwidth figure: one decimal from 1 GB/s up, two below ("0.11", "1.9", "40.0")."""
    return f"{value:.1f}" if abs(value) >= 1 else f"{value:.2f}"


def judge_expectation(measured_gbps: float, expected_gbps: float, what: str) -> list[Problem]:
    """``below-expected-bandwidth`` when measured < expected (nothing if expected <= 0).

    what names the figure and where the expectation comes from, e.g.
    "busbw (--expect-busbw)" or "busbw (8x A100-SXM4 reference)".
    """
    if expected_gbps <= 0 or measured_gbps >= expected_gbps:
        return []
    return [BELOW_EXPECTED_BANDWIDTH.problem(
        f"expected >= {gbps(expected_gbps)} GB/s {what}, measured {gbps(measured_gbps)} GB/s")]


_MARGIN = ("the minimum expected here is ~70% of that, to allow for ddpcheck's 256 MiB "
           "messages (NVLS peaks above them) and for busy nodes; judged only at 256 MiB and "
           "up (judgements.bandwidth.NCCL_JUDGE_RULE, docs/bandwidth.md)")
_NVLINK_SRC = "NVIDIA/nccl-tests#212 (NCCL maintainer)"
_NVSWITCH_8 = {
    # model: (typical busbw GB/s, minimum expected GB/s, what the typical figure is)
    "A100": (230.0, 160.0, "8x A100-SXM4 on NVSwitch (HGX/DGX A100, NVLink3, 300 GB/s per "
             "direction): NCCL all-reduce busbw is ~230 GB/s in nccl-tests at large messages, "
             "line rate less ~20% protocol overhead (" + _NVLINK_SRC + ")"),
    "H100": (360.0, 250.0, "8x H100-SXM on NVSwitch (HGX/DGX H100, NVLink4, 450 GB/s per "
             "direction): ~370 GB/s busbw with rings; all-reduce uses NVLink SHARP (NVLS) by "
             "default and peaks at ~480 GB/s busbw only at sizes above 256 MiB ("
             + _NVLINK_SRC + ")"),
    "H200": (360.0, 250.0, "8x H200-SXM on NVSwitch (HGX H200, NVLink4, 450 GB/s per "
             "direction): ~370 GB/s busbw with rings; NVLink SHARP (NVLS) peaks at ~480 GB/s "
             "busbw above 256 MiB (as H100, " + _NVLINK_SRC + ")"),
}
_PCIE = {
    # PCIe generation: (minimum expected GB/s, what the typical figure is)
    3: (4.0, "PCIe Gen3 x16 GPUs (~12 GB/s per direction): NCCL all-reduce busbw without "
             "NVLink bridges is typically 6-11 GB/s, lower across CPU sockets; the minimum "
             "expected here is ~70% of the low end"),
    4: (8.0, "PCIe Gen4 x16 GPUs (~25 GB/s per direction): NCCL all-reduce busbw without "
             "NVLink bridges is typically 12-22 GB/s, lower across CPU sockets; the minimum "
             "expected here is ~70% of the low end"),
    5: (14.0, "PCIe Gen5 x16 GPUs (~50 GB/s per direction): NCCL all-reduce busbw without "
              "NVLink bridges is typically 20-40 GB/s, bounded by the CPUs' PCIe and memory "
              "bandwidth; the minimum expected here is ~70% of the low end"),
}
# Models sold only as PCIe cards, and models sold as SXM and PCIe (PCIe only when the name
# says PCIe or NVL, the bridged PCIe variant), with their PCIe generation.
_PCIE_ONLY = {"P40": 3, "P4": 3, "T4": 3, "A40": 4, "A30": 4, "A10": 4, "A16": 4, "A2": 4,
              "L40": 4, "L40S": 4, "L4": 4, "A6000": 4, "A5000": 4, "A4000": 4}
_DUAL = {"P100": 3, "V100": 3, "V100S": 3, "A100": 4, "H100": 5, "H200": 5}
# Export variants with cut-down NVLink (A800, H800: 400 GB/s) and GPUs whose nodes are not
# the usual 8-GPU NVSwitch board: no reference rather than a wrong one.
_NO_REFERENCE = {"A800", "H800", "H20", "GH200", "GB200"}


def reference_busbw(gpu_name: str, n_gpus_per_node: int,
                    backend: str) -> tuple[float, str] | None:
    """Minimum intra-node all-reduce busbw (GB/s) to expect for a GPU model, and why.

    gpu_name as nvidia-smi or torch report it ("NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB
    HBM3", "Tesla T4"). Conservative: ~70% of the typical nccl-tests figure, so a healthy
    node never falls below it. None when unknown: backend other than NCCL, fewer than 2
    GPUs, an unlisted model (V100-SXM2, A800, H800, ...), or an SXM part at a GPU count
    other than 8, where the board is ambiguous (4 of 8 NVSwitch GPUs vs a 4-GPU board).
    """
    if backend.lower() != "nccl" or n_gpus_per_node < 2:
        return None
    tokens = re.findall(r"[A-Z0-9]+", gpu_name.upper())
    known = {**_PCIE_ONLY, **_DUAL, **dict.fromkeys(_NO_REFERENCE, 0)}
    model = next((t for t in tokens if t in known), None)
    if model is None or model in _NO_REFERENCE:
        return None
    pcie = model in _PCIE_ONLY or "PCIE" in tokens or "NVL" in tokens
    if pcie:
        minimum, text = _PCIE[known[model]]
        return minimum, f"{text}: {minimum:.0f} GB/s"
    sxm = any(t.startswith("SXM") for t in tokens) or model in ("H100", "H200")
    if not sxm or model not in _NVSWITCH_8 or n_gpus_per_node != 8:
        return None
    _, minimum, text = _NVSWITCH_8[model]
    return minimum, f"{text}; {_MARGIN}: {minimum:.0f} GB/s"
