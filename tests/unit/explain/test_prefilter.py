"""The prefilter's required strings: what it finds for typical pattern shapes, where it gives
up, case folding, and that it never drops a pattern from a line the pattern matches: on
every line of every corpus log, and for explain's whole output (on and off, identical).

Held-out logs are explained and compared here, never shown: a failure names only counts
and the ids of dev cases.
"""

from __future__ import annotations

import json
import re
import sys

import pytest

from ddpcheck.explain import prefilter, reader
from ddpcheck.explain.engine import explain_inputs, explain_texts
from ddpcheck.explain.families import PATTERNS
from ddpcheck.explain.inputs import read_inputs
from ddpcheck.explain.prefilter import Literals, candidates, literals
from ddpcheck.explain.reader import read_text
from tests.helpers.explain_corpus import corpus_inputs


def lits(pattern: str, shortest: int = prefilter.MIN_LITERAL) -> Literals | None:
    return literals(re.compile(pattern), shortest)


@pytest.mark.parametrize(("pattern", "want"), [
    # the longest literal run of a sequence
    (r"Watchdog caught \w+ timeout", ("Watchdog caught ",)),
    (r"failed \(exitcode: (?P<code>-\d+)\) local_rank", ("failed (exitcode: ",)),
    (r"\bNCCL WARN\b", ("NCCL WARN",)),
    # a required alternation: one string per branch, expanded into the run around it
    (r"Distributed package doesn't have (?:NCCL|MPI) built in",
     ("Distributed package doesn't have MPI built in",
      "Distributed package doesn't have NCCL built in")),
    (r"(?:alpha|beta)\d+", ("alpha", "beta")),
    (r"[Mm]essage truncated", ("Message truncated", "message truncated")),
    (r"(?:x*foo\d|ba\s+quux)", ("foo", "quux")),  # each branch's own best
    (r"(?:ab\dxyz)+", ("xyz",)),  # a repeat of at least one: its body's strings
])
def test_required_strings_of_typical_shapes(pattern, want):
    assert lits(pattern) == Literals(want)


@pytest.mark.parametrize("pattern", [
    r"abc|\d+",                 # a branch without a literal: any line may match
    r"(?:Error: )?\d+ f",        # an optional group, then a string too short
    r"(?:exit code )*\w+",       # a repeat that may be absent
    r"[a-z]+ \d+",               # classes only
    r"ab\d",                     # too short to be worth a search
    r"(?=timeout)\w+",           # a lookahead is not read
    "",
])
def test_it_gives_up_when_a_match_need_not_contain_a_literal(pattern):
    assert lits(pattern) is None


def test_a_short_string_serves_a_per_line_check():
    assert lits(r"ab\d", shortest=2) == Literals(("ab",))
    assert lits(r"\w+:\d+ \[\d+\] ", shortest=2) == Literals((" [",))


@pytest.mark.parametrize(("pattern", "want"), [
    (r"(?i)Invalid Device Ordinal", Literals((), ("invalid device ordinal",))),
    (r"Invalid Device", Literals(("Invalid Device",))),
    (r"foo(?i:BAR)", Literals((), ("foobar",))),  # a scoped flag folds the whole run
    (r"(?i)x\d(?-i:ABC)", Literals(("ABC",))),  # ... and a scoped unset unfolds
    (r"(?i)x(?-i:ABC)", Literals((), ("xabc",))),  # a run of both: compared folded
    (r"(?i)oom-kill|Out Of Memory", Literals((), ("oom-kill", "out of memory"))),
])
def test_ignore_case_strings_are_compared_folded(pattern, want):
    assert lits(pattern) == want


