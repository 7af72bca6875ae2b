"""The torch rule: only the worker side, the probes and the one place that opens torch's store
import torch, and that place lazily, so the launcher starts (and diagnoses) without torch."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.paths import ROOT

PACKAGE = ROOT / "ddpcheck"
TORCH_AT_MODULE_LEVEL = (PACKAGE / "worker", ROOT / "checks")
TORCH_INSIDE_FUNCTIONS = (PACKAGE / "cluster" / "store.py",)


def modules() -> list[Path]:
    """Every module of ddpcheck and checks/ (not the checks symlink inside ddpcheck/)."""
    inside = [p for p in PACKAGE.rglob("*.py")
              if not p.relative_to(PACKAGE).parts[0] == "checks"]
    return sorted(inside + list((ROOT / "checks").rglob("*.py")))


def torch_imports(tree: ast.AST) -> Iterator[tuple[ast.stmt, bool]]:
    """(statement, inside a function?) for every import of torch or a torch submodule."""
    def walk(node: ast.AST, in_function: bool) -> Iterator[tuple[ast.stmt, bool]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import) and any(
                    a.name == "torch" or a.name.startswith("torch.") for a in child.names):
                yield child, in_function
            elif isinstance(child, ast.ImportFrom) and child.level == 0 and child.module and (
                    child.module == "torch" or child.module.startswith("torch.")):
                yield child, in_function
            yield from walk(child, in_function or isinstance(
                child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))
    return walk(tree, False)


def test_the_walk_sees_the_whole_tree() -> None:
    names = {p.relative_to(ROOT).as_posix() for p in modules()}
    assert {"ddpcheck/cluster/store.py", "ddpcheck/worker/world.py",
            "checks/test_collectives.py", "ddpcheck/launcher/cli.py"} <= names
    assert not any(n.startswith("ddpcheck/checks/") for n in names)


@pytest.mark.parametrize("path", modules(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_torch_is_imported_only_where_the_rule_allows(path: Path) -> None:
    found = list(torch_imports(ast.parse(path.read_text(), str(path))))
    if any(path.is_relative_to(d) for d in TORCH_AT_MODULE_LEVEL):
        return
    where = path.relative_to(ROOT).as_posix()
    if path in TORCH_INSIDE_FUNCTIONS:
        assert all(inside for _, inside in found), \
            f"{where} may import torch only inside a function (line " \
            f"{[s.lineno for s, inside in found if not inside]})"
        return
    assert not found, (f"{where} imports torch (line {[s.lineno for s, _ in found]}): only "
                       "ddpcheck/worker/, checks/ and ddpcheck/cluster/store.py may")


def test_the_detector_tells_module_level_from_function_level() -> None:
    tree = ast.parse("import torch.distributed as dist\n"
                     "def f():\n    from torch import nn\n"
                     "from torchvision import x\nimport os\n")
    assert [(s.lineno, inside) for s, inside in torch_imports(tree)] == [(1, False), (3, True)]


@pytest.mark.parametrize("module", ["ddpcheck.launcher.runner", "ddpcheck.launcher.cli"])
def test_the_launcher_side_imports_without_torch(module: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", f"import {module}, sys; assert 'torch' not in sys.modules, "
         "[m for m in sys.modules if m.startswith('torch')][:5]"],
        capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
