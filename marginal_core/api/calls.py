"""The one-call functions of the public API (``import marginal_core as mc``): a text's estimates
under a model named by its name, and a scan of a file of texts as a DataFrame."""

from __future__ import annotations

import hashlib
import json
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from marginal_core.estimators.methods import Method, parse_methods
from marginal_core.ground.cache_home import cache_root
from marginal_core.models.registry import DEFAULT_MODEL

if TYPE_CHECKING:
    import pandas as pd

    from marginal_core.estimators.estimate_result import Estimate
    from marginal_core.lattice.graph import Lattice
    from marginal_core.lattice.tokenizer import TokenizerLike
    from marginal_core.lattice.vocab import ByteFallback
    from marginal_core.lm.adapter import LM
    from marginal_core.search.next.candidate_table import ContinuationScores
    from marginal_core.search.next.results import Continuations, NextCharacters
    from marginal_core.search.prefix import Prefix
    from marginal_core.search.surprisal.result import Surprisal


def build_lattice(text: str, tokenizer: TokenizerLike | str = DEFAULT_MODEL, *,
                  byte_fallback: ByteFallback = "unknown_chars") -> Lattice:
    """The lattice of a text under a tokenizer, or under a model's tokenizer given by the model's
    name (its light snapshot: no model loaded, no torch)."""
    from marginal_core.lattice.graph import lattice_of
    from marginal_core.models.loading import load_text_tokenizer

    return lattice_of(text, load_text_tokenizer(tokenizer) if isinstance(tokenizer, str) else tokenizer,
                      byte_fallback=byte_fallback)


def estimate(text: str, model: str | LM = DEFAULT_MODEL, methods: str | Sequence[str] = "beam",
             context: str | None = None, *, device: str | None = None, dtype: str | None = None,
             **options: Any) -> Estimate | dict[str, Estimate]:
    """The text's estimate by one method (an Estimate), or by several (a comma list or a list: a
    dict of Estimates by method, in order); options as ``Marginalizer.stream`` takes them
    (samples, seed, max_len, beam_width, ...). ``model``: a name, loaded on ``device`` in
    ``dtype`` (as the CLI's --device and --dtype; default auto), or a loaded model (``load_model``'s)."""
    from marginal_core.estimators.marginalizer import Marginalizer

    chosen = parse_methods(methods, allowed=[m.value for m in Method])
    marginalizer = Marginalizer(model, text, context, device=device, dtype=dtype)
    found = {name: marginalizer.estimate(name, **options) for name in chosen}
    single = isinstance(methods, (str, Method)) and "," not in str(methods)
    return found[chosen[0]] if single else found


def surprisal(text: str, model: str | LM = DEFAULT_MODEL, context: str | None = None, unit: str = "word",
              space: str = "trailing", method: str = "search", *, device: str | None = None,
              dtype: str | None = None, **settings: Any) -> Surprisal:
    """The text's marginal surprisal by region (``unit``: byte, char or word; ``space``: trailing
    or leading; ``method``: search or exact) beside the canonical tokenization's, as a Surprisal
    (a heat strip in a notebook; ``to_pandas()``). ``model``, ``device`` and ``dtype`` as
    :func:`estimate`'s; settings as ``Marginalizer.surprisal``."""
    from marginal_core.estimators.marginalizer import Marginalizer

    return Marginalizer(model, text, context, device=device, dtype=dtype).surprisal(unit, space, method, **settings)


def prefix(text: str, model: str | LM = DEFAULT_MODEL, context: str | None = None, *, device: str | None = None,
           dtype: str | None = None, **settings: Any) -> Prefix:
    """The text as a prefix under the model, a state to ask and extend: ``logp_next()`` (the next
    byte, 257 log probabilities with their intervals), ``log_prob()``, ``next_characters(k)``,
    ``surprisal(unit)``, ``continue_text(chars)`` and ``p + "more"``. ``model``, ``device`` and
    ``dtype`` as :func:`estimate`'s; settings: tolerance, time_budget, max_rows, budget,
    kv_bytes, should_stop, progress (``SearchSettings``)."""
    from marginal_core.estimators.marginalizer import model_of
    from marginal_core.search.prefix import prefix_of

    return prefix_of(model_of(model, device, dtype), text, context, **settings)


def next_characters(prompt: str, model: str | LM = DEFAULT_MODEL, context: str | None = None, k: int = 10, *,
                    device: str | None = None, dtype: str | None = None, **settings: Any) -> NextCharacters:
    """The k most probable next characters after the prompt (its trailing whitespace included),
    over every tokenization with the interval the search certifies, beside the canonical tokens'
    view (what ``generate`` samples from) and token healing's (a table in a notebook;
    ``to_pandas()``). ``model``, ``device`` and ``dtype`` as :func:`estimate`'s; settings:
    tolerance, time_budget, should_stop, progress."""
    from marginal_core.estimators.marginalizer import model_of
    from marginal_core.search.prefix import next_characters_stream

    stream = next_characters_stream(model_of(model, device, dtype), prompt, context, k, **settings)
    return deque(stream, maxlen=1).pop()


