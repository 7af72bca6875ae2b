"""A real ``ddpcheck run``: progress lines arrive while it runs; its JUnit file matches its report.

Test side only. stderr is read line by line on a thread while the run goes on: each stage's
outcome line must be read while the process is still running (not all at once at the end),
and the final report on stdout keeps its verdict line. That ``-q`` prints the report only is
checked on test_run_single_node.py's healthy run.
"""

from __future__ import annotations

import re
import threading

from junitparser import JUnitXml

STAGES = "node,rendezvous,collectives,ddp"
OUTCOME = re.compile(r"^\[\d\d:\d\d:\d\d\] ddpcheck: (\w+) +(PASS|FAIL|SKIP|BLOCKED) ")


def test_progress_lines_arrive_while_the_run_is_still_going(ddpcheck_run, tmp_path):
    xml = tmp_path / "report.xml"
    run = ddpcheck_run("--nproc-per-node", "2", "--stages", STAGES, "--junitxml", str(xml))
    seen: list[tuple[str, bool]] = []

    def read() -> None:
        for line in run.proc.stderr:
            seen.append((line.rstrip("\n"), run.proc.poll() is None))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    run.stdout = run.proc.stdout.read()  # the report, once the run closes stdout
    code = run.proc.wait(timeout=180)
    reader.join(timeout=10)
    # READY or not (a loaded machine may see a straggler): progress is what is tested here.
    assert code in (0, 1), (run.stdout, seen)
    outcomes = [(m.group(1), alive) for line, alive in seen
                if (m := OUTCOME.search(line))]
    assert [stage for stage, _ in outcomes] == STAGES.split(","), seen
    assert all(alive for _, alive in outcomes), seen  # read before the run ended
    assert "ddpcheck: node " in seen[0][0] and " joined: ranks 0-1 " in seen[0][0]
    assert re.match(r"(NOT )?READY", run.stdout.rstrip().splitlines()[-1])
    assert "ddpcheck:" not in run.stdout  # the report is unchanged: progress is on stderr

    report = run.report()
    suites = {s.name: s for s in JUnitXml.fromfile(str(xml))}
    assert list(suites) == [s["name"] for s in report["stages"]] + ["verdict"]
    for stage in report["stages"]:
        suite = suites[stage["name"]]
        assert (suite.failures > 0) == (stage["status"] == "FAIL")
        assert suite.tests >= len(stage["ranks"]) * max(len(stage["probes"]), 1)
    assert suites["verdict"].failures == (0 if report["ready"] else 1)


def test_verbose_streams_torchrun_but_not_its_traceback_for_being_ended(ddpcheck_run):
    # ddpcheck ends torchrun once every local rank recorded its exit (with more nodes torchrun
    # would wait in its exit barrier); torchrun then prints a SignalException traceback,
    # which -v showed after every READY run on the H100 (stop 31).
    run = ddpcheck_run("--nproc-per-node", "1", "--stages", "node", "-v")
    out, err = run.proc.communicate(timeout=120)
    assert run.proc.returncode == 0, (out, err)
    assert "passed" in err  # torchrun's (the ranks' pytest) output is streamed
    assert "SignalException" not in err and "Traceback" not in err, err
    assert "ended torchrun instead of waiting for its exit" in err
