"""Apply every family's matchers to the records, order the problems, render text and JSON.

Runs wherever ``ddpcheck explain`` runs (no torch, no network). Each record is claimed by
the first pattern that matches it (families go from specific to generic), hits of one code
become one Problem, ``causality`` orders them, and the run report's ``render_problem``
prints each block so a log and a run read the same. A ``ddpcheck run`` JSON report fed
back keeps its problems as they are.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ddpcheck.diagnoses import RANK_KILLED, Problem, load_catalogue
from ddpcheck.explain import (
    attempts,
    codes,
    failures,
    failurewords,
    firstfailure,
    globalranks,
    prefilter,
    tracebacks,
)
from ddpcheck.explain.causality import (
    CAUSE,
    HINT,
    SYMPTOM,
    UNDETERMINED,
    WARNING,
    Explained,
    condition_alone,
    order,
)
from ddpcheck.explain.families import (
    PATTERNS,
    device,
    formation,
    ibfallback,
    netcontext,
    slurm,
    watchdog,
    windows,
)
from ddpcheck.explain.flightrec import RankTrace
from ddpcheck.explain.frmatch import FR_NEXT, analyse, stuck_in
from ddpcheck.explain.inputs import Inputs
from ddpcheck.explain.matching import Hit, Pattern, default_combine
from ddpcheck.explain.reader import Record, first_failed_rank, read_text
from ddpcheck.report.text import render_problem

# Lines that say something failed in words but report no failure: warnings (torch's
# "[W reducer.cpp:...] Warning:", Python's *Warning), NCCL INFO (a plugin it did not find,
# a tuner it fell back from), and a rank's progress output.
NOT_AN_ERROR = re.compile(r"^\s*\[W[\s\d]|\b[Ww]arning:|\w+Warning\b|\bNCCL INFO\b|"
                          # c10's warning mark behind a prefix a job runner adds to each
                          # stderr line ("<time> Error From <host>: [W socket.cpp:436]
                          # [c10d] ...", "[rank0]:[W1124 18:48:28.692138057 socket.cpp:494]"):
                          # c10/util/Logging.cpp's severity W, file and line
                          r"\[W(?:\d{4} [\d:.]+)? +[\w/.-]+\.(?:cpp|cc|h|hpp|cu):\d+\]|"
                          r"^\s*warnings\.warn|"
                          # torchrun's bookkeeping after a worker wrote its error.json
                          # (elastic/multiprocessing/errors/error_handler.py
                          # dump_error_file, logger.error when the agent has no error file
                          # of its own): never a failure (runs/netns-socket-ifname-lo)
                          r"no error file defined for parent, to copy child error file|"
                          # the title of torchrun's failure summary, "{entrypoint} FAILED"
                          # (errors/__init__.py ChildFailedError.format_msg): its Failures and
                          # Root Cause blocks that follow say which rank failed and how
                          # (runs/netns-own-hostname-not-in-hosts); pytest's "a.py::t FAILED"
                          # has "::"
                          r"^\s*[^\s:]+ FAILED\s*$|"
                          # CPython's chain separators (Lib/traceback.py _cause_message,
                          # _context_message) join two tracebacks, each with its own
                          # exception line (runs-torch1.13/shm-too-small's error.json)
                          r"^\s*(?:The above exception was the direct cause of the following "
                          r"exception:|During handling of the above exception, another "
                          r"exception occurred:)\s*$")
# Lines that report but do not fail: a glog/torch warning ("[W socket.cpp:...]", "W0325
# 20:57:27"), a Python warning or a line logged at WARNING (failurewords.LOGGED_WARNING), NCCL
# INFO. A pattern that hits only such lines is a hint.
WARNING_LINE = re.compile(NOT_AN_ERROR.pattern + "|" + failurewords.LOGGED_WARNING.pattern)
QUOTED_ERRORS = 3
# What to do when the log shows no failure but the job did not finish (it hung): a log that
# stops in mid-run says nothing of where, so turn on what does (docs/explain.md, "Flight
# Recorder dumps"): torch's Flight Recorder (TORCH_FR_BUFFER_SIZE; before torch 2.7
# TORCH_NCCL_TRACE_BUFFER_SIZE) dumped by the NCCL watchdog on timeout, NCCL's own log, and
# the stack of each stuck rank.
HANG_FIX = ("rerun with NCCL_DEBUG=INFO, TORCH_FR_BUFFER_SIZE=2000 (older torch: "
            "TORCH_NCCL_TRACE_BUFFER_SIZE=2000), TORCH_NCCL_DUMP_ON_TIMEOUT=1 and "
            "TORCH_FR_DUMP_TEMP_FILE=/shared/fr/trace_ (then ddpcheck explain /shared/fr/ "
            "with the logs); while it hangs, py-spy dump --pid PID on each rank shows where "
            "it waits")
HANG_NEXT = "ddpcheck explain on the Flight Recorder dumps and every rank's log together"
MAX_EVIDENCE = 4
# Signals a rank receives *because* of another failure: the agent's teardown, the watchdog.
ECHO_SIGNALS = ("SIGTERM", "SIGABRT")


@dataclass
class Explanation:
    """What explain found: problems (causes first) with what to run next, and the verdict."""

    found: list[Explained]
    sources: list[str]
    notes: list[str] = field(default_factory=list)  # what the dumps say of every rank
    first_errors: list[str] = field(default_factory=list)  # "file:line: text", first first

    @property
    def problems(self) -> list[Problem]:
        return [e.problem for e in self.found]

    @property
    def undetermined(self) -> bool:
        """True when the log shows a failure but not its root cause (explain abstains)."""
        causes = [e for e in self.found if not e.problem.consequence_of]
        return bool(causes) and not causes[0].pinned and (
            causes[0].problem.code in UNDETERMINED or causes[0].grade == SYMPTOM)

    @property
    def exit_code(self) -> int:
        """1 when a failure is explained (or unexplained), 0 when the log shows none."""
        return 1 if self.found else 0

    def verdict(self) -> str:
        causes = [e.problem for e in self.found if not e.problem.consequence_of]
        if not causes:
            return ("NO FAILURE FOUND: no error line in " + ", ".join(self.sources)
                    + ". If the job in fact hung or stopped without finishing, its log "
                    "cannot say where: " + HANG_FIX)
        first = causes[0]
        echoes = len(self.found) - len(causes)
        more = f" (+{echoes} consequence{'s' if echoes != 1 else ''})" if echoes else ""
        if first.code == codes.UNEXPLAINED.code:
            return "UNEXPLAINED: the log shows a failure ddpcheck does not recognise"
        if first.code == codes.ROOT_CAUSE_AMBIGUOUS.code:
            quoted = "".join(f"\n  {q}" for q in self.first_errors)
            return (f"ROOT CAUSE UNDETERMINED: {first.observed}: {first.cause}. "
                    "First error lines:" + (quoted or " (none)"))
        if self.undetermined:
            quoted = "".join(f"\n  {q}" for q in self.first_errors)
            return (f"ROOT CAUSE UNDETERMINED: the log shows {first.code}{_where(first)}{more}, "
                    "a symptom that several causes print alike; it cannot tell which. "
                    "First error lines:" + (quoted or " (none)"))
        return f"EXPLAINED: {len(causes)} cause{'s' if len(causes) != 1 else ''}{more}; " \
               f"first: {first.code}{_where(first)}"

    def render_text(self) -> str:
        parts = []
        lead = self.problems[0].code if self.found else ""
        if lead == codes.ROOT_CAUSE_AMBIGUOUS.code:
            parts.append("candidate causes (the log does not show which came first):")
        elif self.undetermined and lead != codes.UNEXPLAINED.code:
            parts.append("what the log shows (a symptom, not its root cause):")
        for e in self.found:
            if e.problem.consequence_of:
                continue
            block = render_problem(e.problem, {}) + f"\n  next      {e.next_run}"
            if e.evidence:
                block += f"\n  from      {', '.join(e.evidence)}"
            parts.append(block)
        if any(e.problem.consequence_of for e in self.found):
            parts.append("consequences (what the other ranks saw; fix the cause above):\n"
                         + "\n".join(f"  {e.problem.code}{_where(e.problem)}: {e.problem.observed}"
                                     + (f" [{e.evidence[0]}]" if e.evidence else "")
                                     for e in self.found if e.problem.consequence_of))
        parts.extend(self.notes)
        parts.append(self.verdict())
        return "\n\n".join(parts) + "\n"

    def outcome(self) -> str:
        """The verdict as a stable word for scripts: ``no-failure`` (exit 0), ``explained``
        (a root cause named) or ``undetermined`` (symptoms or candidates only)."""
        if not self.found:
            return "no-failure"
        return "undetermined" if self.undetermined else "explained"

    def to_json(self) -> dict[str, Any]:
        outcome = self.outcome()
        return {"outcome": outcome, "explained": outcome == "explained",
                "root_cause_determined": outcome == "explained",
                "exit_code": self.exit_code, "verdict": self.verdict(), "sources": self.sources,
                "problems": [e.problem.to_dict() for e in self.found],
                "next": {e.problem.code: e.next_run for e in self.found},
                "evidence": {e.problem.code: list(e.evidence) for e in self.found},
                "notes": self.notes}


def _where(p: Problem) -> str:
    from ddpcheck.ranges import format_ranks

    bits = [f"rank {format_ranks(p.ranks)}"] if p.ranks else []
    bits += [f"host {', '.join(p.hosts)}"] if p.hosts else []
    return f" on {'; '.join(bits)}" if bits else ""


def explain_inputs(inputs: Inputs) -> Explanation:
    """Explain logs and Flight Recorder dumps of one job together."""
    return explain_texts(inputs.logs, inputs.traces)


def explain_texts(named_texts: Iterable[tuple[str, str]],
                  traces: Sequence[RankTrace] = (),
                  patterns: Sequence[Pattern] = PATTERNS) -> Explanation:
    """Explain every input (name, text) together: one job's logs from several nodes.

    ``patterns`` is every family's by default; the robustness checks leave some out to see
    what explain says of a cause it has no rule for (it must abstain, not guess)."""
    try:
        return _explain(named_texts, traces, patterns)
    finally:
        prefilter.forget()  # the log's search index, kept only while its rules read it


def _explain(named_texts: Iterable[tuple[str, str]], traces: Sequence[RankTrace],
             patterns: Sequence[Pattern]) -> Explanation:
    _load_catalogue()
    records: list[Record] = []
    found: list[Explained] = []
    sources = []
    texts: dict[str, str] = {}
    for name, text in named_texts:
        sources.append(name)
        texts[name] = text
        own = _own_json(text)
        if own is not None:
            found.extend(Explained(p, Record(name, i, p.observed), not p.consequence_of,
                                   "ddpcheck run") for i, p in enumerate(own))
        else:
            records.extend(read_text(name, text))
    records = globalranks.apply(records, texts)
    sources.extend(t.source for t in traces)
    restarts = attempts.split(records, texts)
    if restarts is None:
        final, notes, quoted = _diagnose(records, found, traces, patterns)
    else:  # torchrun --max-restarts: the first failed attempt, the later ones its echoes
        final, notes, quoted = _diagnose(restarts.first, found, traces, patterns)
        final = attempts.combine(final, [(k, _diagnose(part, [], (), patterns)[0])
                                         for k, part in restarts.later],
                                 restarts.first_number)
    if final and (local := globalranks.local_note(records, texts)):
        notes = [*notes, local]
    return Explanation([replace(e, next_run=codes.NEXT_RUN.get(e.problem.code, e.next_run))
                        for e in final], sources, notes, quoted)


def _diagnose(records: list[Record], found: list[Explained], traces: Sequence[RankTrace],
              patterns: Sequence[Pattern]) -> tuple[list[Explained], list[str], list[str]]:
    """The problems of one job's (or one attempt's) records, ordered; notes; first errors."""
    found = list(found)
    found.extend(firstfailure.refine(ibfallback.refine(netcontext.refine(
        watchdog.refine(slurm.srun_hint_moot(_match(records, patterns), records), records),
        records), records), records))
    found = windows.windows_nccl(found, records)
    notes: list[str] = []
    if traces:
        found.extend(_flight_recorder(traces))
        notes.append(_stuck_note(traces))
    errors = failures.failure_records(records, NOT_AN_ERROR)
    if not found and errors:
        found.append(_unexplained(errors, records))
    elif not found and (stalled := failures.stalled_at_start(records)):
        found.append(_stalled(stalled))
    elif not found and (forming := formation.stopped_forming(records)):
        found.append(forming)
    found = slurm.refine(found, records)
    if not found and not errors and (unfinished := formation.nccl_unfinished(records)):
        notes.append(unfinished)  # no failure shown, but where a hang would have stopped
    # The first failure lines: error words, and the first line of each problem found.
    firsts = sorted({(r.order, r.source, r.lineno): r for r in
                     [*errors[:QUOTED_ERRORS], *(e.first for e in found)]}.items())
    quoted = [f"{r.source}:{r.lineno}: {r.text.strip()[:200]}"
              for _, r in firsts[:QUOTED_ERRORS]]
    crashes = tracebacks.unclaimed(records, patterns)
    unread = [_unread(r) for r in failures.unread(errors, patterns)]
    frames = tracebacks.user_frames(records)
    ordered = order(found, [_unclaimed(c, tracebacks.framed(c, frames)) for c in crashes],
                    first_failed_rank(records), unread)
    ordered = ordered if errors else condition_alone(ordered)  # a warning, and no failure line
    # the rank the launcher saw fail first decides what the words leave undetermined
    return firstfailure.first_failure(ordered, found, records, crashes), notes, quoted


def _flight_recorder(traces: Sequence[RankTrace]) -> list[Explained]:
    return [Explained(f.problem, Record(f.source, f.seq, f.problem.observed), True, FR_NEXT,
                      (f"{f.source} (collective #{f.seq})",)) for f in analyse(traces)]


def _stuck_note(traces: Sequence[RankTrace]) -> str:
    ranks = stuck_in(traces)
    return "flight recorder (the last collective of each rank that dumped):\n" + "\n".join(
        f"  rank {r}: {what}" for r, what in ranks.items())


def _match(records: list[Record], patterns: Sequence[Pattern]) -> list[Explained]:
    groups: dict[tuple[str, str], list[Hit]] = {}
    # only the patterns whose required strings the line contains (prefilter: exact, fast)
    maybe = prefilter.candidates([r.text for r in records], [p.regex for p in patterns])
    for rec, indices in zip(records, maybe):
        for i in indices:
            pat = patterns[i]
            m = pat.regex.search(rec.text)
            if m:
                key = m[pat.group_by] if pat.group_by else ""
                groups.setdefault((pat.code, key), []).append(Hit(pat, rec, m))
                break
    out = []
    for hits in groups.values():
        lead = min(hits, key=lambda h: GRADE_ORDER.index(_grade(h)))
        pat = lead.pattern
        problem = (pat.combine or default_combine)(hits)
        if problem is None:  # the pattern's own check found no failure in these lines
            continue
        root = pat.root and not (problem.code == RANK_KILLED.code
                                 and any(s in problem.cause[:8] for s in ECHO_SIGNALS))
        first = min((h.record for h in hits), key=lambda r: r.order)
        out.append(Explained(problem, first, root, pat.next_run, _evidence(hits),
                             _grade(lead)))
    return out


# Several patterns of one code can hit one log: a hint's wording (no errno, a bare signal)
# and the cause's own words. The strongest line leads the problem, whichever came first:
# a hint before the cause-grade line no longer makes the whole problem a hint.
GRADE_ORDER = (CAUSE, HINT, WARNING, SYMPTOM)


def _grade(hit: Hit) -> str:
    """The hit's pattern's grade; a cause or hint on a warning or INFO line is a warning."""
    grade = hit.pattern.grade
    if grade != SYMPTOM and WARNING_LINE.search(hit.record.text):
        return WARNING
    return grade


def _unclaimed(crash: tracebacks.Crash, told: tracebacks.Crash) -> Explained:
    """An exception no pattern explains, as a candidate a hint must not hide (placed where
    ``crash`` was printed, quoted as ``told``, the same exception with the user's frame)."""
    r = crash.record
    problem = codes.UNEXPLAINED.problem(
        f"an exception no rule explains: {told.exception[:200]}"
        + (f" (user code: {told.user_frame})" if told.user_frame else ""),
        ranks=(r.rank,) if r.rank is not None else (), hosts=(r.host,) if r.host else ())
    return Explained(problem, r, True, codes.UNEXPLAINED.fix, (f"{r.source}:{r.lineno}",), HINT)


def _unread(r: Record) -> Explained:
    """A failure line no pattern reads, as a candidate a hint must not hide."""
    problem = codes.UNEXPLAINED.problem(
        f"a failure line no rule reads: {r.text.strip()[:200]}",
        ranks=(r.rank,) if r.rank is not None else (), hosts=(r.host,) if r.host else ())
    return Explained(problem, r, True, codes.UNEXPLAINED.fix, (f"{r.source}:{r.lineno}",), HINT)


def _evidence(hits: Sequence[Hit]) -> tuple[str, ...]:
    """file:line of the matched lines, earliest first (a few, then how many more)."""
    recs = sorted({(h.record.order, h.record.source, h.record.lineno) for h in hits})
    shown = tuple(f"{src}:{line}" for _, src, line in recs[:MAX_EVIDENCE])
    more = len(recs) - MAX_EVIDENCE
    return shown + ((f"+{more} more",) if more > 0 else ())


def _unexplained(errors: list[Record], records: list[Record]) -> Explained:
    quoted = " | ".join(r.text.strip()[:200] for r in errors[:QUOTED_ERRORS])
    if crash := tracebacks.summary(records):
        quoted += f"; first exception: {crash}"
    elif cut := tracebacks.cut_short(records):  # the paste stops before the exception line
        quoted += f"; a traceback ends without its error line, in {cut}" + (
            f" ({why})" if (why := device.cut_at(cut)) else "")
    where = {"ranks": sorted({r.rank for r in errors if r.rank is not None}),
             "hosts": sorted({r.host for r in errors if r.host})}
    return Explained(codes.UNEXPLAINED.problem(f"first error lines: {quoted}", **where),
                     errors[0], True, codes.UNEXPLAINED.fix,
                     tuple(f"{r.source}:{r.lineno}" for r in errors[:QUOTED_ERRORS]))


def _stalled(last: Record) -> Explained:
    """A log whose output ends at a progress bar still at 0: the job stopped at step 0."""
    problem = codes.UNEXPLAINED.problem(
        f"the log ends at a progress bar still at 0, with no error line: "
        f"{last.text.split(chr(13))[-1].strip()[:200]}",
        cause="the job stopped (hung, or was killed) before its first step finished, and "
              "printed nothing about why",
        fix=HANG_FIX)
    return Explained(problem, last, True, HANG_NEXT, (f"{last.source}:{last.lineno}",))


def _own_json(text: str) -> list[Problem] | None:
    """A ddpcheck run (or explain) JSON report: its problems, as they are."""
    if not text.lstrip().startswith("{"):
        return None
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return None
    if isinstance(data, dict) and isinstance(data.get("problems"), list):
        return [Problem.from_dict(p) for p in data["problems"] if isinstance(p, dict)]
    return None


def _load_catalogue() -> None:
    """Import every module that registers codes, so any report's code is known."""
    load_catalogue()
