"""explain's inputs: several files, a directory, gzip (even cut short), stdin, bad input."""

from __future__ import annotations

import gzip
import io

import pytest

from ddpcheck.explain.inputs import read_inputs
from ddpcheck.parsing import UsageError
from tests.helpers.paths import DATA


class _Stdin(io.TextIOWrapper):
    def isatty(self) -> bool:
        return False


def test_a_directory_yields_its_logs_in_name_order_and_its_dumps_as_traces(tmp_path):
    (tmp_path / "b.err").write_text("second\n")
    (tmp_path / "a.out").write_text("first\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "fr_trace_0").write_bytes(
        (DATA / "flightrec" / "desync" / "fr_trace_0").read_bytes())
    got = read_inputs([str(tmp_path)], None)
    assert [name.rsplit("/", 1)[1] for name, _ in got.logs] == ["a.out", "b.err"]
    assert [t.rank for t in got.traces] == [0]


def test_gzip_is_read_by_its_magic_and_a_truncated_one_keeps_what_was_written(tmp_path):
    text = "".join(f"[rank{i % 4}]: line {i}\n" for i in range(5000)).encode()
    whole = gzip.compress(text)
    (tmp_path / "job.log").write_bytes(whole)  # no .gz suffix
    (tmp_path / "cut.gz").write_bytes(whole[: len(whole) // 2])
    (_, full), = read_inputs([str(tmp_path / "job.log")], None).logs
    assert full == text.decode()
    (_, part), = read_inputs([str(tmp_path / "cut.gz")], None).logs
    assert 0 < len(part) < len(full) and text.decode().startswith(part)


def test_stdin_dash_and_gzip_on_stdin():
    data = gzip.compress(b"NCCL WARN boom\n")
    got = read_inputs(["-"], _Stdin(io.BytesIO(data)))
    assert got.logs == (("<stdin>", "NCCL WARN boom\n"),)


def test_missing_file_and_empty_input_are_one_line_usage_errors(tmp_path):
    with pytest.raises(UsageError, match="cannot read"):
        read_inputs([str(tmp_path / "nope.log")], None)
    (tmp_path / "empty.log").write_text("\n")
    with pytest.raises(UsageError, match="the input is empty"):
        read_inputs([str(tmp_path / "empty.log")], None)
