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
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from marginal_core.ground.errors import MarginalError
from marginal_core.tasks.datafiles import dataset_file, read_json_records
from marginal_core.tasks.evaluator import Following, ItemProgress, evaluate
from marginal_core.tasks.options import EvalOptions
from marginal_core.tasks.task import Request, Task

if TYPE_CHECKING:
    from marginal_core.ground.progress import StopCheck
    from marginal_core.lm.adapter import LM

DATA_DIR = Path(__file__).parent / "data"
PACKAGED_PAIRS = {"en-de": DATA_DIR / "en-de.tsv", "en-cs": DATA_DIR / "en-cs.tsv"}
WMT24PP_CONFIGS = {"en-de": "en-de_DE", "en-cs": "en-cs_CZ"}

LANGUAGES = {
    "en": "English", "de": "German", "cs": "Czech", "fr": "French", "es": "Spanish",
    "it": "Italian", "pt": "Portuguese", "nl": "Dutch", "pl": "Polish", "ru": "Russian",
    "uk": "Ukrainian", "ja": "Japanese", "zh": "Chinese", "ko": "Korean", "ar": "Arabic",
    "tr": "Turkish", "sv": "Swedish", "da": "Danish", "fi": "Finnish", "hu": "Hungarian",
    "ro": "Romanian", "is": "Icelandic", "hi": "Hindi",
}

PROMPT = "Translate the following sentence from {src} to {tgt}.\n{src}: {source}\n{tgt}:"
class _Generation(TypedDict):
    temperature: float
    top_p: float
    top_k: int
    max_rounds: int


GENERATION: _Generation = {"temperature": 0.8, "top_p": 0.95, "top_k": 0, "max_rounds": 8}


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


def _read_tsv(path: Path) -> list[dict[str, str | None]]:
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
    path = dataset_file(path)
    name = path.name.lower()
    if name.endswith(".tsv") or name.endswith(".txt"):
        records = _read_tsv(path)
    elif name.endswith(".jsonl") or name.endswith(".json"):
        records = read_json_records(path)
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
    out: list[Pair] = []
    for i, rec in enumerate(data):
        if rec.get("is_bad_source"):
            continue
        out.append(Pair(str(rec.get("segment_id", i)), rec["source"].strip(), rec["target"].strip(), len(out)))
    return out


def load_pairs(dataset: str, limit: int | None = None) -> tuple[list[Pair], tuple[str, str] | None]:
    """The sentence pairs of a dataset name or file (cut to limit) and its language pair."""
    name = dataset.strip()
    if name.lower().startswith("wmt24pp:"):
        pairs = load_wmt24pp(name.split(":", 1)[1].strip())
    elif name.lower() in PACKAGED_PAIRS:
        pairs = load_local_pairs(PACKAGED_PAIRS[name.lower()])
    elif Path(name).expanduser().exists():
        pairs = load_local_pairs(Path(name).expanduser())
    else:
        raise MarginalError(
            f"unknown dataset {dataset!r}: not one of {', '.join(PACKAGED_PAIRS)}, not an existing file, "
            "and not wmt24pp:SRC-TGT"
        )
    if limit is not None:
        if limit < 0:
            raise MarginalError("--limit must be at least 0")
        pairs = pairs[:limit]
    return pairs, language_pair(name)


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
    from marginal_core.lattice.vocab import vocabulary

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


def _generate(lm: LM, ids: list[int], max_new_tokens: int, **sampling: Any) -> list[str]:
    """The model's continuations of the context ids (one per returned row), each decoded, cut at
    its first newline and stripped."""
    tok = lm.tokenizer
    rows = lm.generate(
        ids, max_new_tokens=max_new_tokens, stopping_criteria=[_stop_at_newline(_newline_ids(tok), len(ids))],
        **sampling,
    )
    return [tok.decode(row, skip_special_tokens=True).split("\n", 1)[0].strip() for row in rows]


