"""The NCCL this process actually runs: the mapped libnccl's own version, plugins, driver.

Runs inside every worker (node stage); the parts that read the system are thin, the rest is
pure and unit-tested on recorded /proc/self/maps text and on a real shared library.

Why not torch.cuda.nccl.version(): it returns the NCCL_MAJOR/MINOR/PATCH constants torch
was *compiled* with (torch/csrc/cuda/nccl.cpp, version()), so comparing it with itself or
across ranks compares build constants. The library really loaded can differ (a system
libnccl earlier on LD_LIBRARY_PATH, or LD_PRELOAD): this module asks that library through
ncclGetVersion, which "returns the version of NCCL ... as an integer"
(https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/api/comms.html#ncclgetversion;
NCCL_VERSION_CODE = major*10000 + minor*100 + patch since 2.9, see nccl.parse_nccl_version).
"""

from __future__ import annotations

import ctypes
import glob
import os
import re
from collections.abc import Mapping
from typing import Any

from ddpcheck.diagnoses import Problem, register
from ddpcheck.judgements.consistency import describe_disagreement, odd_ranks
from ddpcheck.node.nccl import Version, format_version, loaded_libnccls, parse_nccl_version

NCCL_STACK_MISMATCH = register(
    "nccl-stack-mismatch", "ranks load different NCCL libraries, network plugins or drivers",
    "nodes differ in their GPU software: another libnccl first on LD_LIBRARY_PATH, an NCCL "
    "network plugin (aws-ofi-nccl, nccl-rdma-sharp-plugins) installed or selected on some "
    "nodes only, or an NVIDIA driver upgraded on some nodes; NCCL then fails at init, hangs, "
    "or takes a slower transport on part of the job",
    "give every node the same image: one NVIDIA driver version, one libnccl (unset "
    "LD_LIBRARY_PATH entries that carry another), and the same NCCL_NET_PLUGIN / FI_PROVIDER "
    "and plugin install")

_NET_PLUGIN = re.compile(r"^libnccl-net(-[\w.-]+)?\.so(\.\d+)*$")
PLUGIN_VARS = ("NCCL_NET_PLUGIN", "FI_PROVIDER")


def ask_version(path: str) -> Version | None:
    """ncclGetVersion() of the library at path (already mapped: dlopen returns it), or None."""
    try:
        lib = ctypes.CDLL(path)
        code = ctypes.c_int(0)
        if lib.ncclGetVersion(ctypes.byref(code)) != 0:  # ncclSuccess == 0
            return None
    except (OSError, AttributeError):
        return None
    return parse_nccl_version(code.value)


def mapped_net_plugins(maps_text: str) -> list[str]:
    """Paths of NCCL network plugins (libnccl-net*.so) mapped, from /proc/<pid>/maps text.

    NCCL loads its plugin at communicator init: before that, see plugin_candidates.
    """
    paths: list[str] = []
    for line in maps_text.splitlines():
        fields = line.split(None, 5)
        if len(fields) == 6 and _NET_PLUGIN.match(os.path.basename(fields[5].strip())):
            if fields[5].strip() not in paths:
                paths.append(fields[5].strip())
    return paths


def plugin_candidates(env: Mapping[str, str]) -> list[str]:
    """libnccl-net*.so files in LD_LIBRARY_PATH, where NCCL's dlopen finds its plugin first."""
    found: list[str] = []
    for folder in env.get("LD_LIBRARY_PATH", "").split(":"):
        if folder:
            found += sorted(p for p in glob.glob(os.path.join(folder, "libnccl-net*.so*"))
                            if _NET_PLUGIN.match(os.path.basename(p)))
    return found


def stack_facts(maps_text: str, env: Mapping[str, str], driver: str | None,
                build: Version | None, asked: Mapping[str, Version | None]) -> dict[str, Any]:
    """What this rank runs, for comparison across ranks (all strings, "-" when absent).

    asked maps each mapped libnccl path to what ncclGetVersion answered (ask_version).
    """
    libs = loaded_libnccls(maps_text)
    loaded = [format_version(asked.get(p)) for p in libs]
    plugins = mapped_net_plugins(maps_text) or plugin_candidates(env)
    return {
        "nccl_build": format_version(build) if build else "-",
        "nccl_loaded": ", ".join(loaded) or "-",
        "libnccl": ", ".join(libs) or "-",
        "net_plugin": ", ".join(os.path.basename(p) for p in plugins) or "-",
        "driver": driver or "-",
        **{var: env.get(var, "-") for var in PLUGIN_VARS},
    }


# The libnccl path is shown, not compared: identical images may live under different prefixes.
_LABELS = {"nccl_loaded": "loaded NCCL (ncclGetVersion)", "net_plugin": "NCCL network plugin",
           "driver": "NVIDIA driver",
           "NCCL_NET_PLUGIN": "NCCL_NET_PLUGIN", "FI_PROVIDER": "FI_PROVIDER"}


def compare_stacks(facts: Mapping[int, Mapping[str, str]], hosts: Mapping[int, str]
                   ) -> list[Problem]:
    """One nccl-stack-mismatch per fact that differs across ranks, naming the odd ranks."""
    problems = []
    for key, label in _LABELS.items():
        values = {r: f.get(key, "-") for r, f in facts.items()}
        line = describe_disagreement(label, values, hosts)
        if line:
            _, others = odd_ranks(values)
            problems.append(NCCL_STACK_MISMATCH.problem(
                line, ranks=sorted(r for rs in others.values() for r in rs),
                hosts=sorted({hosts[r] for rs in others.values() for r in rs if r in hosts})))
    return problems
