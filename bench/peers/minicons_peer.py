"""minicons (Misra) as a peer of our word surprisals, run from the bench only.

minicons is never a dependency of the project: it lives in its own virtualenv under the cache root
(``peers/minicons-venv``), built once on first use with the recipe below, and runs in a subprocess
(``minicons_runner.py``) that loads the same cached model folder as ours, float32 on CPU, into its
``IncrementalLMScorer``. ``words`` scores one text with ``word_score_tokenized(bow_correction=True)``
over its whitespace words: Pimentel and Meister's (2024) word probability on the canonical
tokenization, as minicons computes it.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

from bench.peers.venv import PeerProcess, ensure_venv, pinned_torch
from marginal_core.models import model_cache_dir

RUNNER = Path(__file__).with_name("minicons_runner.py")
CHECK = "from minicons.scorer import IncrementalLMScorer"  # the venv is built when this runs


def recipe() -> list[list[str]]:
    """The pip lines that build the peer's virtualenv: minicons without its dependencies (which
    would upgrade torch and transformers), then torch and transformers pinned to ours and what
    ``minicons.scorer`` imports besides (PIL, and wonderwords through minicons.utils)."""
    return [
        ["--no-deps", "minicons==0.3.39"],
        [*pinned_torch(), f"numpy=={version('numpy')}", "pillow", "wonderwords"],
    ]


@dataclass(frozen=True)
class PeerWords:
    """minicons' words of one text and what explains where they differ from ours."""

    words: list[str]
    surprisal: list[float]  # nats, bow-corrected
    context: list[int]  # the token ids the first word is conditioned on
    pieces: list[str]  # the text each word's token span decodes to
    bow_correction: bool  # whether minicons applied the correction (a bow tokenizer)
    bow_after: list[float]  # per word, log P(the next token starts a word): minicons' forward correction


class MiniconsPeer:
    """A minicons subprocess holding one model; ``words`` scores one text."""

    def __init__(self, model: str) -> None:
        python = ensure_venv("minicons", recipe(), CHECK)
        folder = model_cache_dir(model)
        self.peer = PeerProcess("minicons", python, RUNNER)
        reply = self._ask({"model": str(folder / "model"), "tokenizer": str(folder / "tokenizer")})
        self.load_s, self.bos_token = reply["load_s"], reply["bos_token"]

    def _ask(self, request: dict) -> dict:
        return self.peer.ask(request)

    def words(self, text: str) -> PeerWords:
        """minicons' bow-corrected surprisal of each whitespace word of text."""
        return PeerWords(**self._ask({"text": text}))

    def close(self) -> None:
        self.peer.close()

    def __enter__(self) -> MiniconsPeer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
