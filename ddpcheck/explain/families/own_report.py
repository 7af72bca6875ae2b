"""``ddpcheck run``'s own report text, fed back: its problem blocks keep their codes."""

from __future__ import annotations

import re
from collections.abc import Sequence

from ddpcheck.diagnoses import Diagnosis, Problem, load_catalogue
from ddpcheck.explain.matching import Hit, Pattern, observed_lines, where

NEXT = "the same ddpcheck run command again after the fix"
OWN = Diagnosis("ddpcheck-report", "a problem block of a ddpcheck run report", "", "")


def combine(hits: Sequence[Hit]) -> Problem | None:
    """The block's own problem. Who else prints "FAIL  <word> ...": test runners (Jest's
    "FAIL  src/app.test.js", other harnesses' summaries); only a code of ddpcheck's catalogue
    is ddpcheck's block, any other word is no failure read here."""
    code = hits[0].match["code"]
    d = load_catalogue().get(code)
    if d is None:
        return None
    return Problem(code, d.summary, observed_lines(hits), d.cause, d.fix,
                   stage=hits[0].match["stage"] or "", **where(hits))


PATTERNS = [
    Pattern(OWN, re.compile(r"^FAIL  (?P<code>[a-z0-9-]+)\s.*?(?:stage (?P<stage>[\w-]+))?$"),
            NEXT, combine=combine, group_by="code"),
]
