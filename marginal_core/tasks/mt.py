"""Translation reranking by canonical probability and by marginals (paper Tables 3 and 4).

The paper's zero-shot pipeline, for each source sentence:

1. prompt the model (no few-shot examples)::

       Translate the following sentence from English to German.
       English: {source}
       German:

2. sample distinct candidate translations (default 4) with the model: ancestral sampling with
   temperature 0.8 and top-p 0.95 (top-k off), seeded per sentence and round, each stopped at
   its first newline (or EOS) and stripped; duplicates and empty ones are dropped and more are
   drawn, up to 8 rounds; where still none is left, the greedy translation is used;
3. score each candidate as the continuation ``" {candidate}"`` after the prompt, by its
   canonical log p and by its log marginal (canonical + lattice or proxy non-canonical
   estimate), and keep the highest per method;
4. score the corpus of kept candidates against the references with chrF (sacrebleu), and
   COMET-22 where ``unbabel-comet`` and its model are available.

Datasets: ``en-de`` and ``en-cs`` are 30 sentences each packaged in ``tasks/data``
(general-domain English sentences with reference translations written for this project; not
WMT data); any local ``.tsv`` (columns ``source`` and ``reference``, header optional) or
``.jsonl`` (``source``/``reference``, or ``src``/``ref``/``target``); and WMT24++ through
Hugging Face ``datasets`` as ``wmt24pp:en-de`` (or a full config such as ``wmt24pp:en-de_DE``).
"""

from __future__ import annotations

import csv
import functools
import json
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from marginal_core.errors import MarginalError
from marginal_core.tasks.common import SCORE_COLUMNS, parse_methods, run_items, score_continuation
from marginal_core.tasks.store import ResultStore

DATA_DIR = Path(__file__).parent / "data"
PACKAGED = {"en-de": DATA_DIR / "en-de.tsv", "en-cs": DATA_DIR / "en-cs.tsv"}
WMT24PP_CONFIGS = {"en-de": "en-de_DE", "en-cs": "en-cs_CZ"}

LANGUAGES = {
    "en": "English", "de": "German", "cs": "Czech", "fr": "French", "es": "Spanish",
    "it": "Italian", "pt": "Portuguese", "nl": "Dutch", "pl": "Polish", "ru": "Russian",
    "uk": "Ukrainian", "ja": "Japanese", "zh": "Chinese", "ko": "Korean", "ar": "Arabic",
    "tr": "Turkish", "sv": "Swedish", "da": "Danish", "fi": "Finnish", "hu": "Hungarian",
    "ro": "Romanian", "is": "Icelandic", "hi": "Hindi",
}

PROMPT = "Translate the following sentence from {src} to {tgt}.\n{src}: {source}\n{tgt}:"
GENERATION = {"temperature": 0.8, "top_p": 0.95, "top_k": 0, "max_rounds": 8}

MT_COLUMNS = ["item", "sentence_index", "choice", "candidate"] + SCORE_COLUMNS


@dataclass(frozen=True)
class Pair:
    """A source sentence and its reference translation."""

    id: str
    source: str
    reference: str
    index: int = 0


def make_prompt(source: str, target_language: str, source_language: str = "English") -> str:
    """The zero-shot translation prompt (the continuation is ' {translation}')."""
    return PROMPT.format(src=source_language, tgt=target_language, source=source.strip())


# --------------------------------------------------------------------------------------------
# Loading


def language_pair(dataset: str) -> tuple[str, str] | None:
    """(source code, target code) found in a dataset name such as 'en-de' or 'wmt_en-cs.tsv'."""
    match = re.search(r"(?<![a-z])([a-z]{2})[-_]([a-z]{2})(?![a-z])", Path(dataset).name.lower())
    if match and match.group(1) in LANGUAGES and match.group(2) in LANGUAGES:
        return match.group(1), match.group(2)
    return None