def generate_candidates(
    lm: LM,
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

    from marginal_core.lattice.conditioning import context_ids

    ids = context_ids(lm.tokenizer, prompt)
    limit = max_new_tokens or (2 * len(ids) + 16)
    found: list[str] = []
    for r in range(max_rounds):
        torch.manual_seed(seed * 1_000_003 + r)
        for text in _generate(lm, ids, limit, do_sample=True, temperature=temperature, top_p=top_p,
                              top_k=top_k, num_return_sequences=n):
            if text and text not in found:
                found.append(text)
        if len(found) >= n:
            break
    if not found:
        found = [t for t in _generate(lm, ids, limit, do_sample=False) if t]
    return found[:n]


# --------------------------------------------------------------------------------------------
# The task


class MTTask(Task):
    """Translation reranking: candidates sampled from the model once per sentence (stored in
    items.jsonl), one request per candidate, chrF / COMET-22 by method (report.mt_report)."""

    name, unit, columns = "mt", "sentences", ["item", "sentence_index", "choice", "candidate"]
    keeps_records = True

    def __init__(
        self,
        dataset: str,
        candidates: int = 4,
        target_language: str | None = None,
        max_new_tokens: int | None = None,
        comet: bool = True,
    ) -> None:
        super().__init__(dataset)
        if candidates < 1:
            raise MarginalError("--candidates must be at least 1")
        self.candidates, self.target_language = candidates, target_language
        self.max_new_tokens, self.comet = max_new_tokens, comet

    def languages(self) -> tuple[str, str]:
        """(source, target) language names for the prompt."""
        return languages_for(self.dataset, language_pair(self.dataset.strip()), self.target_language)

    def load(self, options: EvalOptions) -> list[Pair]:
        pairs, _ = load_pairs(self.dataset, options.limit)
        self.languages()  # a dataset whose target language is unknown fails before any work
        return pairs

    def identity(self, options: EvalOptions, model: str) -> dict[str, Any]:
        src, tgt = self.languages()
        return {
            "task": self.name,
            "dataset": self.dataset,
            "model": model,
            "samples": options.samples,
            "candidates": self.candidates,
            "seed": options.seed,
            "max_len": options.max_len,
            "prompt": PROMPT.format(src=src, tgt=tgt, source="{source}"),
            "generation": {**GENERATION, "max_new_tokens": self.max_new_tokens},
        }

    def prompt(self, pair: Pair) -> str:
        src, tgt = self.languages()
        return make_prompt(pair.source, tgt, src)

    def prepare(self, item: Pair, lm: LM, options: EvalOptions) -> dict[str, Any]:
        """The sentence's record: its prompt and the candidates sampled from the model."""
        prompt = self.prompt(item)
        t0 = time.perf_counter()
        cands = generate_candidates(lm, prompt, self.candidates, seed=options.seed * 100_003 + item.index,
                                    max_new_tokens=self.max_new_tokens)
        return {"item": item.id, "index": item.index, "source": item.source, "reference": item.reference,
                "prompt": prompt, "candidates": cands, "generation_seconds": round(time.perf_counter() - t0, 3)}

    def requests(self, item: Pair, record: dict[str, Any] | None) -> list[Request]:
        prompt = self.prompt(item)
        return [
            Request(c, prompt, " " + cand, {"sentence_index": item.index, "candidate": cand})
            for c, cand in enumerate(record["candidates"] if record else [])
        ]

    def report(self, out: Path, items: Sequence[str], methods: Sequence[str]) -> dict[str, Any]:
        from marginal_core.tasks.report import mt_report

        return mt_report(out, sentences=items, methods=methods, comet=self.comet)


def run_mt(
    dataset: str,
    out: str | Path,
    *,
    lm: LM | None = None,
    candidates: int = 4,
    target_language: str | None = None,
    max_new_tokens: int | None = None,
    comet: bool = True,
    progress: ItemProgress | None = None,
    should_stop: StopCheck | None = None,
    following: Following | None = None,
    **options: Any,
) -> dict[str, Any]:
    """Generate, rerank and score a translation set into a resumable results folder.

    ``options`` are EvalOptions' fields (model, limit, samples, methods, seed, max_len, device,
    show_bar, max_items); see evaluate for the rest. Returns the report (report.mt_report).
    """
    task = MTTask(dataset, candidates, target_language, max_new_tokens, comet)
    return evaluate(task, out, EvalOptions(**options), lm=lm, progress=progress, should_stop=should_stop,
                    following=following)
