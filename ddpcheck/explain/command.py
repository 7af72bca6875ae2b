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

from ddpcheck.explain.engine import explain_inputs
from ddpcheck.explain.inputs import read_inputs
from ddpcheck.parsing import UsageError


def cmd_explain(paths: Sequence[str], json_path: str | None,
                stdin: TextIO | None = None, stdout: TextIO | None = None) -> int:
    stdout = stdout or sys.stdout
    explanation = explain_inputs(read_inputs(paths, stdin or sys.stdin))
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
