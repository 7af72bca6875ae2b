"""Whose failure is it? A probe's exception sorted into the cluster's or ddpcheck's own.

Runs inside every worker, on the exception a probe raised. Only an error raised by a
``torch.distributed`` call or by the transport under it counts against the cluster: c10d's
``DistError`` family (DistBackendError, DistNetworkError, DistStoreError), and the
RuntimeErrors gloo and NCCL raise (torch 2.13's gloo raises a plain RuntimeError such as
``[.../gloo/transport/tcp/pair.cc:537] Read error ...: Connection reset by peer`` or
``[.../unbound_buffer.cc:78] Timed out waiting 3000ms for recv operation to complete``, and an
async ``work.wait()`` raises it from the caller's frame, so the message is read as well as
the frames). Anything else (ImportError, TypeError, AttributeError, a RuntimeError from
``.numpy()`` or ``torch.save``) is ddpcheck's own failure: named with the probe, the
exception and the file:line, it never makes a peer unresponsive, never shortens a wait and
never blocks the later stages.
"""

from __future__ import annotations

import importlib.util
import os
import re
import traceback
from collections.abc import Sequence

import torch.distributed as dist

import ddpcheck
from ddpcheck.diagnoses import COLLECTIVE_FAILED, DDPCHECK_ERROR, Problem, ProblemFound

# What the transports under torch.distributed put in their errors (gloo's source paths and
# messages, NCCL's, c10d's store and socket layers): matched only on RuntimeError and the
# OS-level errors, never on a TypeError or an ImportError whatever its text.
TRANSPORT_MARKERS = re.compile(
    r"gloo/|\bgloo\b|\bNCCL\b|\bnccl\w*|c10d|ProcessGroup|Connection (?:reset|closed|refused) "
    r"by peer|Connection (?:reset|closed|refused)|Timed out waiting|Socket Timeout|Broken pipe|"
    r"connectFullMesh|[Ww]atchdog|DistBackendError|DistNetworkError|DistStoreError|"
    r"remote worker|collective operation timeout")
_TORCH_DISTRIBUTED = re.compile(r"[\\/]torch[\\/]distributed[\\/]")


def _own_roots() -> tuple[str, ...]:
    """Where ddpcheck's code lives: the package, and the probes (checks/ in a checkout)."""
    spec = importlib.util.find_spec("ddpcheck.checks")
    probes = list(spec.submodule_search_locations or []) if spec else []
    return tuple(os.path.join(os.path.abspath(p), "") for p in [ddpcheck.__path__[0], *probes])


def is_communication_error(exc: BaseException) -> bool:
    """True when torch.distributed or its transport raised it: the process group is suspect."""
    if isinstance(exc, ProblemFound):
        return any(p.code == COLLECTIVE_FAILED.code for p in exc.problems)
    if isinstance(exc, (dist.DistError, ConnectionError, TimeoutError)):
        return True  # c10d's own family, and the socket layer's errors
    if isinstance(exc, (NotImplementedError, RecursionError)):  # RuntimeErrors, but local
        return False
    if not isinstance(exc, RuntimeError):
        return False
    return _raised_in_torch_distributed(exc) or bool(TRANSPORT_MARKERS.search(str(exc)))


def _raised_in_torch_distributed(exc: BaseException) -> bool:
    frames = traceback.extract_tb(exc.__traceback__)
    return bool(frames) and bool(_TORCH_DISTRIBUTED.search(frames[-1].filename))


def raised_at(exc: BaseException) -> str:
    """The file:line of ddpcheck's own code that raised (or called what raised) ``exc``."""
    frames = traceback.extract_tb(exc.__traceback__)
    roots = _own_roots()
    own = [f for f in frames if os.path.abspath(f.filename).startswith(roots)] or frames
    if not own:
        return "unknown place"
    frame = own[-1]
    return f"{_short_path(frame.filename)}:{frame.lineno}"


def _short_path(path: str) -> str:
    """From the package on: ddpcheck/checks/test_ddp.py, checks/test_ddp.py in a checkout."""
    parts = re.split(r"[\\/]", path)
    for i in range(len(parts) - 1, -1, -1):
        if parts[i] in ("ddpcheck", "checks") and (parts[i] != "checks" or i == 0
                                                   or parts[i - 1] != "ddpcheck"):
            return "/".join(parts[i:])
    return "/".join(parts[-2:])


def own_failure(probe: str, exc: BaseException, stage: str, stages: Sequence[str]) -> Problem:
    """ddpcheck's own exception as a problem: the probe, the exception, where, and the fix."""
    text = (str(exc).strip().splitlines() or [""])[0][:300]
    others = [s for s in stages if s != stage]
    rerun = f"--stages {','.join(others)}" if others else "--stages without it"
    return DDPCHECK_ERROR.problem(
        f"probe {probe} raised {type(exc).__name__}: {text} (at {raised_at(exc)}); this is "
        "ddpcheck's own failure, not the cluster's",
        fix="report it to ddpcheck's maintainers with these lines (and the output of -v); "
            f"meanwhile run the other stages with {rerun}", stage=stage)