def score_continuations(prompt: str, candidates: Sequence[str], model: str | LM = DEFAULT_MODEL,
                        context: str | None = None, *, device: str | None = None, dtype: str | None = None,
                        **settings: Any) -> ContinuationScores:
    """How likely each candidate continuation is after the prompt (at most 100, none empty,
    whitespace kept): the marginal log P(candidate | prompt) over every tokenization of prompt +
    candidate, with its certified interval, beside lm-eval ``hf``'s score of the pair (which cuts
    the joined encoding at the prompt's token count, and fails where that leaves no tokens), each
    candidate's rank under both and where a token crosses the seam (a table in a notebook;
    ``to_pandas()``, ``to_json()``). The candidates share the prompt's search. ``model``,
    ``device`` and ``dtype`` as :func:`estimate`'s; settings as :func:`prefix`'s."""
    from marginal_core.estimators.marginalizer import model_of
    from marginal_core.search.next.candidate_table import check_candidates
    from marginal_core.search.prefix import prefix_of

    check_candidates(candidates)  # before the model loads
    return prefix_of(model_of(model, device, dtype), prompt, context, **settings).score_continuations(candidates)


def continue_text(prompt: str, model: str | LM = DEFAULT_MODEL, context: str | None = None, chars: int = 20,
                  how: str = "greedy", seed: int | None = None, *, device: str | None = None,
                  dtype: str | None = None, **settings: Any) -> Continuations:
    """The prompt continued ``chars`` characters from the marginal (``how``: greedy or sample, with
    ``seed``), beside transformers' generate from the canonical tokens and from token healing with
    the same settings, each character with its probability."""
    from marginal_core.estimators.marginalizer import model_of
    from marginal_core.search.prefix import continuations_stream

    stream = continuations_stream(model_of(model, device, dtype), prompt, context, chars, how, seed, **settings)
    return deque(stream, maxlen=1).pop()


def scan(file: str | Path, models: str | Sequence[str] = DEFAULT_MODEL, methods: str | Sequence[str] = "canonical,beam",
         *, out: str | Path | None = None, surprisal: str | None = None, space: str = "trailing",
         bits: bool = False, time_budget: float | str | None = None, **options: Any) -> pd.DataFrame:
    """`marginal scan` as a function: every text of a .txt, .jsonl or .csv file under each model,
    kept in the results folder ``out`` (resumable; default a folder under the cache named by the
    file and the settings), returned as the tidy table (a row per text x model x method, with
    each estimate's heaviest tokenization). Ctrl-C stops it and returns what finished. With
    ``surprisal`` (byte, char or word; ``space``: trailing or leading; ``bits``: its surprisals
    and entropy in bits) the folder also gets surprisal.csv, a row per text, model and region,
    returned as ``attrs["surprisal"]`` (``attrs["folder"]`` is the folder); each text's search
    within ``time_budget`` (seconds; "auto": the CLI's default stop; None: until certified).
    Options: samples, seed, max_len, limit, device, dtype, beam_width (None: the anytime beam)."""
    import pandas as pd

    from marginal_core.corpus.scan import run_scan
    from marginal_core.corpus.scan_surprisal import Cut
    from marginal_core.tasks.options import EvalOptions

    names = [models] if isinstance(models, str) else list(models)
    names = [m.strip() for n in names for m in n.split(",") if m.strip()]
    settings = {"samples": 100, "beam_width": None, **options, "methods": methods}
    folder = Path(out) if out is not None else _default_folder(Path(file), names, settings)
    found, _, _ = run_scan(file, folder, names, EvalOptions(**settings),
                           surprisal=Cut(surprisal, space, bits) if surprisal is not None else None,
                           time_budget=time_budget)  # type: ignore[arg-type]  # checked by run_scan
    table = pd.read_csv(Path(found["out"]) / "scan.csv")
    table.attrs["folder"] = str(found["out"])
    if surprisal is not None:  # a row per text, model and region, beside the tidy table
        table.attrs["surprisal"] = pd.read_csv(Path(found["out"]) / "surprisal.csv")
    return table


def _default_folder(file: Path, models: list[str], settings: dict[str, Any]) -> Path:
    """A scan's folder under the cache, named by the file and a hash of its path, models and settings."""
    key = json.dumps([str(file.resolve()), models, settings], sort_keys=True, default=str)
    return cache_root() / "scans" / f"{file.stem}-{hashlib.sha1(key.encode()).hexdigest()[:10]}"
