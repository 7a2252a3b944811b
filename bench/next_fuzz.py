"""No crash on any text (issue 65): short strings from mixed scripts through the library's
``next_characters``, ``continue_text`` and ``surprisal``, under each model, counting refusals and
crashes; then the issue's four bad inputs.

The strings are bench.support.scripts.fuzz_strings(--n, --seed): CJK, Hangul, Arabic with RLM
marks, Devanagari with combining signs, Thai, Cyrillic, Greek, emoji with ZWJ sequences and skin
tones, combining accents, ASCII, mixed, and strings that end inside a grapheme cluster (after a
ZWJ, before a combining mark, inside an emoji sequence, on a lone regional indicator), 1 to 6
code points each; the same strings under every model. Each string gets
``next_characters(s, lm, k=3, time_budget=--budget)``; one in 10 (--every) also
``continue_text(s, lm, chars=2, time_budget=--budget)`` and ``surprisal(s, lm,
time_budget=--budget)``: every 10th round of the kinds, so that each kind gets them (the strings
take the kinds in turn, and every 10th string would miss the odd kinds). A call that raises
``MarginalError`` with a message is a **refusal** (the distinct messages are listed); any other
exception, or a MarginalError without a message, is a **crash** (the string's repr, the model,
the call and the traceback's last frame and line). Each next_characters result is **checked**:
its rows' probabilities sum to at most 1 + 1e-6, and each row has lower ≤ probability ≤ upper
(within 1e-9); a failure is listed like a crash.

The bad inputs: through the library a lone surrogate "\\ud800", a prompt of combining marks only
"\\u0301\\u0301" and one that ends inside an emoji sequence "👩\\u200d" (each call above), and
invalid UTF-8 through the CLI: ``marginal next - --model M`` reading b"\\xff\\xfe" from
standard input, as a subprocess (its exit status and last line).

Ctrl-C (or SIGTERM) stops it and prints what finished.

Run: .venv/bin/python -m bench.next_fuzz [--n 1000] [--seed 0] [--models gemma3-270m,smollm2-135m]
     [--budget 0.3] [--every 10] [--device cpu] [--dtype float32] [--no-bad-input]
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import time
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.support.scripts import KINDS, fuzz_strings
from marginal_core.api.calls import continue_text, next_characters, surprisal
from marginal_core.ground.errors import MarginalError
from marginal_core.lm.adapter import LM
from marginal_core.models import load_model

SUM_SLACK = 1e-6  # the rows' probabilities may sum to 1 + this
BOUND_SLACK = 1e-9  # lower ≤ probability ≤ upper, within float rounding
BAD_INPUTS = [("a lone surrogate", "\ud800"), ("only combining marks", "\u0301\u0301"),
              ("ends inside an emoji sequence", "👩\u200d")]
INVALID_UTF8 = b"\xff\xfe"


@dataclass
class Failure:
    """A crash (an exception other than a MarginalError with a message) or a result that fails its check."""

    model: str
    call: str
    kind: str
    text: str
    where: str  # the traceback's last frame
    what: str  # the exception's type and message, or the check that failed


@dataclass
class Tally:
    """One model's counts: strings tried, calls made, refusals by message, crashes, failed checks, seconds."""

    model: str
    strings: int = 0
    calls: int = 0
    refusals: Counter = field(default_factory=Counter)
    crashes: list[Failure] = field(default_factory=list)
    failed_checks: list[Failure] = field(default_factory=list)
    seconds: float = 0.0
    slowest: tuple[float, str, str] = (0.0, "", "")  # seconds, call, string
    overruns: Counter = field(default_factory=Counter)  # calls past ``overrun`` seconds, by call
    overrun: float = 10.0  # seconds: a call this long ran far past its time budget (--overrun)
    kinds: Counter = field(default_factory=Counter)


def last_frame(exc: BaseException) -> str:
    """The traceback's last frame (file:line in function), and the last in marginal_core where that
    is outside it (a crash inside transformers says which of our calls reached it)."""
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return "?"

    def shown(f: traceback.FrameSummary) -> str:
        name = f.filename
        for root in ("/marginal_core/", "/site-packages/"):
            name = name.split(root, 1)[-1] if root in name else name
        return f"{'marginal_core/' if '/marginal_core/' in f.filename else ''}{name}:{f.lineno} in {f.name}"

    ours = [f for f in frames if "/marginal_core/" in f.filename]
    if ours and ours[-1] is not frames[-1]:
        return f"{shown(frames[-1])} (from {shown(ours[-1])})"
    return shown(frames[-1])


def check(result: Any) -> str:
    """"" where a next_characters result passes its checks, else what fails."""
    total = sum(r.probability for r in result.rows)
    if total > 1 + SUM_SLACK:
        return f"rows' probabilities sum to {total:.9f} > 1 + {SUM_SLACK}"
    wrong = [r for r in result.rows if not r.lower - BOUND_SLACK <= r.probability <= r.upper + BOUND_SLACK]
    if wrong:
        r = wrong[0]
        return (f"{len(wrong)} row(s) outside their interval, e.g. {r.character!r}: {r.probability!r} not in "
                f"[{r.lower!r}, {r.upper!r}]")
    return ""


