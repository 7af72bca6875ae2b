"""Which patterns could match which lines: each regex's required literals, found in C.

Runs wherever ``ddpcheck explain`` runs, inside ``engine._match`` (and wherever else a list
of regexes is tried on every line). Most lines of a long log (training steps, progress bars,
NCCL INFO) match no pattern, yet trying every pattern's ``regex.search`` on every line was
most of explain's time. ``literals`` reads a regex's own parse tree (``re._parser``, the
tree ``re.compile`` builds from) for strings one of which every match must contain: a run
of literal characters, or one string per branch of a required alternation. ``candidates``
then looks each string up in the whole text at once (``str.find``) and hands back, per line,
only the patterns one of whose strings that line contains, in their order.

Exact by construction: a pattern is left out of a line only when the line lacks every one
of its strings. Where the tree does not say for sure (a branch without a literal, an
optional group, a character class, strings shorter than ``MIN_LITERAL``), the pattern is
tried on every line. Case-insensitive parts (``(?i)``, ``re.I``, ``(?i:...)``) are compared
in ``fold``-ed text: lowercased, with the four non-ASCII letters that ``re``'s IGNORECASE
matches to ASCII ones (Kelvin sign, dotted and dotless i, long s) mapped to them.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import accumulate
from typing import Protocol, TypeVar

try:  # re's own parser and the names of its tree's nodes
    from re import _constants as sre  # type: ignore[attr-defined]
    from re import _parser  # type: ignore[attr-defined]
except ImportError:  # Python < 3.11
    import sre_constants as sre  # type: ignore[no-redef]
    import sre_parse as _parser  # type: ignore[no-redef]

ENABLED = True  # False: every pattern on every line (the equivalence checks compare both)
# False: the per-line gates built on these strings (reader, failures, tracebacks) are off and
# every line takes the full path (bench/explain_speed.py compares both, whole output)
GATES = True
MIN_LITERAL = 3  # shorter strings are in most lines: no use as a filter
MAX_STRINGS = 32  # alternatives expanded per set at most
# a string inside one found already is looked for in that one's lines while they are fewer
# than the text's characters / VERIFY_CHARS (one look at a line costs about as much as a
# whole-text search's pass over that many characters)
VERIFY_CHARS = 2000
COVER_MIN_CHARS = 1 << 20  # below a MiB of text, search each string in the whole text
REPEATS = tuple(getattr(sre, n) for n in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT")
                if hasattr(sre, n))  # the possessive one: Python >= 3.11
ATOMIC = getattr(sre, "ATOMIC_GROUP", object())  # (?>...): Python >= 3.11
# Non-ASCII letters that IGNORECASE matches to an ASCII letter (sre's case folding) and that
# str.lower() does not turn into that letter alone.
FOLD_FIXES = str.maketrans({"\u0130": "i", "\u0131": "i", "\u017f": "s", "\u212a": "k"})


@dataclass(frozen=True)
class Literals:
    """Strings one of which every match of a regex contains (``folded`` ones: in the
    ``fold``-ed text)."""

    strings: tuple[str, ...] = ()
    folded: tuple[str, ...] = ()


Piece = tuple[str, bool]  # a string and whether it is compared folded


def fold(text: str) -> str:
    """The text as IGNORECASE sees ASCII letters: lowercased, non-ASCII look-alikes mapped."""
    if not text.isascii() and any(c in text for c in "\u0130\u0131\u017f\u212a"):
        text = text.translate(FOLD_FIXES)
    return text.lower()


@lru_cache(maxsize=4096)
def literals(regex: re.Pattern[str], shortest: int = MIN_LITERAL) -> Literals | None:
    """Strings (each at least ``shortest`` long) one of which every match of ``regex``
    contains; None when unsure."""
    if not isinstance(regex.pattern, str):
        return None
    try:
        tree = _parser.parse(regex.pattern, regex.flags)
    except (re.error, RecursionError):
        return None
    found = _required(list(tree), bool(regex.flags & re.IGNORECASE), max(shortest, 1))
    if not found:
        return None
    return Literals(tuple(sorted(s for s, f in found if not f)),
                    tuple(sorted(s for s, f in found if f)))


def may_match(regex: re.Pattern[str], shortest: int = 2) -> Callable[[str], bool]:
    """A test of one line, False only where ``regex`` cannot match: for a regex tried on
    every line whose strings are too short for the whole-text search but cheap to look up."""
    need = literals(regex, shortest)
    if need is None:
        return lambda text: True
    strings, folded = need.strings, need.folded
    if len(strings) == 1 and not folded:  # one string: its test alone
        one = strings[0]
        return lambda text: one in text
    return lambda text: (any(s in text for s in strings)
                         or bool(folded) and any(s in fold(text) for s in folded))


def branch_literals(regex: re.Pattern[str]) -> Literals | None:
    """``literals`` of a regex that is one alternation of many branches (more than
    ``MAX_STRINGS``): every branch's own strings, however many; None when one has none."""
    try:
        tree = list(_parser.parse(regex.pattern, regex.flags))
    except (re.error, RecursionError):
        return None
    if len(tree) != 1 or tree[0][0] is not sre.BRANCH:
        return literals(regex)
    icase = bool(regex.flags & re.IGNORECASE)
    found: set[Piece] = set()
    for branch in tree[0][1][1]:
        need = _required(list(branch), icase, MIN_LITERAL)
        if need is None:
            return None
        found |= need
    return Literals(tuple(sorted(s for s, f in found if not f)),
                    tuple(sorted(s for s, f in found if f)))


