"""Tests for ddpcheck.worker: the wrapper that runs one rank's pytest and records its exit.

pytest_argv is replaced by a tiny python child that plays the rank's pytest: it writes (or
not) the "end" event to the rank file and then exits, dies by a signal, or hangs.
"""

from __future__ import annotations

import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ddpcheck import results
from ddpcheck.worker import wrapper

END = ("import json, time; open({path!r}, 'a').write(json.dumps("
       "{{'event': 'end', 'time': time.time()}}) + '\\n'); ")


@pytest.fixture(autouse=True)
def _restore_signal_handlers() -> Iterator[None]:
    """main() forwards SIGTERM/SIGINT/SIGHUP to its child; keep this process's own handlers."""
    saved = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    yield
    for sig, handler in saved.items():
        signal.signal(sig, handler)


@pytest.fixture
def rank_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv(results.RESULTS_DIR_ENV, str(tmp_path))
    return tmp_path


def child(monkeypatch: pytest.MonkeyPatch, code: str) -> list[list[str]]:
    """Make main() start `python -c code` instead of pytest; returns the extras it got."""
    calls: list[list[str]] = []

    def argv(extra: list[str]) -> list[str]:
        calls.append(extra)
        return [sys.executable, "-c", code, *extra]
    monkeypatch.setattr(wrapper, "pytest_argv", argv)
    return calls


def end_then(rank_dir: Path, rest: str) -> str:
    return END.format(path=str(results.rank_file(rank_dir, 3))) + rest


def exit_record(rank_dir: Path) -> dict[str, object]:
    return results.read_json(results.exit_file(rank_dir, 3))


def test_pytest_argv_runs_the_probes_with_the_plugin() -> None:
    argv = wrapper.pytest_argv(["-k", "barrier"])
    assert argv[:3] == [sys.executable, "-m", "pytest"]
    joined = " ".join(argv)
    assert "-p ddpcheck.plugin" in joined
    assert "--pyargs ddpcheck.checks" in joined
    assert "-p no:cacheprovider" in joined
    assert argv[-2:] == ["-k", "barrier"]


def test_finished_rank_exits_0_even_when_probes_failed(rank_dir: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    calls = child(monkeypatch, end_then(rank_dir, "raise SystemExit(1)"))
    assert wrapper.main(["-x"]) == 0
    assert calls == [["-x"]]
    rec = exit_record(rank_dir)
    assert (rec["rank"], rec["returncode"], rec["signal"], rec["signal_name"],
            rec["finished"]) == (3, 1, None, None, True)


def test_rank_that_exits_before_the_end_passes_its_code_on(
        rank_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    child(monkeypatch, "raise SystemExit(3)")
    assert wrapper.main([]) == 3
    rec = exit_record(rank_dir)
    assert (rec["returncode"], rec["finished"]) == (3, False)


def test_rank_that_exits_0_without_the_end_is_a_failure(rank_dir: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    child(monkeypatch, "pass")
    assert wrapper.main([]) == 1
    assert exit_record(rank_dir)["finished"] is False


def test_rank_killed_by_a_signal_is_recorded_with_the_signal(
        rank_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    child(monkeypatch, "import os, signal; os.kill(os.getpid(), signal.SIGKILL)")
    assert wrapper.main([]) == 128 + signal.SIGKILL
    rec = exit_record(rank_dir)
    assert (rec["returncode"], rec["signal"], rec["signal_name"], rec["finished"]) == (
        -9, 9, "SIGKILL", False)


def test_rank_hanging_after_the_end_is_killed_after_the_grace(
        rank_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(wrapper, "END_GRACE_S", 0.1)
    child(monkeypatch, end_then(rank_dir, "time.sleep(600)"))
    start = time.monotonic()
    assert wrapper.main([]) == 0
    assert time.monotonic() - start < 5.0
    rec = exit_record(rank_dir)
    assert (rec["returncode"], rec["signal_name"], rec["finished"]) == (-9, "SIGKILL", True)


def test_exit_record_is_the_only_file_main_adds(rank_dir: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    child(monkeypatch, "pass")
    wrapper.main([])
    assert sorted(p.name for p in rank_dir.iterdir()) == ["exit-3.json"]
    assert isinstance(exit_record(rank_dir)["pid"], int)


def test_the_local_rank_argument_of_torch_distributed_launch_is_read_not_passed_on() -> None:
    from ddpcheck.worker.wrapper import split_local_rank

    assert split_local_rank(["--local-rank=3", "-x"]) == (["-x"], "3")
    assert split_local_rank(["--local_rank", "1"]) == ([], "1")  # torch < 2.0 spelling
    assert split_local_rank(["-k", "ddp"]) == (["-k", "ddp"], None)


def test_probes_missing_is_empty_where_ddpcheck_is_installed() -> None:
    from ddpcheck.worker.wrapper import probes_missing

    assert probes_missing() == ""
