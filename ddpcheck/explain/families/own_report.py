"""``ddpcheck run``'s own report text, fed back: its problem blocks keep their codes."""

from __future__ import annotations

import re
from collections.abc import Sequence

from ddpcheck.diagnoses import CATALOGUE, Diagnosis, Problem
from ddpcheck.explain.matching import Hit, Pattern, observed_lines, where

NEXT = "the same ddpcheck run command again after the fix"
OWN = Diagnosis("ddpcheck-report", "a problem block of a ddpcheck run report", "", "")


def combine(hits: Sequence[Hit]) -> Problem:
    code = hits[0].match["code"]
    d = CATALOGUE.get(code, OWN)
    return Problem(code, d.summary, observed_lines(hits), d.cause, d.fix,
                   stage=hits[0].match["stage"] or "", **where(hits))


PATTERNS = [
    Pattern(OWN, re.compile(r"^FAIL  (?P<code>[a-z0-9-]+)\s.*?(?:stage (?P<stage>[\w-]+))?$"),
            NEXT, combine=combine, group_by="code"),
]
