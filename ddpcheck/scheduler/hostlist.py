"""The syntaxes of scheduler and torchrun variables: Slurm hostlists ("gpu-[01-04,07]"),
per-node counts ("4(x2),2"), GPU specs, torchrun's --nnodes / --nproc-per-node, host names.

Pure string functions used by `scheduler`; each raises ValueError on malformed input, and the
ones that return None mean "well formed but gives no number". The numbers inside these
syntaxes are read by ``ddpcheck.parsing``'s parsers (the one family of value parsers).

Hostlist expansion follows Slurm's hostlist.c: tokens are separated by commas or whitespace
outside brackets; a bracket group holds comma-separated numbers and lo-hi ranges; the width of
lo sets the zero padding (``a[09-11]`` -> a09 a10 a11); a name may hold several bracket groups
but the last must end it (Slurm rejects ``unit[0-31]rack``); empty tokens are skipped and
duplicates kept, in order, as Slurm does.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterable

from ddpcheck.parsing import positive_count, whole_number

MAX_HOSTS = 1 << 16  # Slurm's MAX_RANGE: refuse expansions past this many names
_SEPARATORS = ", \t\n"
_RANGE = re.compile(r"(\d+)(?:-(\d+))?")
_COUNT = re.compile(r"(\d+)(?:\(x(\d+)\))?")
_NUMERIC_SUFFIX = re.compile(r"^(.*?)(\d+)$")


def expand_slurm_nodelist(s: str) -> list[str]:
    """Expand a Slurm hostlist into names in Slurm's order; ValueError on malformed input."""
    hosts: list[str] = []
    for token in _tokens(s):
        hosts.extend(_expand_token(s, token))
        if len(hosts) > MAX_HOSTS:
            raise ValueError(f"bad Slurm hostlist {s!r}: more than {MAX_HOSTS} hosts")
    return hosts


def parse_slurm_tasks_per_node(s: str) -> list[int]:
    """Expand SLURM_TASKS_PER_NODE / SLURM_JOB_CPUS_PER_NODE syntax: "4(x2),2" -> [4, 4, 2]."""
    counts: list[int] = []
    for item in s.split(","):
        m = _COUNT.fullmatch(item.strip())
        if not m or int(m.group(2) or 1) == 0:
            raise ValueError(f"bad per-node count list {s!r}: {item.strip()!r} is not N or N(xM)")
        counts.extend([int(m.group(1))] * int(m.group(2) or 1))
    return counts


def compress_hostlist(hosts: Iterable[str]) -> str:
    """Write names as Slurm shows them, in their order: gpu-01..04,gpu-07 -> gpu-[01-04,07]."""
    groups: list[tuple[str, list[list[int]], int]] = []  # prefix, [lo, hi] runs, width
    for host in hosts:
        m = _NUMERIC_SUFFIX.match(host)
        if not m or "[" in host or "," in host:
            groups.append((host, [], 0))
            continue
        prefix, digits = m.group(1), m.group(2)
        num, width = int(digits), len(digits)
        if groups and groups[-1][1] and groups[-1][0] == prefix:
            last_prefix, runs, last_width = groups[-1]
            if f"{num:0{last_width}d}" == digits:
                if num == runs[-1][1] + 1:
                    runs[-1][1] = num
                else:
                    runs.append([num, num])
                continue
        groups.append((prefix, [[num, num]], width))
    return ",".join(_render(prefix, runs, width) for prefix, runs, width in groups)


def _render(prefix: str, runs: list[list[int]], width: int) -> str:
    if not runs:
        return prefix
    parts = [f"{lo:0{width}d}" + (f"-{hi:0{width}d}" if hi != lo else "") for lo, hi in runs]
    if len(parts) == 1 and runs[0][0] == runs[0][1]:
        return prefix + parts[0]
    return f"{prefix}[{','.join(parts)}]"


def _tokens(s: str) -> list[str]:
    """Split at top-level separators; brackets must pair up and may not nest."""
    tokens: list[str] = []
    current: list[str] = []
    opened = -1
    for i, ch in enumerate(s):
        if ch == "[":
            if opened >= 0:
                raise ValueError(f"bad Slurm hostlist {s!r}: nested '[' at position {i}")
            opened = i
        elif ch == "]":
            if opened < 0:
                raise ValueError(f"bad Slurm hostlist {s!r}: ']' without '[' at position {i}")
            opened = -1
        elif ch in _SEPARATORS and opened < 0:
            if current:
                tokens.append("".join(current))
            current = []
            continue
        current.append(ch)
    if opened >= 0:
        raise ValueError(f"bad Slurm hostlist {s!r}: '[' at position {opened} is never closed")
    if current:
        tokens.append("".join(current))
    return tokens