def _read_tsv(path: Path) -> list[dict[str, str]]:
    with open(path, encoding="utf-8", newline="") as fh:
        rows = list(csv.reader(fh, delimiter="\t", quoting=csv.QUOTE_NONE))
    rows = [r for r in rows if any(c.strip() for c in r)]
    if not rows:
        return []
    header = [c.strip().lower() for c in rows[0]]
    if "source" in header and ("reference" in header or "target" in header):
        ref = "reference" if "reference" in header else "target"
        return [
            {"id": r[header.index("id")] if "id" in header else None,
             "source": r[header.index("source")], "reference": r[header.index(ref)]}
            for r in rows[1:]
        ]
    if any(len(r) < 2 for r in rows):
        raise MarginalError(f"{path}: every line needs a source and a reference, tab-separated")
    return [{"id": None, "source": r[0], "reference": r[1]} for r in rows]


def _pick(rec: dict[str, Any], keys: Sequence[str]) -> str | None:
    return next((str(rec[k]) for k in keys if rec.get(k) not in (None, "")), None)


def load_local_pairs(path: str | Path) -> list[Pair]:
    """Pairs from a .tsv (source, reference) or .jsonl (source/reference keys) file."""
    path = Path(path)
    if not path.is_file():
        raise MarginalError(f"no dataset file at {path}")
    name = path.name.lower()
    if name.endswith(".tsv") or name.endswith(".txt"):
        records = _read_tsv(path)
    elif name.endswith(".jsonl") or name.endswith(".json"):
        text = path.read_text(encoding="utf-8")
        try:
            records = json.loads(text) if text.lstrip().startswith("[") else [
                json.loads(line) for line in text.splitlines() if line.strip()
            ]
        except ValueError as err:
            raise MarginalError(f"{path} is not valid JSON lines: {err}") from err
    else:
        raise MarginalError(f"{path}: give a .tsv or .jsonl file with source and reference")
    pairs = []
    for i, rec in enumerate(records):
        source = _pick(rec, ("source", "src", "en"))
        reference = _pick(rec, ("reference", "ref", "target", "tgt", "translation"))
        if not source or not reference:
            raise MarginalError(f"{path}: record {i} needs a source and a reference")
        pairs.append(Pair(str(rec.get("id") or i), source.strip(), reference.strip(), i))
    if not pairs:
        raise MarginalError(f"{path} holds no sentence pairs")
    if len({p.id for p in pairs}) != len(pairs):
        pairs = [Pair(str(p.index), p.source, p.reference, p.index) for p in pairs]
    return pairs


def load_wmt24pp(pair: str) -> list[Pair]:
    """WMT24++ (google/wmt24pp) for 'en-de' or a full config 'en-de_DE'; bad sources skipped."""
    try:
        import datasets
    except ImportError as err:
        raise MarginalError(
            "WMT24++ needs the datasets package and Hugging Face hub access (pip install datasets)"
        ) from err
    config = WMT24PP_CONFIGS.get(pair, pair)
    try:
        data = datasets.load_dataset("google/wmt24pp", config, split="train")
    except Exception as err:
        raise MarginalError(f"cannot load WMT24++ {config!r}: {' '.join(str(err).split())[:300]}") from err
    out = []
    for i, rec in enumerate(data):
        if rec.get("is_bad_source"):
            continue
        out.append(Pair(str(rec.get("segment_id", i)), rec["source"].strip(), rec["target"].strip(), len(out)))
    return out


def load_pairs(dataset: str, limit: int | None = None) -> tuple[list[Pair], tuple[str, str] | None]:
    """The sentence pairs of a dataset name or file (cut to limit) and its language pair."""
    name = dataset.strip()
    if name.lower().startswith("wmt24pp:"):
        code = name.split(":", 1)[1].strip()
        pairs, langs = load_wmt24pp(code), language_pair(code)
    elif name.lower() in PACKAGED:
        pairs, langs = load_local_pairs(PACKAGED[name.lower()]), language_pair(name.lower())
    elif Path(name).expanduser().exists():
        pairs, langs = load_local_pairs(Path(name).expanduser()), language_pair(name)
    else:
        raise MarginalError(
            f"unknown dataset {dataset!r}: not one of {', '.join(PACKAGED)}, not an existing file, "
            "and not wmt24pp:SRC-TGT"
        )
    if limit is not None:
        if limit < 0:
            raise MarginalError("--limit must be at least 0")
        pairs = pairs[:limit]
    return pairs, langs


