"""genlm-bytes (Vieira et al.) as a peer of our estimators, run from the bench only.

genlm-bytes is never a dependency of the project: it lives in its own virtualenv under the
cache root (``peers/genlm-venv``), built once on first use with the recipe below, and runs in a
subprocess (``genlm_runner.py``) that loads the same cached model folder as ours, float32 on CPU.
For each text it runs the byte-level beam at each width K over the lattice's bytes after our
context ids, with our vocabulary (special tokens and the byte pieces the text does not need are
unreachable), and commits every surviving state's final token. The complete tokenizations come
back and are rescored here with our scorer, so the bound is summed in float64: genlm's own
weights sum token probabilities over its trie in float32. ``prefix`` asks instead for the beam's
``logZ`` after every byte (its prefix probability), the trie's masses summed in float64.
``next_byte`` asks for ``logp_next`` after prefilling a text's bytes (genlm's float32 trie), and
``next_chars`` for a character's log probability after them (logp_next chained over its bytes).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

import numpy as np

from bench.peers.venv import PeerProcess, ensure_venv, pinned_torch
from marginal_core.estimators.marginalizer import Marginalizer
from marginal_core.lattice.graph import Lattice
from marginal_core.lattice.paths import Path as TokenPath
from marginal_core.lattice.tokenizer import TokenizerLike
from marginal_core.lattice.vocab import vocabulary
from marginal_core.models import model_cache_dir
from marginal_core.scoring.trie_scoring import score_paths

RUNNER = Path(__file__).with_name("genlm_runner.py")
CHECK = "import genlm.bytes, genlm.backend.llm"  # the venv is built when this runs


def recipe() -> list[list[str]]:
    """The pip lines that build the peer's virtualenv: genlm without its dependencies (vllm,
    bitsandbytes, accelerate, ...), then exactly what it imports on the Hugging Face CPU path,
    torch and transformers pinned to ours (a torch without a pin pulls CUDA wheels)."""
    return [
        ["--no-deps", "genlm-bytes==0.2.0", "genlm-backend==0.3.1"],
        [*pinned_torch(), f"numpy=={version('numpy')}", "scipy", "numba", "pandas", "ipython", "arsenal"],
    ]


@dataclass(frozen=True)
class PeerRun:
    """One beam width on one text: the distinct complete tokenizations and what they sum to."""

    width: int
    seconds: float
    paths: list[TokenPath]
    log_p: np.ndarray  # our float64 scores of paths
    genlm_log_w: np.ndarray  # genlm's own weights of the same paths (float32 trie sums)
    bound: float  # logsumexp of log_p over the non-canonical paths
    num_noncanonical: int


@dataclass(frozen=True)
class PeerPrefix:
    """One text at beam width K: genlm's logZ before the first byte and after each (a lower bound
    on log P(s<j), the last token free to run past j)."""

    width: int
    seconds: float
    log_z: np.ndarray


@dataclass(frozen=True)
class PeerNext:
    """genlm's next byte after a text at beam width K: P(byte) for the 256 bytes, its end of token
    and its EOS (``p``, 258 values), the seconds of prefill plus logp_next, and the beam's states."""

    width: int
    seconds: float
    p: np.ndarray
    states: int


@dataclass(frozen=True)
class PeerChars:
    """genlm's log P(c | text) for characters c at beam width K (logp_next chained over each
    character's bytes after prefilling the text's), the seconds, and the prefilled beam's states."""

    width: int
    seconds: float
    log_p: dict[bytes, float]
    states: int


def text_request(lattice: Lattice, context_ids: Sequence[int]) -> dict:
    """A request's fields for a text: the context ids, the lattice's bytes, the byte pieces it needs."""
    byte_pieces = {t for t in lattice.vocab.byte_tokens if t is not None}
    return {"context_ids": list(context_ids), "data": lattice.data.hex(),
            "byte_pieces": sorted(set(lattice.arc_token.tolist()) & byte_pieces)}


class GenlmPeer:
    """A genlm-bytes subprocess holding one model; ``run`` and ``prefix`` beam one Marginalizer's text."""

    def __init__(self, model: str, tokenizer: TokenizerLike) -> None:
        python = ensure_venv("genlm", recipe(), CHECK)
        vocab, folder = vocabulary(tokenizer), model_cache_dir(model)
        self.peer = PeerProcess("genlm", python, RUNNER)
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump({"surfaces": [None if s is None else s.hex() for s in vocab.surfaces],
                       "byte_pieces": [t for t in vocab.byte_tokens if t is not None]}, f)
        try:
            self.load_s = self._ask({"model": str(folder / "model"), "tokenizer": str(folder / "tokenizer"),
                                     "vocab": f.name})["load_s"]
        finally:
            os.unlink(f.name)

    def _ask(self, request: dict) -> dict:
        return self.peer.ask(request)

    def _text(self, m: Marginalizer) -> dict:
        """The request's fields for m's text."""
        return text_request(m.lattice, m.context_ids)

    def next_byte(self, lattice: Lattice, context_ids: Sequence[int], width: int) -> PeerNext:
        """genlm's next-byte distribution after the lattice's bytes (prefilled after the context)
        at width K, and the seconds of the prefill and logp_next."""
        reply = self._ask(text_request(lattice, context_ids) | {"next": True, "width": width})
        return PeerNext(width, reply["seconds"], np.exp(np.array(reply["log_p"])), reply["states"])

    def next_chars(self, lattice: Lattice, context_ids: Sequence[int], width: int, chars: Sequence[bytes],
                   byte_pieces: Sequence[int] = ()) -> PeerChars:
        """genlm's log P(c | the lattice's bytes) for each character c at width K: the text
        prefilled after the context, then logp_next chained over c's bytes (log P(text + c) −
        log P(text) by genlm's beam). ``byte_pieces``: byte pieces reachable beside those the text
        needs (those the characters need: a byte piece is otherwise unreachable)."""
        request = text_request(lattice, context_ids)
        request["byte_pieces"] = sorted(set(request["byte_pieces"]) | set(byte_pieces))
        reply = self._ask(request | {"chars": [c.hex() for c in chars], "width": width})
        return PeerChars(width, reply["seconds"], dict(zip(chars, reply["log_p"])), reply["states"])

    def prefix(self, m: Marginalizer, width: int) -> PeerPrefix:
        """genlm's beam over m's lattice bytes at width K: log P(s<j) for j = 0..len (float64 trie)."""
        reply = self._ask(self._text(m) | {"prefix": True, "width": width, "float64": True})
        return PeerPrefix(width, reply["seconds"], np.array(reply["log_z"]))

    def run(self, m: Marginalizer, widths: Sequence[int]) -> list[PeerRun]:
        """genlm's beam over m's text at each width, its paths rescored with our scorer."""
        lattice = m.lattice
        reply = self._ask(self._text(m) | {"widths": list(widths)})
        runs = []
        for run in reply["runs"]:
            paths = [tuple(p) for p in run["paths"]]
            wrong = [p for p in paths if lattice.path_bytes(p) != lattice.data]
            if wrong:
                raise RuntimeError(f"genlm returned {len(wrong)} paths that do not spell the text")
            log_p = score_paths(m.lm, paths, m.context_state()) if paths else np.zeros(0)
            other = np.array([p != lattice.canonical for p in paths], dtype=bool)
            bound = float(np.logaddexp.reduce(log_p[other])) if other.any() else -np.inf
            runs.append(PeerRun(run["width"], run["seconds"], paths, log_p, np.array(run["log_w"]), bound,
                                int(other.sum())))
        return runs

    def close(self) -> None:
        self.peer.close()

    def __enter__(self) -> GenlmPeer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
