"""`marginal surprisal`: a text's marginal surprisal by region beside the canonical tokenization's
two rows, naive and canonical prefix, with the next character's entropy at each region's start
(and with ``--next K`` the K most probable next characters there) (docs/design.md, "Surprisal:
where in the text"), as a table, CSV (``--csv``) or one JSON object (``--json``, always in nats).
The choices and the text are checked before the model loads, so a mistyped unit costs no load;
every refusal is one line and exit status 2 (``errors.run_cli``).
"""

from __future__ import annotations

import argparse
import json
import math
from typing import TYPE_CHECKING, Any

from marginal_core.cli.model_commands import add_device_arguments
from marginal_core.cli.text_input import read_text
from marginal_core.ground.progress import tqdm_bar
from marginal_core.models import DEFAULT_MODEL
from marginal_core.search.clock import AUTO_CAP_S, CERTIFY_FLOOR_S, CERTIFY_SHARE
from marginal_core.search.settings import AUTO, DEFAULT_TOLERANCE, parse_time_budget
from marginal_core.search.surprisal.result import SPACES, SURPRISAL_METHODS, UNITS, check_choice, region_spans

if TYPE_CHECKING:
    from marginal_core.search.surprisal.result import Surprisal


def surprisal_command(args: argparse.Namespace) -> Surprisal:
    """The text's surprisal by region under the model, a bar counting the search's rounds (Ctrl-C
    ends it as it ends estimate: exit 130)."""
    from marginal_core.estimators.marginalizer import Marginalizer
    from marginal_core.models import load_model
    from marginal_core.search.surprisal.stream import surprisal_stream

    text = read_text(args.text)
    context = read_text(args.context) if args.context is not None else None
    region_spans(text, args.unit, args.space)  # the unit, the space rule and the text, checked before the model loads
    check_choice(args.method, SURPRISAL_METHODS, "surprisal method")
    tolerance = _tolerance(args.tolerance)
    budget = parse_time_budget(args.time_budget)
    _count(args.next)
    marginalizer = Marginalizer(load_model(args.model, device=args.device, dtype=args.dtype), text, context)
    bar = None  # drawn from the first round on: a refusal before any work prints its one line alone
    try:
        for s in surprisal_stream(marginalizer, args.unit, args.space, args.method, tolerance=tolerance,
                                  time_budget=budget):
            bar = tqdm_bar(None, "surprisal", leave=False, unit="rounds") if bar is None else bar
            bar.update(1)
            bar.set_postfix_str(f"{s.progress}, widest interval {s.widest:.2g} nats, {s.scored:,} prefixes")
        return s
    finally:
        if bar is not None:
            bar.close()


def _tolerance(value: str | None) -> float:
    """The --tolerance in nats: a positive number, else one clear error."""
    from marginal_core.ground.errors import MarginalError

    try:
        tolerance = DEFAULT_TOLERANCE if value is None else float(value)
    except ValueError:
        tolerance = math.nan
    if not tolerance > 0:
        raise MarginalError(f"the tolerance is a positive number of nats, not {value!r}")
    return tolerance


def show(args: argparse.Namespace, s: Surprisal) -> str:
    """What the command prints: one JSON object, the regions as CSV, or the readable summary."""
    next = _count(args.next)
    if args.json:
        return json.dumps(s.as_dict(next=next), ensure_ascii=False)
    if args.csv:
        return s.to_pandas(bits=args.bits, next=next).to_csv(index=False).rstrip("\n")
    return summary(s, args.bits, next)