def lines_with(texts: Sequence[str], needs: Sequence[Literals | None]) -> set[int] | None:
    """The indices of the texts that contain a string of one of ``needs``; None (every
    line) when a need is None or the gates are off."""
    if not (ENABLED and GATES) or any(n is None for n in needs):
        return None
    strings = tuple(sorted({s for n in needs for s in n.strings}))  # type: ignore[union-attr]
    folded = tuple(sorted({s for n in needs for s in n.folded}))  # type: ignore[union-attr]
    lines = _lines(texts)
    lines.prefetch([Literals(strings, folded)])
    return lines.containing(Literals(strings, folded))


class HasText(Protocol):
    """A line: what ``records_for`` needs of a record."""

    @property
    def text(self) -> str: ...


Line = TypeVar("Line", bound=HasText)


def records_for(records: Sequence[Line], regex: re.Pattern[str]) -> Sequence[Line]:
    """The records whose text may match ``regex``, in their order: those that hold one of
    its strings (found in the records' shared search index); all of them when unsure."""
    if literals(regex) is None or not (ENABLED and GATES) or not records:
        return records
    return [records[k] for k in lines_for([r.text for r in records], regex)]


def lines_for(texts: Sequence[str], regex: re.Pattern[str]) -> Sequence[int]:
    """The indices of the texts that may match ``regex``, in order (all when unsure)."""
    need = literals(regex)
    if need is None or not (ENABLED and GATES):
        return range(len(texts))
    return sorted(_lines(texts).containing(need))


_recent: list[_Lines] = []  # the texts searched last, with what was found in them
RECENT = 2  # indexes kept: a log's lines, and a part of them a family reads between


def _lines(texts: Sequence[str]) -> _Lines:
    """The texts' search index: a recent one when the same texts come again (explain's
    engine and its readers search one log's lines, each for its own strings)."""
    texts = texts if isinstance(texts, list) else list(texts)
    if not GATES:
        return _Lines(texts)
    for i, lines in enumerate(_recent):
        if lines.texts == texts:
            _recent.insert(0, _recent.pop(i))
            return lines
    _recent.insert(0, _Lines(texts))
    del _recent[RECENT:]
    return _recent[0]


def forget() -> None:
    """Drop the texts' indexes (explain calls it when done with a log)."""
    _recent.clear()


def _required(items: list, icase: bool, shortest: int) -> frozenset[Piece] | None:
    """The best set of strings one of which a match of this sequence contains."""
    options: list[frozenset[Piece]] = []
    run: frozenset[Piece] | None = frozenset({("", False)})
    for op, av in items:
        exact = _exact(op, av, icase)
        longer = _concat(run, exact) if exact is not None and run is not None else None
        if longer is not None:
            run = longer
            continue
        if run is not None:
            options.append(run)
        run = exact
        if exact is None and (need := _needed(op, av, icase, shortest)) is not None:
            options.append(need)
    if run is not None:
        options.append(run)
    usable = [o for o in options if o and all(len(s) >= shortest for s, _ in o)]
    return max(usable, key=lambda o: (min(len(s) for s, _ in o), -len(o)), default=None)


