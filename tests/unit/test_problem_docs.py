"""docs/problems.md lists every problem code, as generated from the catalogue."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from ddpcheck.report.catalog import problems_markdown
from tests.helpers.paths import ROOT

DOC = ROOT / "docs" / "problems.md"


def test_problem_page_is_up_to_date_with_the_catalogue():
    assert DOC.read_text() == problems_markdown(), (
        "regenerate it: python -m ddpcheck.report.catalog > docs/problems.md")


def test_every_registered_code_is_documented():
    from ddpcheck.diagnoses import load_catalogue

    documented = set(re.findall(r"^## `([a-z0-9-]+)`$", DOC.read_text(), re.M))
    assert set(load_catalogue()) == documented


def registering_modules() -> set[str]:
    """Every module whose source assigns a ``register(...)`` result, found by reading it."""
    package = ROOT / "ddpcheck"
    found = set()
    for path in package.rglob("*.py"):
        rel = path.relative_to(package)
        if rel.parts[0] == "checks" or path.name == "__main__.py":
            continue
        if re.search(r"^[A-Z_]+ = register\(", path.read_text(encoding="utf-8"), re.M):
            found.add(".".join(("ddpcheck", *rel.with_suffix("").parts)))
    return found


def test_the_catalogue_module_list_is_complete():
    from ddpcheck.diagnoses import CATALOGUE_MODULES

    assert len(set(CATALOGUE_MODULES)) == len(CATALOGUE_MODULES), "a module is listed twice"
    missing = registering_modules() - set(CATALOGUE_MODULES)
    assert not missing, f"add to diagnoses.CATALOGUE_MODULES: {sorted(missing)}"
    idle = set(CATALOGUE_MODULES) - registering_modules()
    assert not idle, f"these register no code, remove them from CATALOGUE_MODULES: {sorted(idle)}"


def test_loading_the_catalogue_imports_no_torch():
    code = ("import sys; from ddpcheck.diagnoses import load_catalogue; "
            "assert len(load_catalogue()) > 100; assert 'torch' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=str(ROOT))


def test_register_refuses_a_conflicting_redefinition():
    from ddpcheck import diagnoses

    first = diagnoses.register("test-only-code", "a summary", "a cause", "a fix")
    try:
        assert diagnoses.register("test-only-code", "a summary", "a cause", "a fix") is first
        with pytest.raises(ValueError, match="test-only-code"):
            diagnoses.register("test-only-code", "another summary", "a cause", "a fix")
        assert diagnoses.CATALOGUE["test-only-code"] is first
    finally:
        del diagnoses.CATALOGUE["test-only-code"]
