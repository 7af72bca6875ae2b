"""Two torch releases in one job, told by the same code at different lines of the ranks'
tracebacks (explain.torchreleases)."""

from __future__ import annotations

from ddpcheck.explain import explain_texts
from ddpcheck.explain.reader import read_text
from ddpcheck.explain.torchreleases import different_releases
from tests.helpers.paths import DATA

RUN = DATA / "explain" / "runs" / "s30b-netns-torch-versions-differ"
NODE0 = (RUN / "console.log").read_text()  # torch 2.5.1
NODE1 = (RUN / "console-node1.log").read_text()  # torch 2.13


def test_two_nodes_on_torch_2_5_and_2_13_are_a_version_mismatch():
    ex = explain_texts([("console.log", NODE0), ("console-node1.log", NODE1)])
    causes = [p for p in ex.problems if not p.consequence_of]
    assert causes[0].code == "version-mismatch" and not ex.undetermined
    assert "errors/__init__.py" in causes[0].observed


def test_one_node_alone_shows_one_release():
    """Near miss: each console alone has one copy of torch's files."""
    for name, text in (("c0", NODE0), ("c1", NODE1)):
        assert different_releases(read_text(name, text)) is None


def test_the_same_release_on_both_nodes_is_no_mismatch():
    """Near miss: node1's console beside itself under another name (same line numbers)."""
    records = read_text("a", NODE1) + read_text("b", NODE1)
    assert different_releases(records) is None


def test_different_code_at_different_lines_of_one_file_is_no_mismatch():
    """Near miss: c10d_logger.py has two functions named wrapper (lines 83 and 97) whose code
    lines differ: not the same code moved."""
    a = ('  File "/v/lib/python3.11/site-packages/torch/distributed/c10d_logger.py", line 83, '
         'in wrapper\n    return func(*args, **kwargs)\nRuntimeError: x\n')
    b = ('  File "/v/lib/python3.11/site-packages/torch/distributed/c10d_logger.py", line 97, '
         'in wrapper\n    func_return = func(*args, **kwargs)\nRuntimeError: y\n')
    assert different_releases(read_text("a", a) + read_text("b", b)) is None
    # one code line at two line numbers alone may be two same-named functions sharing it
    moved = b.replace("func_return = func(*args, **kwargs)", "return func(*args, **kwargs)")
    assert different_releases(read_text("a", a) + read_text("b", moved)) is None


def test_two_frames_moved_between_two_ranks_are_two_releases():
    frame = ('  File "/v/lib/python3.11/site-packages/torch/distributed/{f}", line {n}, in {fn}'
             '\n    {code}\n')

    def tb(n1: int, n2: int) -> str:
        return (frame.format(f="run.py", n=n1, fn="main", code="run(args)")
                + frame.format(f="launcher/api.py", n=n2, fn="__call__",
                               code="return launch_agent(self._config, self._entrypoint, "
                                    "list(args))") + "RuntimeError: x\n")
    assert different_releases(read_text("a", tb(910, 138)) + read_text("b", tb(919, 138))) \
        is None  # one frame moved
    assert different_releases(read_text("a", tb(910, 138)) + read_text("b", tb(919, 194))) \
        is not None
