"""Benchmark of the scorers: the prefix-trie scorer against plain padded batches.

For each model and text set (the estimator benchmark's texts: 20 short answers after their
question, and 10 sentences of 50-100 characters with no context), the canonical tokenization
and k Algorithm-1 samples of every text are scored both ways in the same run, alternating which
goes first. Reported per model and set: path tokens scored per second by each scorer and their
ratio (wall clock, and process CPU time, which other load on the machine disturbs less), the
share of plain scoring's tokens (context + path per path) that the trie scorer did not feed,
forward passes, the largest score difference, and, without the model, the share prefix sharing
and context reuse would save at k = 1000.

Each model runs in every dtype asked for (--dtypes), and a second table puts the trie scorer
against the machine: its achieved matrix FLOP/s (2 x the decoder's non-embedding parameters per
token fed, plus 2 x hidden x vocabulary per row through the LM head; attention scores are left
out) against a roofline timed in the same run, the LM head's own product [rows, hidden] x
[hidden, vocabulary] in that dtype on that device, and each dtype's speed-up over float32 at
equal samples.
Run: .venv/bin/python -m bench.scoring [--quick] [--samples K] [--models a,b] [--threads N]
     [--dtypes float32,float16,bfloat16] [--device cuda] [--sets sentences] [--limit N] [--trie-only]
"""

from __future__ import annotations

import argparse
import functools
import time

import numpy as np
import torch

from bench.estimators import text_sets  # bench/estimators.py: the same texts as the estimator benchmark
from marginal_core.lattice.conditioning import context_ids
from marginal_core.lattice.graph import lattice_of
from marginal_core.lattice.sampling import lattice_samples
from marginal_core.lm.adapter import LM
from marginal_core.models import load_model
from marginal_core.scoring.plain_scoring import score_paths_plain
from marginal_core.scoring.score_stats import ScoreStats
from marginal_core.scoring.trie import distinct_prefixes
from marginal_core.scoring.trie_scoring import score_paths

FAR_K = 1000


def tokenizations(tokenizer, context: str | None, text: str, k: int, seed: int) -> tuple[list[int], list]:
    """The context ids, and the canonical tokenization followed by k Algorithm-1 samples."""
    lattice = lattice_of(text, tokenizer)
    samples = lattice_samples(lattice, k, seed=seed).paths.tolist()
    return context_ids(tokenizer, context), [lattice.canonical, *samples]


def saved_without_model(tokenizer, pairs: list[tuple[str | None, str]], k: int, seed: int) -> float:
    """Share of plain scoring's tokens the trie scorer would not feed at k samples per text."""
    fed = plain = 0
    for context, text in pairs:
        ctx, paths = tokenizations(tokenizer, context, text, k, seed)
        fed += len(ctx) + distinct_prefixes(paths)
        plain += sum(len(ctx) + len(p) for p in paths)
    return 1 - fed / plain


def run_set(lm, pairs: list[tuple[str | None, str]], k: int, seed: int, budget: int, plain: bool = True) -> dict:
    """Score every text's tokenizations with both scorers (the trie's alone without plain); sum
    their stats and CPU times."""
    stats = {"trie": ScoreStats(), "plain": ScoreStats()}
    cpu = {"trie": 0.0, "plain": 0.0}
    scorers = [("trie", functools.partial(score_paths, max_batch_tokens=budget)),
               ("plain", functools.partial(score_paths_plain, max_batch_tokens=budget))][: 2 if plain else 1]
    worst = 0.0
    for i, (context, text) in enumerate(pairs):
        ctx, paths = tokenizations(lm.tokenizer, context, text, k, seed)
        scores = {}
        for name, scorer in scorers if i % 2 == 0 else scorers[::-1]:
            started = time.process_time()
            scores[name] = scorer(lm, paths, ctx, stats=stats[name])
            cpu[name] += time.process_time() - started
        if plain:
            worst = max(worst, float(np.abs(scores["trie"] - scores["plain"]).max()))
    return {"stats": stats, "cpu": cpu, "worst": worst}


def row(model: str, dtype: str, set_name: str, texts: int, k: int, result: dict, far: float) -> list[str]:
    """One table row."""
    trie, plain = result["stats"]["trie"], result["stats"]["plain"]
    cpu_ratio = result["cpu"]["plain"] / result["cpu"]["trie"]
    return [
        model, dtype, set_name, str(texts), str(k), str(trie.paths),
        f"{plain.tokens_per_second:.0f}", f"{trie.tokens_per_second:.0f}",
        f"{plain.seconds / trie.seconds:.2f}x", f"{cpu_ratio:.2f}x",
        f"{trie.tokens_fed}/{trie.plain_tokens}", f"{trie.saved_share:.0%}",
        f"{trie.forward_passes}/{plain.forward_passes}", f"{result['worst']:.1e}", f"{far:.0%}",
    ]


def merged(results: list[dict]) -> dict:
    """Several sets' results summed, for a model's overall row."""
    out = {
        "stats": {"trie": ScoreStats(), "plain": ScoreStats()},
        "cpu": {"trie": 0.0, "plain": 0.0},
        "worst": 0.0,
    }
    for result in results:
        for name in ("trie", "plain"):
            total, part = out["stats"][name], result["stats"][name]
            for field in vars(total):
                setattr(total, field, getattr(total, field) + getattr(part, field))
            out["cpu"][name] += result["cpu"][name]
        out["worst"] = max(out["worst"], result["worst"])
    return out


def synchronize(lm: LM) -> None:
    """Wait for the device's queued work, so wall clocks measure it."""
    if lm.device.type == "cuda":
        torch.cuda.synchronize(lm.device)


