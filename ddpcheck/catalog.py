"""List the probes without importing them (no torch import): stage, name, docstring.

Runs in the launcher (``ddpcheck list``); reads the check modules' source with ast.
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

from ddpcheck.stages import MARKER, STAGES


def checks_dir() -> Path:
    spec = importlib.util.find_spec("ddpcheck.checks")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("ddpcheck.checks is not installed")
    return Path(next(iter(spec.submodule_search_locations)))


def list_probes(directory: Path | None = None) -> list[tuple[str, str, str]]:
    """(stage, probe name, first docstring line) for every probe, in run order."""
    found = []
    for path in sorted((directory or checks_dir()).glob("test_*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                stage = _stage(node)
                doc = (ast.get_docstring(node) or "").strip().splitlines()
                if stage:
                    found.append((stage, node.name, doc[0] if doc else ""))
    order = {name: i for i, name in enumerate(STAGES)}
    return sorted(found, key=lambda t: order.get(t[0], len(order)))


def _stage(node: ast.FunctionDef) -> str | None:
    for dec in node.decorator_list:
        name = dec.func.id if isinstance(dec, ast.Call) and isinstance(dec.func, ast.Name) \
            else getattr(getattr(dec, "func", None), "attr", "")
        if (isinstance(dec, ast.Call) and name in ("stage", MARKER)
                and dec.args and isinstance(dec.args[0], ast.Constant)):
            return str(dec.args[0].value)
    return None
