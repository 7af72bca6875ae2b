"""Real gloo worlds that leave Flight Recorder dumps: a desynchronised one and a missing rank.

Used by tests/world/test_flight_recorder.py (fresh dumps) and run by hand to refresh the
recorded ones in tests/data/flightrec/ (``python -m tests.helpers.frworld OUTDIR``).
Each rank runs with ``TORCH_FR_BUFFER_SIZE`` set and a short process-group timeout. Gloo has
no watchdog that writes the dump (ProcessGroupNCCL's does, to
``TORCH_NCCL_DEBUG_INFO_TEMP_FILE``), so each rank writes
``torch._C._distributed_c10d._dump_fr_trace()`` to ``$TORCH_FR_DUMP_TEMP_FILE<rank>`` when its
collective times out, as docs/explain.md tells users to do.

Scenarios:
- ``desync``: 2 ranks; rank 1 skips an all_reduce, so at collective #3 rank 0 runs all_reduce
  while rank 1 runs broadcast;
- ``missing``: 3 ranks; rank 1 stops (os._exit) before collective #3 without a dump, rank 2
  is stuck in a long step and dumps when its peers have given up (its last collective is #2).
"""

from __future__ import annotations

import datetime
import multiprocessing
import os
import socket
import sys
import time
from pathlib import Path

TIMEOUT_S = 4.0


def _dump(prefix: str, rank: int) -> None:
    import torch._C._distributed_c10d as c10d

    Path(f"{prefix}{rank}").write_bytes(c10d._dump_fr_trace())


def _rank(rank: int, world: int, port: int, scenario: str, prefix: str) -> None:
    os.environ["TORCH_FR_BUFFER_SIZE"] = "2000"
    os.environ["TORCH_FR_DUMP_TEMP_FILE"] = prefix
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world, timeout=datetime.timedelta(seconds=TIMEOUT_S))
    dist.all_reduce(torch.ones(4))  # collective #1
    dist.barrier()  # collective #2
    try:
        if scenario == "desync":
            if rank != 1:
                dist.all_reduce(torch.ones(8))  # collective #3 on rank 0 only
            dist.broadcast(torch.ones(3), 0)
        elif scenario == "missing":
            if rank == 1:
                os._exit(3)  # dies without a dump
            if rank == 2:
                time.sleep(TIMEOUT_S * 2)  # "a long step on one rank": never joins #3
                _dump(prefix, rank)
                os._exit(0)
            dist.all_reduce(torch.ones(16))  # collective #3
        dist.barrier()
    except RuntimeError:
        _dump(prefix, rank)
        os._exit(1)
    os._exit(0)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_dumps(scenario: str, outdir: Path, deadline_s: float = 180.0) -> Path:
    """Run one scenario; return the directory holding its dumps (fr_trace_<rank>)."""
    world = {"desync": 2, "missing": 3}[scenario]
    out = outdir / scenario
    out.mkdir(parents=True, exist_ok=True)
    ctx = multiprocessing.get_context("spawn")
    port = free_port()
    procs = [ctx.Process(target=_rank, args=(r, world, port, scenario, str(out / "fr_trace_")))
             for r in range(world)]
    for p in procs:
        p.start()
    end = time.monotonic() + deadline_s
    for p in procs:
        p.join(max(0.1, end - time.monotonic()))
    for p in procs:
        if p.is_alive():
            p.kill()
            p.join()
    return out


if __name__ == "__main__":
    for name in ("desync", "missing"):
        print(make_dumps(name, Path(sys.argv[1])))
