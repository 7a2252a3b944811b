"""Benchmark at the paper's model sizes: real architectures with random weights (speed does not
depend on the weights), made directly on the device through ``load_model``.

Each configuration is written from the published architecture (layers, hidden size, heads, KV
heads, intermediate size, sliding window) over the embedded model of its family: Gemma 3 1B,
4B, 12B and 27B over Gemma 3 270M (the same tokenizer and vocabulary at every size), and Llama 2
7B and 13B over SmolLM2 (a Llama body; no package ships Llama 2's tokenizer, so its vocabulary is
SmolLM2's 49,152 tokens, not 32,000: the head is 1.5 times Llama 2's). A configuration is a
folder under $MARGINAL_CACHE/scale with config.json, the tokenizer and the random-weights
marker; ``load_model(folder, allow_random_weights=True)`` makes the model (the estimators'
commands refuse such a folder).

Per model, on the estimator benchmark's 20 Q&A answers (after their questions) and 10
sentences: seconds of the canonical score, the lattice estimate at k = 100 and 1,000, the proxy
at k = 100 and the beam at W = 32, summed over the texts; the trie scorer's path tokens per
second and matrix FLOP/s at k = 1,000 (bench/scoring.py's count: the decoder's non-embedding
parameters per token fed, the head per row) and its share of the device's dense 16-bit peak (MFU,
on a GPU whose peak is known) or of the head product's own FLOP/s here (a CPU); the peak memory;
and the lattice-over-proxy speed-up at k = 100 beside the paper's Table 2 (ARC). And the
canonical score of a 1,000-token text (the bench sentences, repeated) against its FLOP lower
bound: its matrix FLOPs (decoder and head, 1,000 tokens) at the dense 16-bit peak (a CPU: at the
head product's FLOP/s).

Run: .venv/bin/python -m bench.scale [--models gemma3-1b,...] [--device cuda] [--dtype float16]
     [--texts 10,5] [--quick]   (--quick: 2 answers and 1 sentence, k = 20 and 100: a smoke run on a CPU)
"""

from __future__ import annotations

import argparse
import resource
import time
from functools import partial
from pathlib import Path

import torch

from bench.estimators import text_sets  # bench/estimators.py: the same texts as the estimator benchmark
from bench.paper_tables.figures import PAPER_T2
from bench.scoring import model_flops, roofline, synchronize
from marginal_core.estimators.marginalizer import Marginalizer
from marginal_core.ground.cache_home import cache_root
from marginal_core.lattice.conditioning import context_ids
from marginal_core.lattice.sampling import lattice_samples
from marginal_core.lm.adapter import LM
from marginal_core.models import load_model, load_tokenizer
from marginal_core.models.random_weights import random_weights_folder, write_random_weights_folder
from marginal_core.scoring.score_stats import ScoreStats
from marginal_core.scoring.trie_scoring import score_paths
from marginal_core.tasks.markdown import table