def test_fold_maps_every_character_ignorecase_matches_to_an_ascii_one():
    """re's IGNORECASE matches a few non-ASCII letters to ASCII ones (the Kelvin sign, dotted
    and dotless i, long s): fold must turn each into that letter, or a line would be lost."""
    every = "".join(chr(c) for c in range(0x80, sys.maxunicode + 1)
                    if not 0xD800 <= c <= 0xDFFF)
    printable = [chr(c) for c in range(0x20, 0x7F)]
    for ch in set(re.findall(r"(?i)[\x20-\x7e]", every)):
        matched = {a.lower() for a in printable if re.fullmatch("(?i)" + re.escape(a), ch)}
        assert matched == {prefilter.fold(ch)}, hex(ord(ch))
    assert re.search(r"(?i)invalid device", "\u0130NVALID DEV\u0130CE")
    assert candidates(["\u0130NVALID DEV\u0130CE ordinal", "ok"],
                      [re.compile(r"(?i)invalid device")]) == [(0,), ()]


def test_candidates_keep_order_and_the_patterns_without_strings():
    regexes = [re.compile(r"NCCL WARN"), re.compile(r"\d+"), re.compile(r"Killed\s*$")]
    got = candidates(["NCCL WARN x Killed", "step 1", "NCCL"], regexes)
    assert got == [(0, 1, 2), (1,), (1,)]


def test_a_string_across_two_lines_is_no_hit():
    assert candidates(["xx NCC", "L WARN"], [re.compile("NCCL WARN")]) == [(), ()]
    assert lits("NCCL\nWARN") == Literals(("NCCL",))  # a newline ends a run


def test_turned_off_every_pattern_is_tried_on_every_line(monkeypatch):
    monkeypatch.setattr(prefilter, "ENABLED", False)
    assert candidates(["a", "b"], [re.compile("x"), re.compile("y")]) == [(0, 1), (0, 1)]


def test_no_pattern_is_dropped_from_a_corpus_line_it_matches():
    """For every pattern of explain's families and every line of every corpus log (as explain
    reads it) that the pattern matches: the line contains one of its strings, and
    ``candidates`` keeps the pattern for that line."""
    regexes = [p.regex for p in PATTERNS]
    needs = [literals(rx) for rx in regexes]
    host = prefilter.may_match(reader.NCCL_HOST)
    missed: dict[str, int] = {}  # pattern -> lines; dev ids shown, held-out ones never
    checked = 0
    for c in corpus_inputs():
        inputs = read_inputs([str(c.path)], None)
        texts = [r.text for name, text in inputs.logs for r in read_text(name, text)]
        for text, kept in zip(texts, candidates(texts, regexes)):
            hits = [i for i, rx in enumerate(regexes) if rx.search(text)]
            checked += len(hits)
            lost = [regexes[i] for i in hits if i not in kept or not _contains(needs[i], text)]
            if reader.NCCL_HOST.search(text) and not host(text):
                lost.append(reader.NCCL_HOST)
            for rx in lost:
                key = f"{rx.pattern[:60]} in {'a held-out log' if c.heldout else c.id}"
                missed[key] = missed.get(key, 0) + 1
    assert not missed, missed
    assert checked > 1000


def _contains(need: Literals | None, text: str) -> bool:
    return need is None or any(s in text for s in need.strings) or any(
        s in prefilter.fold(text) for s in need.folded)


def _output(path: str) -> str:
    ex = explain_inputs(read_inputs([path], None))
    return json.dumps(ex.to_json(), sort_keys=True) + ex.render_text() + str(ex.exit_code)


def test_explain_says_the_same_with_and_without_the_prefilter(monkeypatch):
    """Every problem's code, observed, ranks, hosts, evidence, the verdict and the exit code,
    on every dev log, recorded run and old corpus log. (``python -m bench.explain_speed
    --check`` compares the held-out logs too.)"""
    inputs = [c for c in corpus_inputs() if not c.heldout]
    on = {c.id: _output(str(c.path)) for c in inputs}
    monkeypatch.setattr(prefilter, "ENABLED", False)
    monkeypatch.setattr(prefilter, "GATES", False)
    assert [c.id for c in inputs if _output(str(c.path)) != on[c.id]] == []