def _expand_token(s: str, token: str) -> list[str]:
    """Expand one name; bracket groups nest the way Slurm's _push_range_list recurses."""
    pieces = re.split(r"\[([^\]]*)\]", token)  # literal, group, literal, group, ..., literal
    literals, groups = pieces[0::2], [_parse_group(s, g) for g in pieces[1::2]]
    if not groups:
        return [token]
    if literals[-1]:
        raise ValueError(f"bad Slurm hostlist {s!r}: {token!r} has text after its last bracket "
                         "group; Slurm needs a bracket group to end the name")
    if math.prod(len(g) for g in groups) > MAX_HOSTS:
        raise ValueError(f"bad Slurm hostlist {s!r}: {token!r} expands to more than "
                         f"{MAX_HOSTS} hosts")
    # Slurm expands the last group innermost, then the others from right to left: for
    # x[1-2]y[3-4]z[5-6] the outer loop is the middle group (x1y3z5, x1y3z6, x2y3z5, ...).
    order = list(range(len(groups) - 2, -1, -1)) + [len(groups) - 1]
    names: list[str] = []
    for combo in itertools.product(*(groups[i] for i in order)):
        picked = dict(zip(order, combo))
        names.append(literals[0] + "".join(picked[i] + literals[i + 1] for i in range(len(groups))))
    return names


def _parse_group(s: str, group: str) -> list[str]:
    """'01-03,7' -> ['01', '02', '03', '7']; the width of lo sets the zero padding."""
    out: list[str] = []
    for item in group.split(","):
        m = _RANGE.fullmatch(item.strip())
        if not m:
            what = "an empty bracket group" if not group.strip() else f"{item.strip()!r}"
            raise ValueError(f"bad Slurm hostlist {s!r}: {what} is not a number or lo-hi range")
        lo_text, hi_text = m.group(1), m.group(2) or m.group(1)
        lo, hi = int(lo_text), int(hi_text)
        if lo > hi:
            raise ValueError(f"bad Slurm hostlist {s!r}: range {item.strip()} runs backwards")
        if hi - lo + 1 > MAX_HOSTS:
            raise ValueError(f"bad Slurm hostlist {s!r}: range {item.strip()} has more than "
                             f"{MAX_HOSTS} hosts")
        out.extend(f"{n:0{len(lo_text)}d}" for n in range(lo, hi + 1))
    return out


def count_devices(raw: str) -> int | None:
    """Count ids in "0,1,2,3" (or GPU UUIDs); Slurm's old "NoDevFiles" gives no count."""
    return None if raw == "NoDevFiles" else len([x for x in raw.split(",") if x.strip()])


def parse_gpus_per_node(raw: str) -> int:
    """SLURM_GPUS_PER_NODE: "4", "a100:4" or "a100:2,v100:2" (summed)."""
    return sum(whole_number(item.rsplit(":", 1)[-1].strip()) for item in raw.split(","))


def parse_nnodes(raw: str) -> int | None:
    """torchrun's --nnodes: "2", or "MIN:MAX" (a single value only when MIN == MAX)."""
    low, _, high = raw.partition(":")
    low_n, high_n = positive_count(low), positive_count(high or low)
    return low_n if low_n == high_n else None


def parse_nproc_per_node(raw: str) -> int | None:
    """torchrun's --nproc-per-node: a count, or gpu/cpu/xpu/auto (decided when torchrun starts)."""
    return None if raw in ("gpu", "cpu", "xpu", "auto") else positive_count(raw)


def same_host(a: str, b: str) -> bool:
    """Equal ignoring case and domain: "gn018" matches "GN018.hpc.example.org" (not for IPs)."""
    a, b = a.lower(), b.lower()
    if a == b:
        return True
    if a.replace(".", "").isdigit() or b.replace(".", "").isdigit():
        return False
    return a.split(".")[0] == b.split(".")[0]