GEMMA, LLAMA = "gemma3-270m", "smollm2-135m"
# name -> (embedded model of the family, the architecture's sizes)
CONFIGS = {
    "gemma3-270m": (GEMMA, {}),  # the embedded model's own architecture: the trend's first point
    "gemma3-1b": (GEMMA, dict(hidden_size=1152, num_hidden_layers=26, num_attention_heads=4, num_key_value_heads=1,
                              head_dim=256, intermediate_size=6912, sliding_window=512, query_pre_attn_scalar=256)),
    "gemma3-4b": (GEMMA, dict(hidden_size=2560, num_hidden_layers=34, num_attention_heads=8, num_key_value_heads=4,
                              head_dim=256, intermediate_size=10240, sliding_window=1024, query_pre_attn_scalar=256)),
    "gemma3-12b": (GEMMA, dict(hidden_size=3840, num_hidden_layers=48, num_attention_heads=16, num_key_value_heads=8,
                               head_dim=256, intermediate_size=15360, sliding_window=1024, query_pre_attn_scalar=256)),
    "gemma3-27b": (GEMMA, dict(hidden_size=5376, num_hidden_layers=62, num_attention_heads=32, num_key_value_heads=16,
                               head_dim=128, intermediate_size=21504, sliding_window=1024, query_pre_attn_scalar=168)),
    "llama2-7b": (LLAMA, dict(hidden_size=4096, num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=32,
                              head_dim=128, intermediate_size=11008, max_position_embeddings=4096,
                              rope_parameters={"rope_theta": 10000.0, "rope_type": "default"},
                              tie_word_embeddings=False, rms_norm_eps=1e-5)),
    "llama2-13b": (LLAMA, dict(hidden_size=5120, num_hidden_layers=40, num_attention_heads=40, num_key_value_heads=40,
                               head_dim=128, intermediate_size=13824, max_position_embeddings=4096,
                               rope_parameters={"rope_theta": 10000.0, "rope_type": "default"},
                               tie_word_embeddings=False, rms_norm_eps=1e-5)),
}
PAPER_NAMES = {"gemma3-1b": "Gemma3-1b", "gemma3-4b": "Gemma3-4b", "gemma3-27b": "Gemma3-27b",
               "llama2-7b": "Llama2-7b", "llama2-13b": "Llama2-13b"}
DENSE_16BIT_PEAK = {"H100": 989e12, "H200": 989e12, "A100": 312e12}  # FLOP/s, dense, by device name (float16 and bfloat16 alike)


def config_folder(name: str) -> Path:
    """The configuration's folder under $MARGINAL_CACHE/scale, written once."""
    folder = cache_root() / "scale" / name
    if random_weights_folder(str(folder)) is None:
        base, sizes = CONFIGS[name]
        config = load_model(base, device="cpu", dtype="float32").model.config.to_dict()
        write_random_weights_folder(folder, config, load_tokenizer(base), {**sizes, "_name_or_path": name})
    return folder


def timed(lm: LM, work) -> float:
    """Seconds of work() with the device's queue drained before and after."""
    synchronize(lm)
    started = time.perf_counter()
    work()
    synchronize(lm)
    return time.perf_counter() - started


LONG_TOKENS = 1000


def long_path(lm: LM, sentences: list[tuple[str | None, str]], tokens: int = LONG_TOKENS) -> list[int]:
    """The first `tokens` tokens of the canonical tokenization of the sentences, joined and doubled
    until long enough."""
    text = " " + " ".join(s.strip() for _, s in sentences)
    while len(ids := Marginalizer(lm, text).lattice.canonical) < tokens:
        text += text
    return list(ids[:tokens])


def long_canonical(lm: LM, sentences: list, peak_flops: float) -> tuple[float, float]:
    """Seconds of one 1,000-token canonical score (after BOS, prefilled apart), and their ratio to
    the FLOP lower bound at peak_flops."""
    path = long_path(lm, sentences)
    state = lm.context(context_ids(lm.text_tokenizer))
    score_paths(lm, [path[:16]], state)  # warm-up: kernels chosen
    seconds = timed(lm, partial(score_paths, lm, [path], state))
    bound = model_flops(lm, ScoreStats(tokens_fed=len(path), head_rows=len(path))) / peak_flops
    return seconds, seconds / bound