def test_every_branch_of_a_long_alternation_gives_its_strings():
    from ddpcheck.explain.failurewords import WORDS
    need = prefilter.branch_literals(WORDS)
    assert need is not None and "out of memory" in need.strings and len(need.strings) > 32
    assert prefilter.branch_literals(re.compile(r"abc|\d+x")) is None  # a branch without one


# Lines that the gates must not skip: each matches a regex only at its start or in a
# capitalisation other than the string's, or names a field of torchrun's failure block.
TRICKY = """\
step 1 loss 0.1
  E0325 20:57:27.620000 123 ProcessGroupNCCL.cpp:1 boom
[F socket.cpp:2] fatal
Thread 0x1A (active): "MainThread"
\u212aILLED by the kernel
-- Process 1 terminated with the following error:
Traceback (most recent call last):
  File "train.py", line 3, in main
    raise ValueError("x")
ValueError: x
Root Cause (first observed failure):
[0]:
  host      : node7
  rank      : 5 (local_rank: 1)
  exitcode  : 1 (pid: 42)
==========
got SIGKILL
"""


def test_the_gates_change_nothing_on_lines_that_match_only_at_their_start(monkeypatch):
    from ddpcheck.explain import failures, tracebacks
    from ddpcheck.explain.engine import NOT_AN_ERROR

    def said() -> tuple[object, ...]:
        prefilter.forget()
        recs = read_text("j.log", TRICKY)
        return (recs, failures.failure_records(recs, NOT_AN_ERROR), tracebacks.crashes(recs),
                reader.first_failed_rank(recs))

    on = said()
    assert on[1] and on[2] and on[3] == 5
    monkeypatch.setattr(prefilter, "GATES", False)
    assert said() == on


def test_the_reader_skips_the_nccl_host_regex_only_where_it_cannot_match():
    may = prefilter.may_match(reader.NCCL_HOST)
    assert may("node1:12:34 [0] NCCL INFO x") and not may("rank 1: step 3 loss 0.2")


def test_a_string_inside_another_is_found_in_its_lines_alone(monkeypatch):
    """A string that holds one found already ("NCCL WARN" holds "NCCL"; "no route" folded
    holds "route") is looked for in that one's lines: the same lines as a whole-text search."""
    texts = ["NCCL WARN x", "nccl warn y", "NCCL INFO", "No Route to host", "route 66",
             *(f"step {i} loss 0.1" for i in range(3000))]
    regexes = [re.compile("NCCL"), re.compile("NCCL WARN"), re.compile("(?i)nccl warn"),
               re.compile("route"), re.compile("(?i)no route"), re.compile("Route to")]
    searched: list[str] = []
    monkeypatch.setattr(prefilter, "COVER_MIN_CHARS", 0)  # a long log's path, on a short one
    whole = prefilter._Lines._search
    monkeypatch.setattr(prefilter._Lines, "_search",
                        lambda self, s, f: searched.append(s) or whole(self, s, f))
    prefilter.forget()
    on = candidates(texts, regexes)
    assert on[:5] == [(0, 1, 2), (2,), (0,), (4, 5), (3,)] and on[5] == ()
    assert len(searched) < 6  # the longer strings were looked for in the shorter's lines
    monkeypatch.setattr(prefilter, "GATES", False)
    assert candidates(texts, regexes) == on
    assert prefilter._covers(("route", True), ("No Route", False))
    assert not prefilter._covers(("Route", False), ("no route", True))


def test_explain_drops_the_logs_index_even_when_a_rule_raises(monkeypatch):
    """The index of a log's lines lives only while explain reads that log: a rule that
    raises must not leave a (possibly huge) index behind for the next log."""
    from ddpcheck.explain import failures

    def broken(*_args, **_kwargs):
        raise RuntimeError("a rule's bug")

    monkeypatch.setattr(failures, "failure_records", broken)
    with pytest.raises(RuntimeError, match="a rule's bug"):
        explain_texts([("rank0.log", "NCCL WARN Cuda failure 'out of memory'\n" * 50)])
    assert prefilter._recent == []
