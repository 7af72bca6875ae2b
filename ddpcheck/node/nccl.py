"""NCCL settings: versions, the loaded libnccl, NCCL_* variables.

Pure logic, used by the launcher's node preflight and the worker's node probes; no torch
import at module level. Callers pass what they observed (torch.cuda.nccl.version(), the
text of /proc/self/maps, the environment). The transport NCCL_DEBUG=INFO lines name is read
by ddpcheck.node.ncclinfo.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence

from ddpcheck.diagnoses import (
    NCCL_LIBRARY_MISMATCH,
    Problem,
    register,
)

Version = tuple[int, int, int]

# Registered next to the code that raises it, like the other modules' diagnoses.
NCCL_ENV_INVALID = register(
    "nccl-env-invalid", "an NCCL_* variable has a value NCCL ignores or reads differently",
    "NCCL parses its variables leniently: a misspelt or out-of-range value silently falls "
    "back to a default or is clamped",
    "correct the variable (https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html) "
    "or unset it")


# --- versions and the loaded library ------------------------------------------------------

def parse_nccl_version(value: int | str | Sequence[object] | None) -> Version | None:
    """(major, minor, patch) from torch.cuda.nccl.version() or a version string.

    Recent torch returns a tuple (2, 21, 5) or (2, 21, 5, "suffix"); older builds return
    NCCL's integer code: major*10000 + minor*100 + patch since NCCL 2.9 (22105), and
    major*1000 + minor*100 + patch before it (2708 = 2.7.8). None when unreadable.
    """
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        if value >= 1 << 32:  # torch's internal packing: major<<32 | minor<<16 | patch
            return (value >> 32, (value >> 16) & 0xFFFF, value & 0xFFFF)
        if value >= 10000:
            return (value // 10000, value // 100 % 100, value % 100)
        return (value // 1000, value // 100 % 10, value % 100) if value >= 1000 else None
    if isinstance(value, str):
        m = re.match(r"\s*v?(\d+)\.(\d+)\.(\d+)", value)
        return (int(m.group(1)), int(m.group(2)), int(m.group(3))) if m else None
    parts = list(value)[:3]
    if len(parts) != 3 or not all(isinstance(p, int) for p in parts):
        return None
    return (int(parts[0]), int(parts[1]), int(parts[2]))  # type: ignore[call-overload]


def format_version(version: Version | None) -> str:
    return "unknown" if version is None else ".".join(str(v) for v in version)


_LIBNCCL = re.compile(r"^libnccl\.so(\.\d+)*$")


def loaded_libnccls(maps_text: str) -> list[str]:
    """Distinct paths of libnccl.so* mapped, from /proc/<pid>/maps text (plugins excluded)."""
    paths: list[str] = []
    for line in maps_text.splitlines():
        fields = line.split(None, 5)
        if len(fields) < 6:
            continue
        path = fields[5].strip()
        path = path[:-len(" (deleted)")] if path.endswith(" (deleted)") else path
        if _LIBNCCL.match(os.path.basename(path)) and path not in paths:
            paths.append(path)
    return paths


def nccl_version_from_path(path: str) -> Version | None:
    """Version in a libnccl path: libnccl.so.2.18.3, or a .../nccl_2.18.3-1+cuda12.2/... dir.

    None for the bare libnccl.so.2 that the nvidia-nccl-cu12 wheel ships.
    """
    m = re.search(r"libnccl\.so\.(\d+)\.(\d+)\.(\d+)$", path) or \
        re.search(r"nccl[_-](\d+)\.(\d+)\.(\d+)", os.path.dirname(path))
    return (int(m.group(1)), int(m.group(2)), int(m.group(3))) if m else None


def version_relation(loaded: Version, expected: Version) -> str:
    """"same", "newer", "older" (same major) or "other-major" for a loaded vs expected NCCL.

    Every NCCL 2.x ships as SONAME libnccl.so.2: a newer 2.x is the drop-in the dynamic
    linker would pick for a torch built against an older 2.x (NCCL adds API within a major
    version; users install a newer one on purpose, e.g. for a fix or a plugin), while an
    older library may lack what torch calls (ncclCommSplit 2.18, ncclCommInitRankScalable
    2.23, ...) or carry the bugs fixed since.
    """
    a, b = tuple(loaded[:3]), tuple(expected[:3])
    if a == b:
        return "same"
    if a[0] != b[0]:
        return "other-major"
    return "newer" if a > b else "older"


def check_nccl_library(maps_text: str, expected: Version | None,
                       loaded_version: Version | None = None, *,
                       expected_from: str = "torch's build") -> list[Problem]:
    """NCCL_LIBRARY_MISMATCH when two libnccl are mapped or the loaded one is older than
    `expected` (or of another major version). A newer 2.x is shown by the caller, not failed
    (:func:`version_relation`); versions that differ across ranks are judged by
    ncclstack.compare_stacks.

    `loaded_version` is what the mapped library answers to ncclGetVersion
    (ncclstack.ask_version); the version in the path is the fallback when it cannot be asked.
    """
    paths = loaded_libnccls(maps_text)
    if len(paths) > 1:
        return [NCCL_LIBRARY_MISMATCH.problem(
            f"this process has {len(paths)} libnccl mapped: {', '.join(paths)}")]
    if not paths or expected is None:
        return []
    version = loaded_version or nccl_version_from_path(paths[0])
    if version is None or version_relation(version, expected) in ("same", "newer"):
        return []
    return [NCCL_LIBRARY_MISMATCH.problem(
        f"loaded {paths[0]} is NCCL {format_version(version)} but {expected_from} is "
        f"{format_version(expected)}: the loaded library is "
        f"{'older' if version_relation(version, expected) == 'older' else 'of another major'}",
        fix=f"load NCCL {format_version(expected)} or a newer 2.x: remove the older libnccl "
            "from LD_LIBRARY_PATH / LD_PRELOAD, or upgrade it")]


# --- NCCL_* variables -------------------------------------------------------------------

DEBUG_LEVELS = ("VERSION", "WARN", "INFO", "ABORT", "TRACE")
ALGORITHMS = ("Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT",
              "CollNet")
PROTOCOLS = ("LL", "LL128", "Simple")
_DISABLE_FLAGS = {"NCCL_IB_DISABLE": "InfiniBand",
                  "NCCL_P2P_DISABLE": "peer-to-peer (NVLink/PCIe)",
                  "NCCL_SHM_DISABLE": "shared-memory transport"}
MAX_SOCKET_THREADS, MAX_SOCKETS = 16, 64
_STRTOLL = re.compile(r"\s*([+-]?)(0[xX][0-9a-fA-F]+|[1-9][0-9]*|0[0-7]*)")


def _strtoll(text: str) -> tuple[int, bool]:
    """The integer NCCL reads (strtoll, base 0: a word reads as 0) and whether text is clean."""
    m = _STRTOLL.match(text)
    if not m:
        return 0, False
    digits = m.group(2)
    base = 16 if digits[:2] in ("0x", "0X") else 8 if digits.startswith("0") else 10
    value = int(digits, base) * (-1 if m.group(1) == "-" else 1)
    return value, m.end() == len(text)


def _flag_problems(env: Mapping[str, str]) -> list[Problem]:
    problems = []
    for var, what in _DISABLE_FLAGS.items():
        raw = env.get(var)
        value, clean = _strtoll(raw) if raw else (0, True)
        if not clean:
            state = "disabled" if value else "enabled"
            problems.append(NCCL_ENV_INVALID.problem(
                f"{var}={raw} is not an integer; NCCL reads it as {value}, so {what} is {state}",
                fix=f"set {var}=1 to disable {what}, {var}=0 to keep it, or unset it"))
    return problems


def _socket_problems(env: Mapping[str, str]) -> list[Problem]:
    problems = []
    counts: dict[str, int] = {}
    for var, top in (("NCCL_SOCKET_NTHREADS", MAX_SOCKET_THREADS),
                     ("NCCL_NSOCKS_PERTHREAD", MAX_SOCKETS)):
        raw = env.get(var, "")
        value, clean = _strtoll(raw) if raw else (1, True)
        counts[var] = value
        if not clean or not 1 <= value <= top:
            problems.append(NCCL_ENV_INVALID.problem(
                f"{var}={raw} is not an integer from 1 to {top} (NCCL reads it as {value})",
                fix=f"set {var} to an integer from 1 to {top}, or unset it"))
    threads, socks = counts["NCCL_SOCKET_NTHREADS"], counts["NCCL_NSOCKS_PERTHREAD"]
    if threads * socks > MAX_SOCKETS and not problems:
        problems.append(NCCL_ENV_INVALID.problem(
            f"NCCL_SOCKET_NTHREADS={threads} x NCCL_NSOCKS_PERTHREAD={socks} = {threads * socks}"
            f" sockets, over NCCL's limit of {MAX_SOCKETS}; NCCL lowers NCCL_NSOCKS_PERTHREAD "
            f"to {MAX_SOCKETS // threads}",
            fix=f"keep the product at most {MAX_SOCKETS}, e.g. NCCL_SOCKET_NTHREADS={threads} "
                f"NCCL_NSOCKS_PERTHREAD={MAX_SOCKETS // threads}"))
    return problems


def _name_list(value: str) -> list[str]:
    """Names in NCCL_ALGO/NCCL_PROTO: `^` exclusion and `coll:names;coll:names` groups."""
    names = []
    for group in value.lstrip("^").split(";"):
        names += [n.strip().lstrip("^") for n in group.split(":")[-1].split(",") if n.strip()]
    return names


def _known_names_problems(env: Mapping[str, str]) -> list[Problem]:
    problems = []
    for var, known in (("NCCL_ALGO", ALGORITHMS), ("NCCL_PROTO", PROTOCOLS)):
        raw = env.get(var, "")
        lower = {k.lower() for k in known}
        bad = [n for n in _name_list(raw) if n.lower() not in lower]
        if bad:
            problems.append(NCCL_ENV_INVALID.problem(
                f"{var}={raw} names {', '.join(bad)}, which NCCL does not know "
                f"(known: {', '.join(known)})",
                cause="a misspelt name: NCCL ignores it or fails communicator init",
                fix=f"use names from {', '.join(known)}, or unset {var} to let NCCL choose"))
    return problems


def check_nccl_env(env: Mapping[str, str]) -> list[Problem]:
    """NCCL_ENV_INVALID problems in NCCL_DEBUG, *_DISABLE flags, socket threads, ALGO/PROTO.

    Interface variables are checked by ddpcheck.node.socketifname.check_socket_ifname.
    """
    problems = []
    debug = env.get("NCCL_DEBUG", "")
    if debug and debug.upper() not in DEBUG_LEVELS:
        problems.append(NCCL_ENV_INVALID.problem(
            f"NCCL_DEBUG={debug} is not a level NCCL knows ({', '.join(DEBUG_LEVELS)}); "
            "NCCL ignores it and logs nothing",
            fix="set NCCL_DEBUG=INFO (or WARN), or unset it"))
    return problems + _flag_problems(env) + _socket_problems(env) + _known_names_problems(env)