def languages_for(dataset: str, langs: tuple[str, str] | None, target_language: str | None) -> tuple[str, str]:
    """(source language name, target language name) for the prompt."""
    source = LANGUAGES.get(langs[0], "English") if langs else "English"
    if target_language:
        return source, LANGUAGES.get(target_language.lower(), target_language)
    if langs:
        return source, LANGUAGES[langs[1]]
    raise MarginalError(
        f"cannot tell the target language of {dataset!r}; pass --target-language (e.g. German)"
    )


# --------------------------------------------------------------------------------------------
# Generating candidates


@functools.lru_cache(maxsize=8)
def _newline_ids(tokenizer: Any) -> tuple[int, ...]:
    """Token ids whose surface holds a newline (the byte-fallback <0x0A> included)."""
    from marginal_core.vocab import vocabulary

    vocab = vocabulary(tokenizer)
    ids = {i for i, s in enumerate(vocab.surfaces) if s is not None and b"\n" in s}
    if len(vocab.byte_tokens) > 10 and vocab.byte_tokens[10] is not None:
        ids.add(int(vocab.byte_tokens[10]))
    return tuple(sorted(ids))


def _stop_at_newline(newline_ids: Sequence[int], start: int):
    """A StoppingCriteria that ends each row at its first newline token."""
    import torch
    from transformers import StoppingCriteria

    class NewlineStop(StoppingCriteria):
        def __init__(self) -> None:
            self.ids = torch.tensor(list(newline_ids), dtype=torch.long)
            self.done: torch.Tensor | None = None

        def __call__(self, input_ids: torch.Tensor, scores: Any, **kwargs: Any) -> torch.Tensor:
            if input_ids.shape[1] <= start:
                return torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)
            last = torch.isin(input_ids[:, -1], self.ids.to(input_ids.device))
            self.done = last if self.done is None else (self.done | last)
            return self.done

    return NewlineStop()


def _decode(tokenizer: Any, ids: Sequence[int]) -> str:
    """Generated ids as text, cut at the first newline and stripped."""
    text = tokenizer.decode(list(ids), skip_special_tokens=True)
    return text.split("\n", 1)[0].strip()


def generate_candidates(
    lm: Any,
    prompt: str,
    n: int = 4,
    *,
    seed: int = 0,
    max_new_tokens: int | None = None,
    temperature: float = GENERATION["temperature"],
    top_p: float = GENERATION["top_p"],
    top_k: int = GENERATION["top_k"],
    max_rounds: int = GENERATION["max_rounds"],
) -> list[str]:
    """Up to n distinct non-empty translations sampled from the model after the prompt.

    The prompt is encoded as the scorer encodes a context (BOS + canonical tokens), so the
    candidates are drawn from the distribution they are later scored under. Round r is seeded
    with (seed, r); each round draws n rows. The greedy translation stands in when sampling
    gives nothing usable.
    """
    import torch

    from marginal_core.context import context_ids

    tok, model = lm.tokenizer, lm.model
    ids = context_ids(tok, prompt)
    device = next(model.parameters()).device
    input_ids = torch.tensor([ids], dtype=torch.long, device=device)
    limit = max_new_tokens or (2 * len(ids) + 16)
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    found: list[str] = []

    def run(**kwargs: Any) -> list[str]:
        stop = _stop_at_newline(_newline_ids(tok), len(ids))
        with torch.inference_mode():
            out = model.generate(
                input_ids=input_ids,
                attention_mask=torch.ones_like(input_ids),
                max_new_tokens=limit,
                stopping_criteria=[stop],
                pad_token_id=pad,
                **kwargs,
            )
        return [_decode(tok, row[len(ids):].tolist()) for row in out]

    for r in range(max_rounds):
        torch.manual_seed(seed * 1_000_003 + r)
        for text in run(do_sample=True, temperature=temperature, top_p=top_p, top_k=top_k,
                        num_return_sequences=n):
            if text and text not in found:
                found.append(text)
        if len(found) >= n:
            break
    if not found:
        found = [t for t in run(do_sample=False) if t]
    return found[:n]


