"""`marginal next`: the most probable next characters after a prompt, over every tokenization and
certified, beside the canonical tokens' view (what ``generate`` samples from) and token
healing's (docs/design.md, "What comes next"); with ``--continue N`` the prompt continued N
characters by each; with ``--candidate`` (or ``--candidates FILE``) each candidate's probability
after the prompt over every tokenization of the two joined, beside lm-eval's score. A table, CSV
(``--csv``) or one JSON object (``--json``). The prompt is kept exactly, trailing whitespace
included (from standard input too); every refusal is one line and exit status 2
(``errors.run_cli``).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from marginal_core.cli.model_commands import add_device_arguments
from marginal_core.cli.surprisal_command import add_time_budget
from marginal_core.cli.text_input import decoded, read_text
from marginal_core.ground.errors import MarginalError
from marginal_core.ground.progress import tqdm_bar
from marginal_core.models import DEFAULT_MODEL
from marginal_core.search.next.candidate_table import check_candidates
from marginal_core.search.next.results import MAX_K, VIEWS
from marginal_core.search.settings import parse_time_budget

if TYPE_CHECKING:
    from marginal_core.search.next.candidate_table import ContinuationScores
    from marginal_core.search.next.results import Continuations, NextCharacters

NextFound = tuple["NextCharacters", "Continuations | None", "ContinuationScores | None"]


def next_command(args: argparse.Namespace) -> NextFound:
    """The next characters (a bar counting the search's rounds; Ctrl-C exits 130), then the
    continuations and the candidates where asked for, all on one prefix state of the prompt."""
    from marginal_core.models import load_model
    from marginal_core.search.prefix import prefix_of

    prompt = read_text(args.prompt, exact=True)
    context = read_text(args.context) if args.context is not None else None
    k, chars = _whole(args.k, "--k", 1, MAX_K), _whole(args.continue_, "--continue", 0, None)
    candidates = _candidates(args.candidate, args.candidates)
    budget = parse_time_budget(args.time_budget)
    p = prefix_of(load_model(args.model, device=args.device, dtype=args.dtype), prompt, context, time_budget=budget)
    bar = None
    try:
        for found in p.next_characters_stream(k):
            bar = tqdm_bar(None, "next", leave=False, unit="steps") if bar is None else bar
            bar.update(1)
            bar.set_postfix_str(f"{found.scored:,} prefixes")
    finally:
        if bar is not None:
            bar.close()
    more = p.continue_text(chars, "sample" if args.sample else "greedy", args.seed) if chars else None
    return found, more, p.score_continuations(candidates) if candidates else None


def _candidates(given: list[str] | None, file: str | None) -> tuple[str, ...]:
    """The candidates of --candidate and of --candidates' file (one a line, whitespace kept, the
    line break dropped), checked before any model loads; none where neither is given."""
    texts = list(given or [])
    if file is not None:
        try:
            data = Path(file).read_bytes()
        except OSError as err:
            raise MarginalError(f"--candidates: cannot read {file}: {err.strerror}") from None
        text = decoded(data, f"--candidates: {file}")
        texts += text[:-1].split("\n") if text.endswith("\n") else text.split("\n")
    return check_candidates(texts) if texts else ()


def _whole(value: int | None, flag: str, low: int, high: int | None) -> int:
    """A whole-number flag within [low, high], else one clear error."""
    if value is None:
        return 0
    if value < low or (high is not None and value > high):
        span = f"from {low} to {high}" if high is not None else f"{low} or more"
        raise MarginalError(f"{flag} takes a whole number {span}, not {value}")
    return value


def show_next(args: argparse.Namespace, result: NextFound) -> str:
    """One JSON object, the characters as CSV, or the readable table."""
    found, more, scores = result
    if args.json:
        out = found.to_json()
        if more is not None:
            out["continuation"] = more.to_json()
        if scores is not None:
            out["candidates"] = scores.to_json()["candidates"]
        return json.dumps(out, ensure_ascii=False)
    if args.csv:
        return found.to_pandas().to_csv(index=False).rstrip("\n")
    return "\n".join([next_summary(found, more), *([] if scores is None else ["", candidates_summary(scores)])])


def candidates_summary(scores: ContinuationScores) -> str:
    """Each candidate's probability by the marginal (with its interval) and by lm-eval's score, their
    ranks, a rank that differs marked, and where lm-eval's split crosses the seam."""
    import math

    from marginal_core.lattice.readable import show_piece

    lines = [f"{'#':>3}  {'candidate':<16}  {'marginal':>9}  {'interval':<22}  {'lm-eval':>9}  rank  lm-eval rank"]
    for i, r in enumerate(scores.rows, 1):
        interval = f"[{math.exp(r.lower):.4g}, {math.exp(r.upper):.4g}]" + ("" if r.certified else " open")
        lm_eval = "-" if r.lm_eval is None else f"{math.exp(r.lm_eval):.4g}"
        other = "-" if r.lm_eval_rank is None else str(r.lm_eval_rank)
        lines.append(f"{i:>3}  {show_piece(r.text):<16}  {r.probability:>9.4g}  {interval:<22}  {lm_eval:>9}  "
                     f"{r.rank:>4}  {other:>4}{'  <- differs' if r.rank_changed else ''}")
        if r.seam:
            lines.append(f"     {r.seam}")
    return "\n".join([*lines, "", scores.sentence(), "marginal: P(candidate | prompt) over every tokenization of "
                       "the two joined; lm-eval: its hf model's score of the pair (the context's trailing whitespace "
                       "moved to the candidate, the joined text cut at the context's token count)."])


