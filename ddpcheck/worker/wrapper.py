"""The process torchrun starts for each rank: runs the probes as a pytest session.

Runs under torchrun (one per rank). It starts pytest with the ddpcheck plugin in a child
process and watches it, so that whatever happens to the probes (a crash, a signal, a hang
after the last result) it records this rank's exit status in ``exit-<RANK>.json`` for the
launcher, with the last lines pytest printed as evidence. It exits 0 when pytest ran to its
end (failed probes are results, not crashes), so torchrun does not tear down healthy ranks
while they are still reporting.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from pathlib import Path
from typing import IO

from ddpcheck import results

END_GRACE_S = 10.0  # after "end" is logged, teardown of a broken process group may hang
TAIL_LINES = 12  # pytest's last output lines kept as evidence in the exit file

# pytest's exit codes (pytest.ExitCode) that mean the session itself failed: the probes did
# not run as planned (a collection or import error, a bad option, an internal error).
SESSION_ERRORS = {2: "interrupted", 3: "internal error", 4: "usage or collection error",
                  5: "no probes collected"}


def pytest_argv(extra: list[str]) -> list[str]:
    """The probes' pytest command: the installed probes, and no pytest configuration of the
    directory it runs in (``-c os.devnull``), so a project's pytest.ini/pyproject addopts or
    timeouts never change what the probes do. Only the plugins the probes need are loaded
    (see ``pytest_env``)."""
    return [sys.executable, "-m", "pytest", "-c", os.devnull, "--rootdir", os.getcwd(),
            "-p", "pytest_timeout", "-p", "ddpcheck.plugin", "--pyargs", "ddpcheck.checks",
            "-q", "-rN", "-p", "no:cacheprovider", "--no-header", *extra]


def pytest_env(env: dict[str, str]) -> dict[str, str]:
    """The probes' environment: no autoloaded pytest plugins (PYTEST_DISABLE_PLUGIN_AUTOLOAD).

    Whatever pytest plugins the job's environment has installed (hypothesis, benchmark,
    xdist, a site's own) must not change or slow the probes: one measured here imported
    itself after the rank's end and held a broken world's exit for 8 s."""
    return {**env, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}


def _ended(log: Path) -> bool:
    return any(isinstance(e, results.End) for e in results.read_events(log))


LOCAL_RANK_ARG_ENV = "DDPCHECK_LOCAL_RANK_ARG"


def split_local_rank(args: list[str]) -> tuple[list[str], str | None]:
    """Take out the ``--local-rank=N`` that torch.distributed.launch passes (without
    --use-env; torch/distributed/run.py appends ``--local-rank={local_rank}``; before 2.0 it
    was ``--local_rank``): this process reads it, as a training script must, and pytest
    never sees it (it would stop with "unrecognized arguments")."""
    rest: list[str] = []
    value: str | None = None
    it = iter(args)
    for arg in it:
        name, eq, text = arg.partition("=")
        if name in ("--local-rank", "--local_rank"):
            value = text if eq else next(it, "")
        else:
            rest.append(arg)
    return rest, value


def main(argv: list[str] | None = None) -> int:
    rank = results.rank_from_env(os.environ)
    out_dir = Path(os.environ.get(results.RESULTS_DIR_ENV, ".")).resolve()
    args, local_rank = split_local_rank(list(argv if argv is not None else sys.argv[1:]))
    env = dict(os.environ, **({LOCAL_RANK_ARG_ENV: local_rank} if local_rank is not None else {}))
    child = subprocess.Popen(pytest_argv(args), env=pytest_env(env),
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    tail: deque[str] = deque(maxlen=TAIL_LINES)
    relay = threading.Thread(target=_relay, args=(child.stdout, tail), daemon=True)
    relay.start()

    def forward(signum: int, _frame: object) -> None:
        child.send_signal(signum)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, forward)
    ended_at = None
    while child.poll() is None:
        time.sleep(0.2)
        if ended_at is None and _ended(results.rank_file(out_dir, rank)):
            ended_at = time.monotonic()
        if ended_at is not None and time.monotonic() - ended_at > END_GRACE_S:
            child.kill()  # results are written; a stuck teardown must not hold the run
    code = child.wait()
    relay.join(timeout=2.0)
    finished = _ended(results.rank_file(out_dir, rank))
    session_error = SESSION_ERRORS.get(code, "")
    results.write_exit(out_dir, results.ExitStatus(
        rank=rank, pid=child.pid, returncode=code, signal=-code if code < 0 else None,
        signal_name=signal.Signals(-code).name if code < 0 else None,
        finished=finished, session_error=session_error,
        tail=tuple(tail), time=time.time(),
        world_connect=results.read_failure(out_dir, rank).world_connect,
        probes_missing=probes_missing() if session_error else ""))
    if finished:
        return 0
    return 128 - code if code < 0 else (code or 1)


def probes_missing() -> str:
    """Why this python cannot import ddpcheck's plugin or probes ("" when it can): the
    session runs in this same interpreter and environment, so its failure to collect them is
    checked here, not read back out of what pytest printed."""
    for name in ("ddpcheck.plugin", "ddpcheck.checks"):
        try:
            found = importlib.util.find_spec(name) is not None
        except ImportError as exc:
            return f"{name}: {exc}"
        if not found:
            return f"No module named {name!r}"
    return ""


def _relay(stream: IO[bytes] | None, tail: deque[str]) -> None:
    """Copy pytest's output to ours (torchrun's log) and keep its last lines."""
    if stream is None:
        return
    for raw in iter(stream.readline, b""):
        sys.stdout.buffer.write(raw)
        sys.stdout.flush()
        line = raw.decode("utf-8", "replace").rstrip()
        if line.strip():
            tail.append(line[:300])


if __name__ == "__main__":
    sys.exit(main())
