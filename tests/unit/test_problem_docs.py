"""docs/problems.md lists every problem code, as generated from the catalogue."""

from __future__ import annotations

from ddpcheck.report.catalog import problems_markdown
from tests.helpers.paths import ROOT

DOC = ROOT / "docs" / "problems.md"


def test_problem_page_is_up_to_date_with_the_catalogue():
    assert DOC.read_text() == problems_markdown(), (
        "regenerate it: python -m ddpcheck.report.catalog > docs/problems.md")


def test_every_registered_code_is_documented():
    import importlib
    import pkgutil
    import re

    import ddpcheck
    from ddpcheck.diagnoses import CATALOGUE

    for mod in pkgutil.iter_modules(ddpcheck.__path__):
        if mod.name not in ("__main__", "plugin", "worker"):
            importlib.import_module(f"ddpcheck.{mod.name}")
    documented = set(re.findall(r"^## `([a-z0-9-]+)`$", DOC.read_text(), re.M))
    assert set(CATALOGUE) == documented, "diagnosis_modules() misses a module"
