"""bench.next_chars' prompts and runs: the lesson's and the scripts' prompts, one prompt's stream
under one model beside its token views, and genlm-bytes' answers kept in a cache that processes share."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench.peers.genlm_peer import GenlmPeer, PeerNext
from bench.support.scripts import script_prompts
from marginal_core.lattice.conditioning import context_ids
from marginal_core.lattice.graph import lattice_of
from marginal_core.lattice.vocab import vocabulary
from marginal_core.lm.adapter import LM
from marginal_core.search.char_keys import healed_masses, key_groups, key_masses
from marginal_core.search.next.results import NextCharacters
from marginal_core.search.prefix import next_characters_stream
from marginal_core.search.token_views import token_views

# (kind, prompt): the lesson's kinds, then sentences of bench/compare_sentences.txt cut mid-word
# or after a space

# (kind, prompt): the lesson's kinds, then sentences of bench/compare_sentences.txt cut mid-word
# or after a space
PROMPTS: list[tuple[str, str]] = [
    ("space", "The capital of France is "),
    ("space", "My favourite colour is "),
    ("mid-word", "The capital of Fra"),
    ("mid-word", "She plays the vio"),
    ("URL", "Visit https:"),
    ("URL", "See http://www."),
    ("code", "def add(a, b):\n    "),
    ("code", "for i in range(10):\n    "),
    ("number", "pi is 3.14"),
    ("number", "The year was 19"),
    ("non-English", "Die Hauptstadt von Deutschland ist "),
    ("non-English", "Né à Pa"),
    ("non-English", "La capitale de l'Ita"),
    ("bench, mid-word", "Visit https://example.org/docs/getting-sta"),
    ("bench, space", "Dr. Nakamura's 2019 paper on CRISPR-Cas9 off-target effects was cited "),
    ("bench, mid-word", "The invoice #INV-20931 totals $4,375.60, payable to Mül"),
    ("bench, mid-word", "Run pip install --upgrade numpy==1.26.4 before calling np.linalg.ei"),
    ("bench, space", "Tchaikovsky's Piano Concerto No. 1 in B-flat minor, Op. "),
]


LESSON = {"space", "mid-word", "URL", "code", "number", "non-English"}


SHORT = 30  # bytes: the prompts that should certify within a second


TOP = 5


WARM_UP = "A warm-up prompt "


@dataclass(frozen=True)
class Run:
    """One prompt under one model: the stream's results (each with its seconds), the token views'
    most probable next characters, and genlm's next byte (None without the peer)."""

    kind: str
    prompt: str
    model: str
    results: list[NextCharacters]
    canonical_top: bytes
    healed_top: bytes
    peer: PeerNext | None
    peer_chars: dict[bytes, float] | None = None  # genlm's log P(character | prompt), whole characters

    @property
    def final(self) -> NextCharacters:
        return self.results[-1]


def view_tops(lm: LM, prompt: str) -> tuple[bytes, bytes]:
    """The most probable next character under the canonical tokens and under token healing (b"": none)."""
    vocab = vocabulary(lm.text_tokenizer)
    state = lm.context(context_ids(lm.text_tokenizer, None))
    views = token_views(lm, state, lattice_of(prompt, lm.text_tokenizer).canonical, vocab)
    groups = key_groups(vocab, lm.vocab)
    canonical = key_masses(views.canonical, groups)
    healed = healed_masses(vocab, groups, views.tail, views.before, views.heads)
    return canonical.top(), healed.top()


def run_prompt(lm: LM, kind: str, prompt: str, cap: float, k: int = 10) -> Run:
    """The stream over one prompt (capped; its last result is ``next_characters(prompt, lm, k=k)``'s)
    and its token views' tops."""
    results = list(next_characters_stream(lm, prompt, k=k, time_budget=cap))
    canonical_top, healed_top = view_tops(lm, prompt)
    return Run(kind, prompt, lm.name, results, canonical_top, healed_top, None)


class PeerCache:
    """genlm's next bytes by (model, prompt, K), kept in a JSON-lines file that several bench
    processes share (one may run genlm on the long prompts while another runs ours), the peer
    started only when a prompt is missing."""

    def __init__(self, path: Path | None, lm: LM, width: int) -> None:
        self.path, self.lm, self.width = path, lm, width
        self.peer: GenlmPeer | None = None

    def lines(self) -> list[dict]:
        """The file's lines for this model and width."""
        if self.path is None or not self.path.exists():
            return []
        lines = [json.loads(line) for line in self.path.read_text(encoding="utf-8").splitlines() if line.strip()]
        return [x for x in lines if x["model"] == self.lm.name and x["width"] == self.width]

    def found(self) -> dict[str, PeerNext]:
        """The file's next-byte results for this model and width, by prompt."""
        return {x["prompt"]: PeerNext(x["width"], x["seconds"], np.array(x["p"]), x["states"])
                for x in self.lines() if "p" in x}

    def _peer(self) -> GenlmPeer:
        if self.peer is None:
            self.peer = GenlmPeer(self.lm.name, self.lm.text_tokenizer)
        return self.peer

    def chars(self, prompt: str, chars: Sequence[bytes]) -> dict[bytes, float]:
        """genlm's log P(c | prompt) for each character c (its bytes): from the file, else run (the
        missing ones, kept in the file); byte pieces reachable where the prompt or c needs them."""
        known: dict[bytes, float] = {}
        for x in self.lines():
            if x.get("prompt") == prompt and "chars" in x:
                known |= {bytes.fromhex(c): float(v) for c, v in x["chars"].items()}
        missing = [c for c in dict.fromkeys(chars) if c not in known]
        if missing:
            tok = self.lm.text_tokenizer
            pieces = {t for t in lattice_of(prompt, tok).vocab.byte_tokens if t is not None}
            needed = {int(t) for c in missing for t in lattice_of(prompt + c.decode("utf-8"), tok).arc_token} & pieces
            out = self._peer().next_chars(lattice_of(prompt, tok), context_ids(tok, None), self.width, missing,
                                          sorted(needed))
            known |= out.log_p
            if self.path is not None:
                with self.path.open("a", encoding="utf-8") as f:
                    f.write(json.dumps({"model": self.lm.name, "prompt": prompt, "width": out.width,
                                        "seconds": out.seconds, "states": out.states,
                                        "chars": {c.hex(): v for c, v in out.log_p.items()}}) + "\n")
        return {c: known[c] for c in chars}

    def next_byte(self, prompt: str) -> PeerNext:
        """genlm's next byte after the prompt: from the file, else run (and kept in the file)."""
        if prompt in (known := self.found()):
            return known[prompt]
        tok = self.lm.text_tokenizer
        out = self._peer().next_byte(lattice_of(prompt, tok), context_ids(tok, None), self.width)
        if self.path is not None:
            with self.path.open("a", encoding="utf-8") as f:
                f.write(json.dumps({"model": self.lm.name, "prompt": prompt, "width": out.width,
                                    "seconds": out.seconds, "p": out.p.tolist(), "states": out.states}) + "\n")
        return out

    def close(self) -> None:
        if self.peer is not None:
            self.peer.close()


def cpu_model() -> str:
    """lscpu's model name."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return next((line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("Model name")), "unknown")


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def chosen_prompts(which: str) -> list[tuple[str, str]]:
    """The (kind, prompt) pairs: the lesson's and the bench's (lesson), bench/next_scripts.tsv's
    (scripts, the kind a script), or a file of the same form."""
    if which == "lesson":
        return PROMPTS
    return script_prompts() if which == "scripts" else script_prompts(Path(which))