def model_flops(lm: LM, stats: ScoreStats) -> float:
    """Matrix FLOPs of the work in stats: the decoder per token fed, the head per head row."""
    embedding = lm.model.get_input_embeddings().weight.numel()
    body = sum(p.numel() for p in lm.decoder.parameters()) - embedding
    hidden = lm.head.weight.shape[1]
    return 2.0 * body * stats.tokens_fed + 2.0 * hidden * lm.vocab * stats.head_rows


def roofline(lm: LM, rows: int = 256, repeats: int = 5) -> float:
    """FLOP/s of the LM head's product on `rows` hidden states as the adapter multiplies them
    (its float16 copy into float32 logits where it has one, else in the head's own dtype), on the
    model's device (best of `repeats` after a warm-up): what the scorer's dominant kernel can
    reach here."""
    weight = lm.head.weight if lm.head16 is None else lm.head16
    hidden = torch.randn(rows, weight.shape[1], dtype=weight.dtype, device=weight.device)
    if lm.head16 is None:
        product = functools.partial(torch.nn.functional.linear, hidden, weight)
    else:
        product = functools.partial(torch.mm, hidden, weight.T, out_dtype=torch.float32)
    with torch.inference_mode():
        product()
        best = float("inf")
        for _ in range(repeats):
            synchronize(lm)
            started = time.perf_counter()
            product()
            synchronize(lm)
            best = min(best, time.perf_counter() - started)
    return 2.0 * rows * weight.shape[1] * lm.vocab / best


def machine_rows(runs: list[dict]) -> list[list[str]]:
    """The trie scorer's FLOP/s against the roofline, per model and dtype."""
    rows = []
    for run in runs:
        stats = run["stats"]
        achieved = run["flops"] / stats.seconds
        base = next((r for r in runs if r["model"] == run["model"] and r["dtype"] == "float32"), None)
        speedup = f"{base['stats'].seconds / stats.seconds:.2f}x" if base else "-"
        rows.append([
            run["model"], run["dtype"], run["device"], str(stats.paths), f"{stats.seconds:.2f}",
            f"{achieved / 1e9:.1f}", f"{run['roofline'] / 1e9:.1f}", f"{achieved / run['roofline']:.0%}", speedup,
        ])
    return rows


def print_table(header: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for r in [header, ["-" * w for w in widths], *rows]:
        print("  ".join(cell.rjust(w) for cell, w in zip(r, widths)))


SCORER_HEADER = [
        "model", "dtype", "set", "texts", "k", "paths", "plain tok/s", "trie tok/s", "speedup", "cpu speedup",
        "fed/plain tokens", "saved", "passes trie/plain", "max |diff|", f"saved@k={FAR_K}",
]
MACHINE_HEADER = [
    "model", "dtype", "device", "paths", "trie s", "trie GFLOP/s", "roofline GFLOP/s", "of roofline",
    "vs float32",
]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--samples", type=int, default=32, help="Algorithm-1 samples per text (default 32)")
    parser.add_argument("--models", default="gemma3-270m,smollm2-135m")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, help="torch CPU threads (default: torch's choice)")
    parser.add_argument("--quick", action="store_true", help="5 answers, 3 sentences, 8 samples")
    parser.add_argument("--sets", default="qa,sentences", help="text sets (default qa,sentences)")
    parser.add_argument("--limit", type=int, help="texts per set (default all)")
    parser.add_argument("--trie-only", action="store_true",
                        help="the trie scorer against the roofline alone, without plain scoring (quick at large k)")
    parser.add_argument("--dtypes", default="float32,float16,bfloat16", help="comma list (default float32,float16,bfloat16)")
    parser.add_argument("--device", help="cuda, mps or cpu (default: the best available)")
    parser.add_argument("--max-batch-tokens", type=int,
                        help="tokens per forward pass, both scorers (default: the device's, see pass_tokens)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    sets = {name: pairs[: args.limit] for name, pairs in text_sets().items() if name in args.sets.split(",")}
    k = args.samples
    if args.quick:
        sets = {name: pairs[: {"qa": 5, "sentences": 3}[name]] for name, pairs in sets.items()}
        k = min(k, 8)
    started = time.perf_counter()
    rows, devices, runs = [], set(), []
    all_pairs = [pair for pairs in sets.values() for pair in pairs]
    for model in args.models.split(","):
        for dtype in args.dtypes.split(","):
            lm = load_model(model, device=args.device, dtype=dtype)
            devices.add(str(lm.device))
            score_paths(lm, [(1,)], [1])  # warm up outside the timings
            results = []
            for set_name, pairs in sets.items():
                results.append(run_set(lm, pairs, k, args.seed, args.max_batch_tokens, plain=not args.trie_only))
                if not args.trie_only:
                    far = saved_without_model(lm.tokenizer, pairs, FAR_K, args.seed)
                    rows.append(row(model, dtype, set_name, len(pairs), k, results[-1], far))
            total = merged(results)
            if not args.trie_only:
                far = saved_without_model(lm.tokenizer, all_pairs, FAR_K, args.seed)
                rows.append(row(model, dtype, "all", len(all_pairs), k, total, far))
            trie = total["stats"]["trie"]
            runs.append({"model": model, "dtype": dtype, "device": str(lm.device), "stats": trie,
                         "flops": model_flops(lm, trie), "roofline": roofline(lm, lm.head_rows(256))})
    print(
        f"device: {', '.join(sorted(devices))}, torch threads: {torch.get_num_threads()}, "
        f"max batch tokens {args.max_batch_tokens or 'device default'}, "
        f"whole run {time.perf_counter() - started:.0f} s"
    )
    if not args.trie_only:
        print_table(SCORER_HEADER, rows)
        print()
    print_table(MACHINE_HEADER, machine_rows(runs))


if __name__ == "__main__":
    main()