def attempt(tally: Tally, call: str, kind: str, text: str, run: Callable[[], Any]) -> tuple[str, Any]:
    """One call: ("ok", result), ("refused", message) or ("crash", Failure), counted in the tally
    (with the slowest call, and the calls past the tally's ``overrun`` seconds)."""
    tally.calls += 1
    started = time.perf_counter()
    try:
        result = run()
    except MarginalError as exc:
        message = str(exc).strip()
        if message:
            tally.refusals[f"{call}: {message}"] += 1
            return "refused", message
        failure = Failure(tally.model, call, kind, text, last_frame(exc), f"{type(exc).__name__} without a message")
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # a crash: anything the library did not raise on purpose
        failure = Failure(tally.model, call, kind, text, last_frame(exc), f"{type(exc).__name__}: {exc}")
    else:
        seconds = time.perf_counter() - started
        if seconds > tally.slowest[0]:
            tally.slowest = (seconds, call, text)
        if seconds > tally.overrun:
            tally.overruns[call] += 1
        if call == "next_characters" and (problem := check(result)):
            tally.failed_checks.append(Failure(tally.model, call, kind, text, "", problem))
            print(f"  CHECK {tally.model} {call} {kind} {text!r}: {problem}", flush=True)
        return "ok", result
    tally.crashes.append(failure)
    print(f"  CRASH {failure.model} {call} {kind} {text!r}: {failure.where}: {failure.what}", flush=True)
    return "crash", failure


def calls(lm: LM, text: str, budget: float, full: bool) -> list[tuple[str, Callable[[], Any]]]:
    """The calls a string gets: next_characters, and where ``full`` continue_text and surprisal."""
    out: list[tuple[str, Callable[[], Any]]] = [
        ("next_characters", lambda: next_characters(text, lm, k=3, time_budget=budget))]
    if full:
        out += [("continue_text", lambda: continue_text(text, lm, chars=2, time_budget=budget)),
                ("surprisal", lambda: surprisal(text, lm, time_budget=budget))]
    return out


