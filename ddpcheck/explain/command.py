"""``ddpcheck explain [LOG ...] [--json PATH|-]``: read logs (or stdin), print the explanation.

Runs on the user's machine. Exit 1 when the logs show a failure (explained or not), 0 when
they show none, 2 for bad input (a missing or unreadable file, an empty input): one line,
never a traceback.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from ddpcheck.explain.engine import explain_texts
from ddpcheck.parsing import UsageError

MAX_BYTES = 256 * 1024 * 1024  # a log larger than this is cut to its last part


def read_inputs(paths: Sequence[str], stdin: TextIO) -> list[tuple[str, str]]:
    """(name, text) of each LOG, or of stdin when there is none (or for '-')."""
    out = []
    for p in paths or ["-"]:
        if p == "-":
            if stdin.isatty():
                raise UsageError("no LOG given and stdin is a terminal: pass a log file "
                                 "or pipe one in (ddpcheck explain job.out)")
            out.append(("<stdin>", stdin.read()))
            continue
        path = Path(p)
        try:
            with open(path, "rb") as fh:
                size = path.stat().st_size
                fh.seek(max(0, size - MAX_BYTES))
                out.append((p, fh.read().decode("utf-8", errors="replace")))
        except OSError as exc:
            raise UsageError(f"cannot read {p}: {exc.strerror or exc}") from None
    if not any(text.strip() for _, text in out):
        raise UsageError("the input is empty: nothing to explain")
    return out


def cmd_explain(paths: Sequence[str], json_path: str | None,
                stdin: TextIO | None = None, stdout: TextIO | None = None) -> int:
    stdout = stdout or sys.stdout
    explanation = explain_texts(read_inputs(paths, stdin or sys.stdin))
    data = explanation.to_json()
    if json_path == "-":
        stdout.write(json.dumps(data, indent=2) + "\n")
        return explanation.exit_code
    stdout.write(explanation.render_text())
    if json_path:
        try:
            Path(json_path).write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"cannot write --json {json_path}: {exc.strerror or exc}") from None
    return explanation.exit_code