# --------------------------------------------------------------------------------------------
# Running


def _item_seed(seed: int, index: int) -> int:
    return seed * 100_003 + index


def run_mt(
    dataset: str,
    out: str | Path,
    *,
    model: str | None = None,
    lm: Any = None,
    limit: int | None = None,
    candidates: int = 4,
    samples: int = 100,
    methods: str | Sequence[str] = "canonical,lattice,proxy",
    seed: int = 0,
    max_len: int | None = None,
    target_language: str | None = None,
    device: str | None = None,
    comet: bool = True,
    progress: Callable[[int, int, Pair | None], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    show_bar: bool = True,
    max_items: int | None = None,
    max_new_tokens: int | None = None,
) -> dict[str, Any]:
    """Generate, rerank and score a translation set into a resumable results folder.

    Candidates of a sentence are stored (items.jsonl) as soon as they are generated, so a
    resumed run scores the same candidates. Returns the report (see report.mt_report).
    """
    from marginal_core.models import DEFAULT_MODEL, load_model
    from marginal_core.tasks.report import mt_report, write_report

    started = time.time()
    methods = parse_methods(methods)
    if samples < 1 or candidates < 1:
        raise MarginalError("--samples and --candidates must be at least 1")
    pairs, langs = load_pairs(dataset, limit)
    src_lang, tgt_lang = languages_for(dataset, langs, target_language)
    name = lm.name if lm is not None else (model or DEFAULT_MODEL)
    identity = {
        "task": "mt",
        "dataset": dataset,
        "model": name,
        "samples": samples,
        "candidates": candidates,
        "seed": seed,
        "max_len": max_len,
        "prompt": PROMPT.format(src=src_lang, tgt=tgt_lang, source="{source}"),
        "generation": {**GENERATION, "max_new_tokens": max_new_tokens},
    }
    store = ResultStore(out, identity, MT_COLUMNS)
    stored = store.items()

    def finished(p: Pair) -> bool:
        rec = stored.get(p.id)
        return rec is not None and all(
            store.is_done(p.id, c, m) for c in range(len(rec["candidates"])) for m in methods
        )

    todo = [p for p in pairs if not finished(p)]
    if todo:
        lm = lm if lm is not None else load_model(name, device=device)

        def candidates_of(p: Pair, prompt: str) -> dict[str, Any]:
            """The stored candidates of a sentence, generated and stored first if need be."""
            if p.id not in stored:
                t0 = time.perf_counter()
                cands = generate_candidates(
                    lm, prompt, candidates, seed=_item_seed(seed, p.index), max_new_tokens=max_new_tokens
                )
                stored[p.id] = {"item": p.id, "index": p.index, "source": p.source, "reference": p.reference,
                                "prompt": prompt, "candidates": cands,
                                "generation_seconds": round(time.perf_counter() - t0, 3)}
                store.put_item(stored[p.id])
            return stored[p.id]

        def score(p: Pair) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
            prompt = make_prompt(p.source, tgt_lang, src_lang)
            rows, records = [], []
            for c, cand in enumerate(candidates_of(p, prompt)["candidates"]):
                missing = [m for m in methods if not store.is_done(p.id, c, m)]
                if not missing:
                    continue
                r, s = score_continuation(
                    lm, prompt, " " + cand, missing, samples=samples, seed=seed,
                    max_len=max_len, should_stop=should_stop,
                )
                key = {"item": p.id, "sentence_index": p.index, "choice": c, "candidate": cand}
                rows += [{**key, **row} for row in r]
                records += [{"item": p.id, "choice": c, **x} for x in s]
            return rows, records

        run_items(
            store, len(pairs), todo, score, label=f"{Path(dataset).name} {name}", started=started,
            progress=progress, should_stop=should_stop, show_bar=show_bar, max_items=max_items,
            methods=methods, limit=limit,
        )
    report = mt_report(store.dir, sentences=[p.id for p in pairs], methods=methods, comet=comet)
    write_report(store.dir, report)
    return report