def next_summary(found: NextCharacters, more: Continuations | None) -> str:
    """The prompt's canonical tokens with the boundary marked, the characters' three views, the
    sentence on how far they are apart, and the continuations."""
    from marginal_core.lattice.readable import show_piece

    tokens = [show_piece(t.decode("utf-8", errors="backslashreplace")) for t in found.tokens]  # a byte piece as \xe6
    marked = "|".join(tokens[:-1] + [f"[{tokens[-1]}]"]) if tokens else "(none)"
    state = ("every row certified" if found.done else "stopped" if found.cancelled
             else f"ended: {found.ended.meaning if found.ended else 'under way'}")
    lines = [f"{found.model}, {'no context' if not found.context else f'context {found.context!r}'}; prompt "
             f"{found.prompt!r}", f"canonical tokens: {marked}  ([...]: the last token, the boundary the canonical "
             f"view conditions on)", f"search: {found.rounds} rounds, {found.scored:,} prefixes, "
             f"{found.seconds:.2f} s, {state} (tolerance {found.tolerance})", "",
             f"{'#':>3}  {'next':<6}  {'marginal':>8}  {'interval':<26}  {'canonical':>9}  {'healed':>7}"]
    for i, r in enumerate(found.rows + found.rest, 1):
        number = f"{i:>3}" if i <= len(found.rows) else "  +"
        lines.append(f"{number}  {r.shown:<6}  {r.probability:>8.4f}  {r.interval:<26}  "
                     f"{r.canonical:>9.4f}  {r.healed:>7.4f}")
    lines += ["", found.sentence(), found.standing(), "marginal: over every tokenization of the prompt and every "
              "token that covers its end; canonical: the next token after the canonical tokens (what generate "
              "samples from), by its first character; healed: the last canonical token backed off, the next token "
              "constrained to begin with its bytes. 'end': end of string, special tokens, byte pieces; '+ rest "
              "of': the characters of a range the search did not tell apart before it ended."]
    if more is not None:
        lines += ["", f"continued ({more.how}{'' if more.seed is None else f', seed {more.seed}'}):"]
        lines += [f"  {view:<9} {show_piece(getattr(more, view).text)}{'  (end)' if getattr(more, view).ended else ''}"
                  for view in VIEWS]
    return "\n".join(lines)


def add_next_command(subparsers: Any) -> None:
    """Add `next` to a `marginal` subparsers object."""
    p = subparsers.add_parser(
        "next", help="what comes next after a prompt: the next characters over every tokenization",
        description="The most probable next characters after the prompt, summed over every tokenization of it "
                    "and every token that covers its end, with the interval the search certifies, beside the "
                    "canonical tokens' next-token distribution (what generate samples from) and token healing's, "
                    "both by first character. A trailing space or newline is part of the prompt.")
    p.add_argument("prompt", help="the prompt, or - to read it from standard input exactly (trailing newline kept)")
    p.add_argument("--model", default=DEFAULT_MODEL, help=f"embedded name, HF id or folder (default: {DEFAULT_MODEL})")
    p.add_argument("--context", help="text the prompt is conditioned on, or - (default: none)")
    p.add_argument("--k", type=int, default=10, help=f"how many characters, 1 to {MAX_K} (default: 10)")
    p.add_argument("--continue", dest="continue_", type=int, metavar="N",
                   help="continue the prompt N characters by each view (default: none)")
    p.add_argument("--sample", action="store_true", help="continue by sampling (default: greedy)")
    p.add_argument("--seed", type=int, help="the sampling's seed")
    p.add_argument("--candidate", action="append", metavar="TEXT",
                   help="a continuation to score after the prompt, kept exactly (repeat for several)")
    p.add_argument("--candidates", metavar="FILE",
                   help="a UTF-8 file of continuations to score, one a line, whitespace kept")
    add_time_budget(p, when="each search (the next characters, then the continuation): ")
    shape = p.add_mutually_exclusive_group()
    shape.add_argument("--json", action="store_true", help="print one JSON object")
    shape.add_argument("--csv", action="store_true", help="print the characters as CSV")
    add_device_arguments(p)
    p.set_defaults(run=next_command, show=show_next)
