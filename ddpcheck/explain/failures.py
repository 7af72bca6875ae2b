"""Which lines of a log show that something failed.

Runs wherever ``ddpcheck explain`` runs (a pure reader of records). The engine answers
"NO FAILURE FOUND" only when no record is a failure line, so ``failure_records`` is what keeps
a failed job from being called healthy: a failure line that no rule explains makes explain
abstain (UNEXPLAINED, quoting it), never exit 0. The words themselves, with their producers and
the places in their sources that print them, are ``failurewords``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ddpcheck.explain import prefilter, tracebacks
from ddpcheck.explain.failurewords import (
    AGENT_END_STATE,
    BENIGN,
    EXCEPTION_LINE,
    FRAME,
    HEADER,
    LAUNCH_CONFIG,
    LOGGED_INFO,
    LOGGED_WARNING,
    MARK_STARTS,
    MARKS,
    MARKS_ANYWHERE,
    METRIC,
    START_BAR,
    TEARDOWN,
    TRACEBACK_START,
    WORDS,
)
from ddpcheck.explain.reader import Record, last_lines
from ddpcheck.explain.tracebacks import Matcher

# c10's C++ stack (c10/util/Exception.cpp, c10::Error::what()): "Exception raised from
# recvBytes at .../Utils.hpp:679 (most recent call first):", then "frame #0: ..." lines and
# "<omitting python frames>". A c10d warning that quotes a caught c10::Error carries that
# stack under it ("[W506 ... TCPStore.cpp:125] [c10d] recvValue failed on SocketImpl(...):
# Connection reset by peer" on a store connection the client then retried: stop-32b dev
# gh37-torchcomms-2358, a healthy run); the stack is the warning's, no failure of its own.
C10_STACK = re.compile(r"^\s*Exception raised from \S+ at \S+ \(most recent call first\):")
C10_FRAME = re.compile(r"^\s*(?:frame #\d+:|<omitting python frames>)")


def is_failure(text: str) -> bool:
    """Whether one line shows a failure in its producer's words (warnings aside)."""
    words = METRIC.sub(" ", text)
    return (bool(WORDS.search(words.lower()) or MARKS.search(text))
            and not BENIGN.search(text) and not LAUNCH_CONFIG.search(text))


def _words_need() -> prefilter.Literals | None:
    """WORDS' strings, compared in the folded line (WORDS reads the lowercased one, and a
    string of lowercase ASCII in ``text.lower()`` is in ``prefilter.fold(text)`` too)."""
    need = prefilter.branch_literals(WORDS)
    return need and prefilter.Literals((), tuple(sorted({*need.strings, *need.folded})))


# What a line needs to be more than a line for ``failure_records`` (exact by construction):
# a string of one of its regexes, or a first character MARKS may start with.
LINE_NEEDS = (_words_need(), prefilter.branch_literals(re.compile(MARKS_ANYWHERE)),
              prefilter.literals(TRACEBACK_START), prefilter.literals(FRAME),
              prefilter.literals(EXCEPTION_LINE))


def failure_records(records: Sequence[Record], not_an_error: re.Pattern[str]) -> list[Record]:
    """The records that show a failure: failure words outside warnings and INFO lines, and
    a traceback frame whose header was trimmed
    (frames under a header are the header's: only the header and the exception count)."""
    out: list[Record] = []
    open_: set[tuple[str, int | None]] = set()  # streams inside a traceback with its header
    # streams whose last line was a frame, with the frame's indent: traceback.py prints the
    # frame's source line under it, indented deeper ('  File ...' then '    raise X(...)')
    framed: dict[tuple[str, int | None], int] = {}
    # the lines that may match one of the regexes below; on the others, only ``framed`` moves
    maybe = prefilter.lines_with([r.text for r in records], LINE_NEEDS)
    warned_stack: set[tuple[str, int | None]] = set()  # streams inside a warning's c10 stack
    for k, r in enumerate(records):
        if maybe is not None and k not in maybe and r.text.lstrip()[:1] not in MARK_STARTS:
            if framed:
                framed.pop((r.source, r.rank), None)
            continue
        stream = (r.source, r.rank)
        if warned_stack and stream in warned_stack:
            if C10_FRAME.match(r.text):
                continue
            warned_stack.discard(stream)
        if C10_STACK.match(r.text) and k and _warned(records[k - 1], r, not_an_error):
            warned_stack.add(stream)
            continue
        if TRACEBACK_START.search(r.text):
            open_.add(stream)
        elif EXCEPTION_LINE.match(r.text):
            open_.discard(stream)
        if FRAME.match(r.text):
            if stream not in open_:
                out.append(r)
                open_.add(stream)  # one quote per headerless traceback
            framed[stream] = _indent(r.text)
            continue
        if _indent(r.text) > framed.pop(stream, len(r.text)):
            continue  # the frame's source line: code, no failure ('    raise AssertionError(')
        if (is_failure(r.text) and not not_an_error.search(r.text)  # the rarer test first
                and (not (LOGGED_WARNING.search(r.text) or LOGGED_INFO.match(r.text))
                     or TEARDOWN.search(r.text) or AGENT_END_STATE.search(r.text))):
            out.append(r)
    return out


def _warned(before: Record, r: Record, not_an_error: re.Pattern[str]) -> bool:
    """Whether ``before``, the line above ``r`` in its stream, is a warning (c10's ``[W``)."""
    return (before.source, before.rank) == (r.source, r.rank) and bool(
        not_an_error.search(before.text) or LOGGED_WARNING.search(before.text))


def _indent(text: str) -> int:
    return len(text) - len(text.lstrip())


def unread(errors: Sequence[Record], patterns: Sequence[Matcher]) -> list[Record]:
    """Failure lines that no pattern reads and that are no part of a traceback or a wrapper
    (the exception itself is ``tracebacks.unclaimed``'s): the first of each stream."""
    out: dict[tuple[str, int | None], Record] = {}
    for r in errors:
        if ((r.source, r.rank) in out or TRACEBACK_START.search(r.text) or FRAME.match(r.text)
                or EXCEPTION_LINE.match(r.text) or tracebacks.BARE.match(r.text)
                or tracebacks.WRAPPER.search(r.text) or TEARDOWN.search(r.text)
                or HEADER.match(r.text) or any(p.regex.search(r.text) for p in patterns)):
            continue
        out[(r.source, r.rank)] = r
    return list(out.values())


def stalled_at_start(records: Sequence[Record]) -> Record | None:
    """The last line of a source when it is a progress bar still at 0 (after ``\\r``)."""
    last = last_lines(records)
    for r in last.values():
        if START_BAR.search(r.text.split("\r")[-1] or r.text):
            return r
    return None