def _needed(op: object, av: object, icase: bool, shortest: int) -> frozenset[Piece] | None:
    """Strings required by one node that does not match a known small set of strings."""
    if op is sre.SUBPATTERN:
        _, add, remove, body = av  # type: ignore[misc]
        return _required(list(body), _flags(icase, add, remove), shortest)
    if op in REPEATS:
        low, _, body = av  # type: ignore[misc]
        return _required(list(body), icase, shortest) if low >= 1 else None
    if op is ATOMIC:
        return _required(list(av), icase, shortest)  # type: ignore[arg-type]
    if op is sre.BRANCH:
        out: set[Piece] = set()
        for branch in av[1]:  # type: ignore[index]
            need = _required(list(branch), icase, shortest)
            if need is None:
                return None  # a branch without a literal: any line may match
            out |= need
        return frozenset(out) if len(out) <= MAX_STRINGS else None
    return None


def _exact(op: object, av: object, icase: bool) -> frozenset[Piece] | None:
    """Every string one node can match, when that is a small known set; else None."""
    if op is sre.LITERAL:
        return _char(av, icase)  # type: ignore[arg-type]
    if op is sre.AT:  # zero width: the characters around it are adjacent in the text
        return frozenset({("", False)})
    if op is sre.IN:
        out: set[Piece] = set()
        for kind, value in av:  # type: ignore[attr-defined]
            one = _char(value, icase) if kind is sre.LITERAL else None
            if one is None:
                return None  # a range, a category, a negated set
            out |= one
        return frozenset(out)
    if op is sre.SUBPATTERN:
        _, add, remove, body = av  # type: ignore[misc]
        return _exact_seq(list(body), _flags(icase, add, remove))
    if op is sre.BRANCH:
        out = set()
        for branch in av[1]:  # type: ignore[index]
            one = _exact_seq(list(branch), icase)
            if one is None:
                return None
            out |= one
        return frozenset(out) if len(out) <= MAX_STRINGS else None
    return None


def _exact_seq(items: list, icase: bool) -> frozenset[Piece] | None:
    out: frozenset[Piece] | None = frozenset({("", False)})
    for op, av in items:
        one = _exact(op, av, icase)
        if one is None or out is None:
            return None
        out = _concat(out, one)
    return out


def _char(code: int, icase: bool) -> frozenset[Piece] | None:
    c = chr(code)
    if not c.isascii() or c == "\n":  # non-ASCII case folding is re's own business
        return None
    return frozenset({(c.lower(), True)}) if icase and c.lower() != c.upper() else \
        frozenset({(c, False)})


def _concat(left: frozenset[Piece], right: frozenset[Piece]) -> frozenset[Piece] | None:
    if len(left) * len(right) > MAX_STRINGS:
        return None
    return frozenset(_join(a, b) for a in left for b in right)


def _join(a: Piece, b: Piece) -> Piece:
    """One string of two: folded when either part is (a match of the case-sensitive part,
    lowercased, is in the folded text too)."""
    if a[1] == b[1] or not (a[0] and b[0]):
        return a[0] + b[0], (a[1] and bool(a[0])) or (b[1] and bool(b[0]))
    return fold(a[0]) + fold(b[0]), True


def _flags(icase: bool, add: int, remove: int) -> bool:
    return (icase or bool(add & re.IGNORECASE)) and not remove & re.IGNORECASE


def candidates(texts: Sequence[str],
               regexes: Sequence[re.Pattern[str]]) -> list[tuple[int, ...]]:
    """For each text, the indices of the regexes that may match it, in their order."""
    everyone = tuple(range(len(regexes)))
    if not ENABLED or not texts:
        return [everyone] * len(texts)
    needs, always, order = _plan(tuple(regexes))
    out: list[tuple[int, ...]] = [always] * len(texts)
    lines = _lines(texts)
    lines.prefetch_pieces(order)
    extra: dict[int, list[int]] = {}
    for i, need in enumerate(needs):
        if need is None:
            continue
        for k in lines.containing(need):
            extra.setdefault(k, []).append(i)
    for k, more in extra.items():
        out[k] = tuple(sorted({*always, *more})) if always else tuple(more)
    return out