def summary(s: Surprisal, bits: bool = False, next: int = 0) -> str:
    """The regions with their marginal surprisal, its interval, the canonical prefix and naive
    canonical rows, the entropy and rank at their start (and the ``next`` most probable next
    characters), then the totals and the sentences on what the rows' differences are."""
    from marginal_core.lattice.readable import show_piece
    from marginal_core.viz.surprisal import difference_sentence

    scale, unit = (1 / math.log(2), "bits") if bits else (1.0, "nats")
    context = "no context" if not s.context else f"context {s.context!r}"
    how = f"{s.rounds} rounds, {s.scored:,} prefixes" if s.method == "search" else "every prefix"
    regions = s.regions
    shown = [show_piece(r.text) for r in regions]
    wide = max(8, *map(len, shown))
    lines = [f"{s.model} on {s.device} in {s.dtype}, {context}; {s.unit} regions (space {s.space}), "
             f"method {s.method} ({how}); surprisal and entropy in {unit}", "",
             f"{'#':>4}  {'bytes':>9}  {'region':<{wide}}  {'marginal':>9}  {'interval':>19}  {'canon.pre':>9}  "
             f"{'naive':>9}  {'entropy':>7}  {'rank':>4}" + ("  next" if next else "")]
    for r, piece in zip(regions, shown, strict=True):
        interval = "exact" if r.exact else f"[{r.lower * scale:.3f}, {r.upper * scale:.3f}]"
        expected = "  " + "  ".join(f"{show_piece(c.label)} {c.probability:.2f}"
                                    for c in s.expected_bytes(r.start_byte, next)) if next else ""
        lines.append(f"{r.index:>4}  {f'{r.start_byte}-{r.end_byte}':>9}  {piece:<{wide}}  "
                     f"{r.surprisal * scale:>9.3f}  {interval:>19}  {r.surprisal_canonical_prefix * scale:>9.3f}  "
                     f"{r.surprisal_canonical * scale:>9.3f}  {r.entropy * scale:>7.3f}  {r.rank:>4}{expected}")
    canonical = -float(s.canonical_log_p.sum())
    lines += ["", "canon.pre: the canonical tokenization's prefix probability cut at the regions (Pimentel & "
                  "Meister's word probability); naive: each canonical token's surprisal in the region of its first "
                  "byte that is not whitespace, as token tools give it. naive - canon.pre is the whitespace "
                  "convention; canon.pre - marginal is what the other tokenizations add. entropy and rank: the "
                  "next character at the region's first byte, and where the one that came ranked.",
              "", f"sum of regions, -log P(text as a prefix): {s.total * scale:.3f} {unit}",
              f"sum of the canonical prefix row, -log P(text as a prefix) along the canonical tokenization: "
              f"{-float(s.canonical_prefix[-1]) * scale:.3f} {unit}" if s.canonical_prefix is not None else "",
              f"sum of the naive row, -log p(canonical): {canonical * scale:.3f} {unit}",
              f"log p(text): {_signed(s.log_p_text * scale)} {unit}",
              f"bits per byte: {s.bits_per_byte:.3f}" if math.isfinite(s.bits_per_byte) else "bits per byte: -",
              "", difference_sentence(s)]
    if not s.exact:
        lines.append("A region's interval is what the search certifies; 'exact': the search left nothing unscored "
                     "before it.")
    if s.method == "search":
        lines += ["", f"{s.progress} within {s.tolerance:g} nats; ended: {s.ended_reason} ({s.seconds:.1f} s)"]
        if s.open_regions:
            lines.append("left open: " + ", ".join(f"{show_piece(r.text)} [{r.lower * scale:.3f}, {r.upper * scale:.3f}]"
                                                   for r in s.open_regions))
    return "\n".join(lines)


def add_time_budget(p: argparse.ArgumentParser, default: str = AUTO, when: str = "") -> None:
    """--time-budget on a command whose search runs in rounds (surprisal, scan --surprisal; ``when``
    says when it applies)."""
    p.add_argument("--time-budget", default=default, metavar="SECONDS",
                   help=f"{when}the search ends after this many seconds, keeping what it found; 'auto': once the values "
                        f"settled the certificate gets {CERTIFY_SHARE:g} times their seconds (at least "
                        f"{CERTIFY_FLOOR_S:g} s, {AUTO_CAP_S:g} s in all at most); 'none': until every region is "
                        f"within the tolerance (default: {default})")


def _count(value: str | None) -> int:
    """--next's K: a whole number from 0 to 256 (none: 0), else one clear error."""
    from marginal_core.ground.errors import MarginalError

    if value is None:
        return 0
    if not value.isdigit() or int(value) > 256:
        raise MarginalError(f"--next takes a whole number of characters from 0 to 256, not {value!r}")
    return int(value)


def _signed(value: float) -> str:
    return f"{value:.3f}" if math.isfinite(value) else "-inf"


def add_command(subparsers: Any) -> None:
    """Add `surprisal` to a `marginal` subparsers object."""
    p = subparsers.add_parser(
        "surprisal", help="where in the text: marginal surprisal by byte, character or word beside the canonical",
        description="The surprisal of each region of the text, -log P(the string begins with the region and what "
                    "precedes it) + log P(it begins with what precedes it), summed over every tokenization, beside "
                    "the canonical tokenization's two rows: its prefix probability cut at the same regions, and the "
                    "naive row (each token's surprisal in the region of its first byte that is not whitespace). "
                    "The regions sum to -log P(text as a prefix).")
    p.add_argument("text", help="the text, or - to read it from standard input")
    p.add_argument("--model", default=DEFAULT_MODEL, help=f"embedded name, HF id or folder (default: {DEFAULT_MODEL})")
    p.add_argument("--context", help="text the tokenizations are conditioned on, or - (default: none)")
    p.add_argument("--unit", default="word", help=f"the regions: {', '.join(UNITS)} (default: word)")
    p.add_argument("--space", default="trailing",
                   help=f"{', '.join(SPACES)}: the whitespace after a word in its region, or in the next word's "
                        "(default: trailing)")
    p.add_argument("--method", default="search",
                   help="search: rounds of batched passes over the heaviest prefixes until every region's interval "
                        "is within the tolerance; exact: every prefix, for short texts (default: search)")
    p.add_argument("--tolerance", help=f"the search's target width of every region's interval, in nats "
                                       f"(default: {DEFAULT_TOLERANCE})")
    add_time_budget(p)
    p.add_argument("--bits", action="store_true", help="the table and the CSV in bits (JSON stays in nats)")
    p.add_argument("--next", metavar="K",
                   help="the K most probable next characters at each region's first byte, summed over "
                        "tokenizations (a character of several bytes by its first byte) (default: none)")
    shape = p.add_mutually_exclusive_group()
    shape.add_argument("--json", action="store_true", help="print one JSON object")
    shape.add_argument("--csv", action="store_true", help="print the regions as CSV")
    add_device_arguments(p)
    p.set_defaults(run=surprisal_command, show=show)
