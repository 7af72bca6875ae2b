"""README's two commands come first, CI runs exactly README's test command, README stays a
newcomer's page (at most 250 lines) whose contents link every page of docs/, and the layout
map in docs/layout.md names every module."""

from __future__ import annotations

import re

from tests.helpers.paths import ROOT


def commands() -> list[str]:
    return re.findall(r"```\n(.+?)\n```", (ROOT / "README.md").read_text())


def test_readme_starts_with_install_and_run_then_install_and_test():
    first, second = commands()[:2]
    assert "pip install" in first and "ddpcheck run" in first
    assert "pip install" in second and "pytest" in second


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text()
    assert commands()[1] in ci.splitlines()


def test_every_run_flag_is_documented():
    from ddpcheck.launcher.config import SETTINGS

    flags = (ROOT / "docs" / "flags.md").read_text()
    for _, flag, var, _ in SETTINGS:
        assert f"`{flag}" in flags and var in flags, flag


def test_readme_is_a_short_page():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 250


def test_readme_links_every_docs_page_and_every_link_resolves():
    readme = (ROOT / "README.md").read_text()
    linked = set(re.findall(r"\]\((docs/[^)#]+\.md)\)", readme))
    pages = {p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").glob("*.md")}
    assert pages <= linked, f"not linked from README: {sorted(pages - linked)}"
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for target in re.findall(r"\]\(([^)#:]+?)(?:#[^)]*)?\)", page.read_text()):
            assert (page.parent / target).exists(), f"{page.name}: broken link {target}"


def test_the_layout_map_names_every_package_and_module():
    readme = (ROOT / "docs" / "layout.md").read_text()
    section = readme.split("## How the code is laid out", 1)[1].split("\n## ", 1)[0]
    tree = section.split("```", 2)[1]
    package = ROOT / "ddpcheck"
    packages = [p for p in package.iterdir() if (p / "__init__.py").exists()]
    for pkg in sorted(p for p in packages if p.name != "checks"):  # checks/ is the top's
        assert f"{pkg.name}/" in tree, pkg.name
        if pkg.name == "explain":
            continue  # explain/ is mapped as one room (its README section says the rest)
        for mod in sorted(pkg.glob("*.py")):
            if mod.stem not in ("__init__", "__main__"):
                assert re.search(rf"\b{mod.stem}\b", tree), f"{pkg.name}/{mod.name}"
    for mod in sorted(package.glob("*.py")):
        if mod.stem not in ("__init__", "__main__"):
            assert f"{mod.name}" in tree, mod.name
