"""Benchmark of the trie scorer's attention kernels (issue 44, item 3): the MFU table.

For each model and dtype, the same paths (the canonical tokenization and k Algorithm-1 samples
of each text of the estimator benchmark's sets, after their contexts) are scored by the trie
scorer under each tree-attention kernel (``MARGINAL_TREE_ATTENTION``: SDPA's math kernel over a
dense mask, the memory-efficient one over contiguous keys, FlexAttention under a block mask) and
by plain padded batches, in the same run over the same loaded weights. Reported: seconds, the
trie's matrix FLOP/s (bench/scoring.py's count) and its share of the device's dense 16-bit peak
(MFU; a CPU: of the LM head's product timed here), its speed-up over plain padded batches, and
the largest difference from plain scoring's log p per path. Every kernel scores the first text
once before the clock starts (FlexAttention compiles on CUDA then). A model may be one of
bench/scale.py's paper-sized configurations (random weights), e.g. llama2-7b.

Run: .venv/bin/python -m bench.kernels [--models gemma3-270m,smollm2-135m] [--device cuda]
     [--dtypes float16] [--samples 1000] [--kernels math,efficient,flex] [--texts 5,3]
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import replace

import numpy as np
import torch

from bench.estimators import text_sets
from bench.scale import CONFIGS, DENSE_16BIT_PEAK, config_folder, timed
from bench.scoring import model_flops, roofline, tokenizations
from marginal_core.lm.adapter import LM
from marginal_core.lm.attention import TREE_ATTENTION_ENV
from marginal_core.models import load_model
from marginal_core.scoring.plain_scoring import score_paths_plain
from marginal_core.scoring.score_stats import ScoreStats
from marginal_core.scoring.trie_scoring import score_paths
from marginal_core.tasks.markdown import table

HEADER = ["model", "dtype", "device", "kernel", "paths", "trie s", "trie TFLOP/s", "MFU", "plain s",
          "trie vs plain", "max |log p - plain|"]


def load(name: str, device: str | None, dtype: str) -> LM:
    """An embedded model, or a paper-sized configuration of bench/scale.py with random weights."""
    if name in CONFIGS and name != CONFIGS[name][0]:
        return load_model(str(config_folder(name)), device=device, dtype=dtype, allow_random_weights=True)
    return load_model(name, device=device, dtype=dtype)


def with_kernel(base: LM, kernel: str) -> LM:
    """An adapter over base's weights whose tree-masked passes take the kernel."""
    os.environ[TREE_ATTENTION_ENV] = kernel
    try:
        return LM(replace(base.loaded))
    finally:
        del os.environ[TREE_ATTENTION_ENV]


def score_all(lm: LM, work: list, scorer) -> tuple[float, list[np.ndarray], ScoreStats]:
    """Seconds, log p per text and summed stats of scoring every (paths, context) with scorer."""
    stats, scores, seconds = ScoreStats(), [], 0.0
    for paths, ctx in work:
        seconds += timed(lm, lambda p=paths, c=ctx: scores.append(scorer(lm, p, c, stats=stats)))
    return seconds, scores, stats


def rows_for(name: str, device: str | None, dtype: str, kernels: list[str], work_of) -> list[list[str]]:
    """One row per kernel for one model and dtype."""
    base = load(name, device, dtype)
    work = work_of(base.tokenizer)
    gpu = torch.cuda.get_device_name(base.device) if base.device.type == "cuda" else ""
    peak = next((v for k, v in DENSE_16BIT_PEAK.items() if k in gpu), None)
    rate, share_of = (peak, "of peak") if peak else (roofline(base, base.head_rows(256)), "of head product")
    score_paths_plain(base, *work[0])
    plain_s, plain, _ = score_all(base, work, score_paths_plain)
    out = []
    for kernel in kernels:
        if kernel == "efficient" and base.device.type != "cuda":
            continue  # a CUDA kernel choice: on a CPU it is the math path
        lm = with_kernel(base, kernel)
        score_paths(lm, *work[0])  # kernels chosen, FlexAttention compiled
        seconds, got, stats = score_all(lm, work, score_paths)
        flops = model_flops(lm, stats) / seconds
        worst = max(float(np.abs(a - b).max()) for a, b in zip(got, plain))
        out.append([name, dtype, gpu or str(base.device), kernel, str(stats.paths), f"{seconds:.2f}",
                    f"{flops / 1e12:.2f}", f"{flops / rate:.1%} {share_of}", f"{plain_s:.2f}",
                    f"{plain_s / seconds:.2f}x", f"{worst:.1e}"])
    with_kernel(base, "math")  # the weights back on SDPA for whoever loads them next
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="gemma3-270m,smollm2-135m",
                        help="embedded models or bench/scale.py configurations: " + ", ".join(CONFIGS))
    parser.add_argument("--device", help="cuda, mps or cpu (default: the best available)")
    parser.add_argument("--dtypes", default="float32", help="comma list (default float32)")
    parser.add_argument("--samples", type=int, default=100, help="Algorithm-1 samples per text (default 100)")
    parser.add_argument("--kernels", default="math,efficient,flex", help="comma list (default math,efficient,flex)")
    parser.add_argument("--texts", default="5,3", help="Q&A answers and sentences (default 5,3)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    sets = text_sets()
    answers, sentences = map(int, args.texts.split(","))
    pairs = sets["qa"][:answers] + sets["sentences"][:sentences]

    def work_of(tokenizer) -> list:
        return [tokenizations(tokenizer, context, text, args.samples, args.seed)[::-1] for context, text in pairs]

    started = time.perf_counter()
    print(f"{len(pairs)} texts, k = {args.samples}, torch {torch.__version__}, {time.strftime('%Y-%m-%d')}\n")
    print("\n".join(table(HEADER, [])[:2]), flush=True)
    for name in args.models.split(","):
        for dtype in args.dtypes.split(","):
            for row in rows_for(name.strip(), args.device, dtype, args.kernels.split(","), work_of):
                print(table(HEADER, [row])[2], flush=True)
    print(f"\nwhole run {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
