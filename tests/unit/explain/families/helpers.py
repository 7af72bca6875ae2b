"""First cause of a few log lines, for the family tests."""

from __future__ import annotations

from ddpcheck.explain import explain_texts


def first_cause(*lines: str) -> str:
    e = explain_texts([("job.log", "\n".join(lines) + "\n")])
    causes = [p.code for p in e.problems if not p.consequence_of]
    return causes[0] if causes else "none"
