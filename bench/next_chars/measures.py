"""bench.next_chars' pure measures of a run: when its values settle and certify, how wide its
intervals are, how a disagreement with genlm-bytes is told, and how a table cell shows a character."""

from __future__ import annotations

from collections.abc import Sequence

from bench.next_chars.runs import TOP, Run
from marginal_core.lattice.readable import show_piece
from marginal_core.search.next.results import END, NextChar, NextCharacters

# (kind, prompt): the lesson's kinds, then sentences of bench/compare_sentences.txt cut mid-word
# or after a space

def shown(prompt: str) -> str:
    """A prompt in a table cell: quoted, its whitespace visible (␣, ↵), pipes escaped."""
    return "`" + show_piece(prompt).replace("|", "\\|").replace("`", "'") + "`"


def char_cell(b: bytes) -> str:
    """A next character (its bytes) in a table cell; bytes that are no whole character as hex (``e5…``)."""
    if not b:
        return END
    try:
        text = b.decode("utf-8")
    except UnicodeDecodeError:
        return "`" + b.hex() + "…`"
    return "`" + show_piece(text).replace("|", "\\|").replace("`", "'") + "`"


def by_first_byte(found: NextCharacters) -> dict[int, tuple[float, float, float]]:
    """The rows' (point, lower, upper) summed by first byte (256: no byte); a first byte that
    several listed characters share sums their bounds (its lower bound; an upper bound only
    where every character it begins is listed)."""
    out: dict[int, tuple[float, float, float]] = {}
    for r in found.rows:
        key = r.bytes[0] if r.bytes else 256
        p, lo, up = out.get(key, (0.0, 0.0, 0.0))
        out[key] = (p + r.probability, lo + r.lower, min(1.0, up + r.upper))
    return out


def top_bytes(found: NextCharacters, k: int = TOP) -> list[int]:
    """The first bytes of the k most probable rows, in order, each once."""
    return list(dict.fromkeys(r.bytes[0] if r.bytes else 256 for r in found.rows))[:k]


def settled_at(results: Sequence[NextCharacters], tol: float) -> float | None:
    """The seconds of the first result whose values for the last result's top first bytes are
    within tol of the last's (a byte missing from a result counts as 0 there)."""
    last = by_first_byte(results[-1])
    keys = top_bytes(results[-1])
    for r in results:
        values = by_first_byte(r)
        if all(abs(values.get(b, (0.0,))[0] - last[b][0]) <= tol for b in keys):
            return r.seconds
    return None


def whole_settled_at(results: Sequence[NextCharacters], tol: float, k: int = TOP) -> float | None:
    """The seconds of the first result whose rows hold the last result's k most probable whole
    characters (issue 65's speed target), each within tol of its last value."""
    last = {r.bytes: r.probability for r in results[-1].rows[:k]}
    for r in results:
        values = {row.bytes: row.probability for row in r.rows}
        if all(b in values and abs(values[b] - p) <= tol for b, p in last.items()):
            return r.seconds
    return None


def widest(found: NextCharacters, k: int = TOP) -> float:
    """The widest certified interval among the k most probable characters."""
    return max((r.upper - r.lower for r in found.rows[:k]), default=1.0)


def certified_at(results: Sequence[NextCharacters], tol: float) -> float | None:
    """The seconds of the first result whose top-5 intervals are all within tol wide."""
    return next((r.seconds for r in results if r.rows and widest(r) <= tol), None)


def width_at(results: Sequence[NextCharacters], seconds: float) -> float | None:
    """The widest top-5 interval of the last result by the given seconds (None: none yet)."""
    before = [r for r in results if r.seconds <= seconds]
    return widest(before[-1]) if before else None


def verdict(ours: tuple[float, float, float], theirs: float, tol: float) -> str:
    """Whether genlm's probability agrees with ours within tol, told by our certificate."""
    point, lower, upper = ours
    if upper - lower > tol:
        return "ours wider than tol"
    if abs(point - theirs) <= tol:
        return "agree"
    if theirs < lower:
        return "DISAGREE: genlm below our lower bound (its beam lost mass that reaches this byte)"
    if theirs > upper:
        return "DISAGREE: genlm above our upper bound (its beam lost mass elsewhere and renormalized)"
    return "DISAGREE: genlm inside our interval"


def fmt(x: float | None, digits: int = 2) -> str:
    return "—" if x is None else f"{x:.{digits}f}"


def whole_character(b: bytes) -> bool:
    """Whether bytes are one whole UTF-8 character (not "end", not a lead byte's range)."""
    try:
        return len(b.decode("utf-8")) == 1
    except UnicodeDecodeError:
        return False


def compared_rows(run: Run, k: int = TOP) -> tuple[list[NextChar], int, int]:
    """Among the run's top k rows: those that are whole characters, how many are "end", and how
    many are neither (a lead byte's range or bytes that are no character: skipped)."""
    rows = run.final.rows[:k]
    whole = [r for r in rows if whole_character(r.bytes)]
    ends = sum(not r.bytes for r in rows)
    return whole, ends, len(rows) - len(whole) - ends


def char_verdict(row: NextChar, theirs: float, tol: float, agree: float) -> str:
    """"yes"/"no" where our interval is within tol wide (agreement within ``agree``), else "open"."""
    if row.upper - row.lower > tol:
        return "open"
    return "yes" if abs(row.probability - theirs) <= agree else "no"


def differs(view_top: bytes, run: Run) -> bool | None:
    """Whether a view's most probable next character is not the marginal's. Where either is only the
    first bytes of a character (the marginal's a lead byte's range; the view's the tokens that stop
    inside a character, which the view groups by the bytes they have), the two agree when the
    other begins with those bytes, and otherwise the answer is undetermined (None): a group of
    characters weighed against one character says nothing about which character is the view's top
    (SmolLM2's byte-level tokens put its views' top on such groups in CJK, Korean and Arabic)."""
    top = run.final.rows[0].bytes if run.final.rows else b""
    for part, whole in ((top, view_top), (view_top, top)):
        if part and not whole_character(part):
            return False if whole.startswith(part) or (whole and part.startswith(whole)) else None
    return view_top != top


def healing_wrong(run: Run) -> bool:
    """Token healing's most probable next character is not the marginal's (where that is
    determined: ``differs``), or its total variation passes 0.1."""
    return differs(run.healed_top, run) is True or run.final.total_variation["healed"] > 0.1