class _Lines:
    """One joined text of every line, searched once per string (and its folded copy)."""

    def __init__(self, texts: Sequence[str]) -> None:
        self.texts = texts
        self.joined = "\n".join(texts)
        self.starts = _starts(texts)
        self.found: dict[Piece, frozenset[int]] = {}
        self._folded: tuple[str, list[int]] | None = None

    def containing(self, need: Literals) -> set[int]:
        """The indices of the lines that contain one of the strings."""
        hit: set[int] = set()
        for piece in _pieces(need):
            if piece not in self.found:
                self.found[piece] = self._find(piece)
            hit |= self.found[piece]
        return hit

    def prefetch(self, needs: Iterable[Literals]) -> None:
        """Find the needs' strings shortest first: a string that holds one found before is
        then looked for only in that one's lines (``_find``)."""
        self.prefetch_pieces(_shortest_first(needs))

    def prefetch_pieces(self, pieces: Iterable[Piece]) -> None:
        """``prefetch`` with the strings already in their order (``_shortest_first``)."""
        for piece in pieces:
            if piece not in self.found:
                self.found[piece] = self._find(piece)

    def _find(self, piece: Piece) -> frozenset[int]:
        """The lines that contain the string: among the few lines of a string found already
        that every line holding this one holds too (``_covers``), else one whole-text search."""
        # (comparing each string with every one found before costs the square of their
        # number, about 0.05 s a log: worth it only where a whole-text search is dear)
        if GATES and len(self.joined) >= COVER_MIN_CHARS:
            few = len(self.joined) // VERIFY_CHARS
            inner = [lines for other, lines in self.found.items()
                     if len(lines) <= few and _covers(other, piece)]
            if inner:
                s, folded = piece
                joined, starts = self.folded() if folded else (self.joined, self.starts)
                last = len(starts) - 1
                return frozenset(k for k in min(inner, key=len) if joined.find(
                    s, starts[k], starts[k + 1] - 1 if k < last else len(joined)) >= 0)
        return self._search(*piece)

    def _search(self, s: str, folded: bool) -> frozenset[int]:
        joined, starts = self.folded() if folded else (self.joined, self.starts)
        out: set[int] = set()
        i = joined.find(s)
        while i >= 0:
            k = bisect_right(starts, i) - 1
            end = starts[k + 1] - 1 if k + 1 < len(starts) else len(joined)
            if i + len(s) <= end:  # inside line k: go on from the next line
                out.add(k)
                i = joined.find(s, end + 1)
            else:
                i = joined.find(s, i + 1)
        return frozenset(out)

    def folded(self) -> tuple[str, list[int]]:
        """The folded text and its line starts (lowercasing may lengthen a line)."""
        if self._folded is None:
            whole = fold(self.joined)
            if len(whole) == len(self.joined):
                self._folded = whole, self.starts
            else:
                parts = [fold(t) for t in self.texts]
                self._folded = "\n".join(parts), _starts(parts)
        return self._folded


def _shortest_first(needs: Iterable[Literals]) -> tuple[Piece, ...]:
    """The needs' strings, each once, shortest first (then in their order)."""
    return tuple(sorted({p for n in needs for p in _pieces(n)}, key=lambda p: (len(p[0]), p)))


@lru_cache(maxsize=64)
def _plan(regexes: tuple[re.Pattern[str], ...]
          ) -> tuple[tuple[Literals | None, ...], tuple[int, ...], tuple[Piece, ...]]:
    """What ``candidates`` derives from the regexes alone, once per set of patterns (explain
    passes the same ones for every log): each one's strings, the indices of those without
    any (looked for on every line), and every string in the order ``prefetch`` finds them."""
    needs = tuple(literals(r) for r in regexes)
    always = tuple(i for i, n in enumerate(needs) if n is None)
    return needs, always, _shortest_first(n for n in needs if n is not None)


@lru_cache(maxsize=8192)
def _pieces(need: Literals) -> tuple[Piece, ...]:
    return (*((s, False) for s in need.strings), *((s, True) for s in need.folded))


def _covers(outer: Piece, inner: Piece) -> bool:
    """Whether every line that holds ``inner`` holds ``outer`` (a part of it; a folded part
    of its folded copy: fold maps character by character)."""
    if outer == inner:
        return False
    if outer[1]:
        return outer[0] in (inner[0] if inner[1] else fold(inner[0]))
    return not inner[1] and outer[0] in inner[0]


def _starts(texts: Iterable[str]) -> list[int]:
    """Where each line begins in the texts joined by one newline each."""
    return list(accumulate((len(t) + 1 for t in texts), initial=0))[:-1]