def full(i: int, every: int) -> bool:
    """Whether the i-th string gets every call: the strings of every ``every``-th round of the kinds."""
    return (i // len(KINDS)) % every == 0


def fuzz(lm: LM, strings: list[tuple[str, str]], tally: Tally, budget: float, every: int) -> None:
    """Every string through the calls, counted in the tally (a progress line every 100)."""
    started = time.perf_counter()
    try:
        for i, (kind, text) in enumerate(strings):
            for call, run in calls(lm, text, budget, full(i, every)):
                attempt(tally, call, kind, text, run)
            tally.strings += 1
            tally.kinds[kind] += 1
            if tally.strings % 100 == 0:
                print(f"{lm.name}: {tally.strings} strings, {tally.calls} calls, {sum(tally.refusals.values())} "
                      f"refusals, {len(tally.crashes)} crashes, {len(tally.failed_checks)} failed checks", flush=True)
    finally:
        tally.seconds += time.perf_counter() - started


def shown_result(status: str, result: Any) -> str:
    """A bad input's outcome in a line."""
    if status == "refused":
        return f"refused: {result}"
    if status == "crash":
        return f"CRASH: {result.where}: {result.what}"
    if hasattr(result, "rows"):
        rows = ", ".join(f"{r.character!r} {r.probability:.3f} [{r.lower:.3f}, {r.upper:.3f}]" for r in result.rows[:3])
        return f"answer: {rows or 'no rows'}; ended {result.ended or '—'}, done {result.done}"
    if hasattr(result, "marginal"):
        return f"answer: marginal {result.marginal.text!r}, canonical {result.canonical.text!r}, healed {result.healed.text!r}"
    if hasattr(result, "regions"):
        return (f"answer: {len(result.regions)} region(s), log P(text) {result.log_p_text:.3f}, "
                f"ended {result.ended or '—'}")
    return f"answer: {type(result).__name__}"


def bad_inputs(lm: LM, budget: float) -> list[str]:
    """The three bad inputs through the library (every call), as table rows (counted apart from the strings)."""
    lines, tally = [], Tally(lm.name)
    for what, text in BAD_INPUTS:
        for call, run in calls(lm, text, budget, True):
            status, result = attempt(tally, call, what, text, run)
            lines.append(f"| {lm.name} | {what} | `{text!r}` | {call} | {shown_result(status, result)} |")
            print(lines[-1], flush=True)
    return lines


def cli_invalid_utf8(model: str, budget: float) -> str:
    """`marginal next - --model M` on b"\\xff\\xfe" from standard input (the venv's `marginal`, else
    ``python -m marginal_core``): its exit status and the last line it wrote, as a table row."""
    script = Path(sys.executable).with_name("marginal")
    head = [str(script)] if script.exists() else [sys.executable, "-m", "marginal_core"]
    out = subprocess.run([*head, "next", "-", "--model", model, "--k", "3", "--time-budget", str(budget)],
                         input=INVALID_UTF8, capture_output=True, timeout=600)
    err, std = (x.decode("utf-8", errors="replace").strip() for x in (out.stderr, out.stdout))
    said = (err or std or "(nothing)").splitlines()[-1]
    shown = f"exit {out.returncode}{', with a TRACEBACK' if 'Traceback' in err else ''}: {said}"
    return f"| {model} | invalid UTF-8 (CLI) | `{INVALID_UTF8!r}` on stdin | marginal next - | {shown} |"


def report(tallies: list[Tally], bad: list[str], budget: float, every: int) -> None:
    """The tables: per model counts, the refusals' messages, the crashes, the failed checks, the bad inputs."""
    print(f"\n## Crash bench (next_characters k=3, time_budget {budget} s; continue_text chars=2 and surprisal "
          f"on one string in {every}: every {every}th round of the {len(KINDS)} kinds)\n")
    print("| model | strings | calls | refusals | crashes | failed checks | seconds |\n|---|---|---|---|---|---|---|")
    for t in tallies:
        print(f"| {t.model} | {t.strings} | {t.calls} | {sum(t.refusals.values())} | {len(t.crashes)} | "
              f"{len(t.failed_checks)} | {t.seconds:.0f} |")
    for t in tallies:
        if t.slowest[1]:
            over = ", ".join(f"{call} {n}" for call, n in t.overruns.items()) or "none"
            print(f"\n{t.model}: slowest call {t.slowest[1]} on {t.slowest[2]!r} ({t.slowest[0]:.1f} s); "
                  f"calls past {t.overrun:.0f} s: {over}")
    kinds = Counter[str]()
    for t in tallies:
        kinds.update(t.kinds)
    if kinds:
        print("\nStrings by kind (all models): " + ", ".join(f"{k} {kinds[k]}" for k in KINDS if kinds[k]))
    refusals = Counter[str]()
    for t in tallies:
        refusals.update(t.refusals)
    print(f"\n### Refusals ({len(refusals)} distinct messages)\n")
    for message, n in refusals.most_common():
        print(f"- {n} × {message}")
    crashes = [c for t in tallies for c in t.crashes]
    print(f"\n### Crashes ({len(crashes)})\n")
    for (where, what), n in Counter((c.where, c.what.split(":")[0]) for c in crashes).most_common():
        print(f"- {n} × {what} at {where}")
    if crashes:
        print("\n| model | call | kind | string | last frame | exception |\n|---|---|---|---|---|---|")
        for c in crashes:
            print(f"| {c.model} | {c.call} | {c.kind} | `{c.text!r}` | {c.where} | {c.what} |")
    checks = [c for t in tallies for c in t.failed_checks]
    print(f"\n### Failed checks ({len(checks)})\n")
    for c in checks:
        print(f"- {c.model} {c.kind} `{c.text!r}`: {c.what}")
    if bad:
        print("\n## Bad input\n\n| model | input | text | call | outcome |\n|---|---|---|---|---|")
        print("\n".join(bad))


def code_state() -> str:
    """The commit the library runs at, and the files of marginal_core/ changed since (a run while
    the code is edited says which code it ran)."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
        changed = subprocess.run(["git", "status", "--porcelain", "--", "marginal_core"], capture_output=True,
                                 text=True).stdout.split("\n")
    except OSError:
        return "unknown"
    changed = [line[3:] for line in changed if line.strip()]
    return f"HEAD {head or '?'}" + (f", changed: {', '.join(changed)}" if changed else ", marginal_core/ unchanged")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=1000, help="strings per model")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--models", default="gemma3-270m,smollm2-135m")
    parser.add_argument("--budget", type=float, default=0.3, help="each call's time_budget, seconds")
    parser.add_argument("--every", type=int, default=10,
                        help="continue_text and surprisal on one string in N (every Nth round of the kinds)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--overrun", type=float, default=10.0, help="count the calls that take longer (seconds)")
    parser.add_argument("--no-bad-input", action="store_true", help="skip the four bad inputs")
    args = parser.parse_args()
    strings = fuzz_strings(args.n, args.seed)
    print(f"# bench.next_fuzz — {args.n} strings per model (seed {args.seed}), models {args.models}, "
          f"{args.device} {args.dtype}; code: {code_state()}\n", flush=True)
    for sig in (signal.SIGINT, signal.SIGTERM):  # a bench started in the background ignores SIGINT otherwise
        signal.signal(sig, signal.default_int_handler)
    tallies: list[Tally] = []
    bad: list[str] = []
    try:  # Ctrl-C (SIGINT) or SIGTERM stops and prints what finished
        for name in args.models.split(","):
            lm = load_model(name, device=args.device, dtype=args.dtype)
            tallies.append(Tally(name, overrun=args.overrun))
            fuzz(lm, strings, tallies[-1], args.budget, args.every)
            if not args.no_bad_input:
                bad += bad_inputs(lm, args.budget)
                bad.append(cli_invalid_utf8(name, args.budget))
                print(bad[-1], flush=True)
    except KeyboardInterrupt:
        print("\n(stopped: the tables hold what finished)", flush=True)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    report(tallies, bad, args.budget, args.every)


if __name__ == "__main__":
    main()