def measure(name: str, device: str | None, dtype: str, pairs: list, ks: tuple[int, int], sentences: list) -> dict:
    """Every figure of one configuration (see the module docstring)."""
    lm = load_model(str(config_folder(name)), device=device, dtype=dtype, allow_random_weights=True)
    if lm.device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(lm.device)
    seconds = dict.fromkeys(["canonical", f"lattice k={ks[0]}", f"lattice k={ks[1]}", f"proxy k={ks[0]}", "beam W=32"], 0.0)
    stats = ScoreStats()
    for context, text in pairs:
        m = Marginalizer(lm, text, context)
        seconds["canonical"] += timed(lm, m.canonical_score)
        for k in ks:
            seconds[f"lattice k={k}"] += timed(lm, partial(m.estimate, "lattice", samples=k))
        seconds[f"proxy k={ks[0]}"] += timed(lm, partial(m.estimate, "proxy", samples=ks[0]))
        seconds["beam W=32"] += timed(lm, partial(m.estimate, "beam", beam_width=32))
        paths = lattice_samples(m.lattice, ks[1], seed=0).paths
        timed(lm, partial(score_paths, lm, paths, m.context_state(), stats=stats))  # stats.seconds: its own clock
    peak = (torch.cuda.max_memory_allocated(lm.device) if lm.device.type == "cuda"
            else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
    flops = model_flops(lm, stats) / stats.seconds
    gpu = torch.cuda.get_device_name(lm.device) if lm.device.type == "cuda" else ""
    peak_flops = next((v for k, v in DENSE_16BIT_PEAK.items() if k in gpu), None)
    rate = peak_flops or roofline(lm, lm.head_rows(256))  # a CPU: the head product's FLOP/s, timed once
    long_s, long_ratio = long_canonical(lm, sentences, rate)
    return {"model": name, "device": gpu or str(lm.device), "dtype": str(lm.dtype).removeprefix("torch."),
            "params": sum(p.numel() for p in lm.model.parameters()), "seconds": seconds,
            "tokens_per_s": stats.tokens_fed / stats.seconds, "flops": flops,
            "share": flops / rate,
            "share_of": "dense 16-bit peak" if peak_flops else "head product here", "peak_bytes": peak,
            "speedup": seconds[f"proxy k={ks[0]}"] / seconds[f"lattice k={ks[0]}"],
            "long_s": long_s, "long_ratio": long_ratio}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=",".join(CONFIGS), help="comma list of " + ", ".join(CONFIGS))
    parser.add_argument("--device", help="cuda, mps or cpu (default: the best available)")
    parser.add_argument("--dtype", default="float16", choices=("float32", "float16", "bfloat16"))
    parser.add_argument("--quick", action="store_true", help="2 answers and 1 sentence, k = 20 and 100")
    parser.add_argument("--texts", default="20,10", help="Q&A answers and sentences (default 20,10, all of them)")
    args = parser.parse_args()
    sets = text_sets()
    answers, sentences = (2, 1) if args.quick else map(int, args.texts.split(","))
    pairs = sets["qa"][:answers] + sets["sentences"][:sentences]
    ks = (20, 100) if args.quick else (100, 1000)
    header = ["model", "parameters", "device", "dtype", "canonical s", f"lattice k={ks[0]} s", f"lattice k={ks[1]} s",
              f"proxy k={ks[0]} s", "beam W=32 s", f"trie tokens/s (k={ks[1]})", "trie TFLOP/s", "MFU",
              "peak memory GiB", f"proxy / lattice (k={ks[0]})", "paper (ARC)",
              f"canonical {LONG_TOKENS:,} tokens s", "/ FLOP bound"]
    print(f"{len(pairs)} texts (answers after their questions, sentences), random weights, torch {torch.__version__}, "
          f"{time.strftime('%Y-%m-%d')}\n")
    print("\n".join(table(header, [])[:2]), flush=True)
    for name in args.models.split(","):  # each row as its model finishes: a long run keeps what it did
        r = measure(name.strip(), args.device, args.dtype, pairs, ks, sets["sentences"])
        paper = PAPER_T2.get((PAPER_NAMES.get(r["model"], ""), "Arc"))
        row = [r["model"], f"{r['params'] / 1e9:.2f}B", r["device"], r["dtype"],
               *(f"{s:.1f}" for s in r["seconds"].values()), f"{r['tokens_per_s']:,.0f}",
               f"{r['flops'] / 1e12:.2f}", f"{100 * r['share']:.1f}% of {r['share_of']}",
               f"{r['peak_bytes'] / 2**30:.1f}", f"{r['speedup']:.1f}x", f"{paper[3]}x" if paper else "-",
               f"{r['long_s']:.2f}", f"{r['long_ratio']:.1f}x"]
        print(table(header, [row])[2], flush=True)


if __name__ == "__main__":
    main()
