"""Tests for ddpcheck.report.catalog: listing the probes in checks/ without importing them."""

from __future__ import annotations

import ast
from pathlib import Path

from ddpcheck.report.catalog import checks_dir, list_probes
from ddpcheck.stages import MARKER, STAGES
from tests.helpers.paths import ROOT

CHECKS = ROOT / "checks"


def decorator_stage(dec: ast.expr) -> str | None:
    """The stage named by @stage("x"), @stages.stage("x") or @pytest.mark.ddpcheck_stage("x")."""
    if not isinstance(dec, ast.Call) or not dec.args:
        return None
    func = dec.func
    name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
    if name in ("stage", MARKER) and isinstance(dec.args[0], ast.Constant):
        return str(dec.args[0].value)
    return None


def probe_functions(directory: Path):
    """Every module-level test_ function in the check modules, with its file."""
    for path in sorted(directory.glob("test_*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                    node.name.startswith("test_"):
                yield path, node


def test_checks_dir_is_the_repositorys_checks_directory():
    assert checks_dir().resolve() == CHECKS


def test_every_probe_in_checks_has_a_known_stage_and_a_docstring():
    found = list(probe_functions(CHECKS))
    assert found
    for path, node in found:
        stages = [s for s in map(decorator_stage, node.decorator_list) if s]
        assert len(stages) == 1, f"{path.name}::{node.name} needs one stage marker"
        assert stages[0] in STAGES, f"{path.name}::{node.name}: unknown stage {stages[0]}"
        doc = ast.get_docstring(node)
        assert doc and doc.strip(), f"{path.name}::{node.name} needs a docstring"


def test_no_probes_hide_in_test_classes_the_catalog_cannot_see():
    for path in CHECKS.glob("test_*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        assert not [n.name for n in tree.body if isinstance(n, ast.ClassDef)
                    and n.name.startswith("Test")], path.name


def test_list_probes_finds_every_probe_in_checks():
    listed = {name for _, name, _ in list_probes()}
    assert listed == {node.name for _, node in probe_functions(CHECKS)}
    assert len(list_probes()) == len(listed)  # no name listed twice


def test_list_probes_gives_stage_and_first_docstring_line():
    expected = {node.name: (next(filter(None, map(decorator_stage, node.decorator_list))),
                            ast.get_docstring(node).strip().splitlines()[0])
                for _, node in probe_functions(CHECKS)}
    for stage, name, doc in list_probes():
        assert (stage, doc) == expected[name]


def test_list_probes_is_in_stage_order_and_covers_every_stage():
    stages = [stage for stage, _, _ in list_probes()]
    order = list(STAGES)
    assert stages == sorted(stages, key=order.index)
    assert set(stages) == set(STAGES)


def test_list_probes_keeps_file_order_within_a_stage():
    in_files = [(p.name, n.name) for p, n in probe_functions(CHECKS)]
    position = {name: i for i, (_, name) in enumerate(in_files)}
    by_stage: dict[str, list[str]] = {}
    for stage, name, _ in list_probes():
        by_stage.setdefault(stage, []).append(name)
    for names in by_stage.values():
        assert names == sorted(names, key=position.__getitem__)


def write(directory: Path, name: str, text: str) -> None:
    (directory / name).write_text(text, encoding="utf-8")


def test_list_probes_of_a_directory_reads_source_without_importing_it(tmp_path):
    write(tmp_path, "test_b.py", 'raise SystemExit("never imported")\n'
          '@stage("ddp")\ndef test_late():\n    """Late probe.\n\n    More."""\n'
          '@stage("node")\ndef test_early():\n    pass\n'
          'def test_unmarked():\n    """No stage."""\n'
          '@stage("node")\ndef helper():\n    """Not a test."""\n')
    write(tmp_path, "test_a.py", '@stage("rendezvous")\ndef test_mid():\n    """Mid."""\n')
    write(tmp_path, "other.py", '@stage("node")\ndef test_ignored():\n    """x"""\n')
    assert list_probes(tmp_path) == [("node", "test_early", ""), ("rendezvous", "test_mid", "Mid."),
                                     ("ddp", "test_late", "Late probe.")]


def test_list_probes_puts_unknown_stages_last(tmp_path):
    write(tmp_path, "test_x.py", '@stage("zzz")\ndef test_z():\n    """z"""\n'
          '@stage("node")\ndef test_n():\n    """n"""\n')
    assert [name for _, name, _ in list_probes(tmp_path)] == ["test_n", "test_z"]


def test_list_probes_understands_the_marker_and_qualified_stage_forms(tmp_path):
    write(tmp_path, "test_m.py",
          '@pytest.mark.ddpcheck_stage("node")\ndef test_marker():\n    """m"""\n'
          '@stages.stage("ddp")\ndef test_qualified():\n    """q"""\n')
    assert list_probes(tmp_path) == [("node", "test_marker", "m"), ("ddp", "test_qualified", "q")]
