"""A rank that cannot reach the control store says so in its exit record, typed.

Real processes: ``python -m ddpcheck.worker`` (the per-rank wrapper) starts the probes'
pytest session as rank 1 of 2 with a master port nothing listens on. The session writes its
SessionFailure file (as torchrun's @record writes an error file) and the wrapper copies it
into ``exit-1.json``: the launcher reads ``world_connect``, never the printed text.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from ddpcheck import results


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again when the test connects


def test_an_unreachable_store_is_the_world_connect_field_of_the_exit_record(
        tmp_path: Path) -> None:
    port = closed_port()
    env = {**os.environ, "RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "0",
           "LOCAL_WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
           results.RESULTS_DIR_ENV: str(tmp_path), "DDPCHECK_PROBE_TIMEOUT": "2"}
    done = subprocess.run([sys.executable, "-m", "ddpcheck.worker"], env=env, timeout=120,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert done.returncode != 0, done.stdout
    ex = results.exit_statuses(tmp_path)[1]
    assert not ex.finished and ex.probes_missing == ""
    assert ex.world_connect.startswith(f"127.0.0.1:{port} within 2 s: "), ex
