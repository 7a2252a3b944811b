"""minicons' word surprisals with the beginning-of-word correction, run inside the peer's own virtualenv.

Standalone (it imports nothing from marginal_core): bench/peers/minicons_peer.py starts it with the
venv's python and talks JSON lines over stdin/stdout. The first line loads the model and the
tokenizer folders (float32 on the CPU) into ``IncrementalLMScorer``; every later line is one text,
answered with minicons' words (the text split on whitespace), their surprisals in nats from
``word_score_tokenized(..., bow_correction=True, surprisal=True)``, and what the bench needs to
explain a difference: the token ids minicons conditions the first word on, the text each word's
token span decodes to, and after each word log P(the next token starts a word), minicons' forward
correction.
"""

from __future__ import annotations

import json
import os
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402
from minicons.scorer import IncrementalLMScorer  # type: ignore[import-not-found]  # noqa: E402 (the peer venv only)
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402


class Peer:
    """One model in minicons' incremental scorer."""

    def __init__(self, model: str, tokenizer: str) -> None:
        torch.set_grad_enabled(False)
        hf_model = AutoModelForCausalLM.from_pretrained(model, dtype=torch.float32).eval()  # on the CPU
        self.scorer = IncrementalLMScorer(hf_model, device="cpu", tokenizer=AutoTokenizer.from_pretrained(tokenizer))
        tok = self.scorer.tokenizer
        # minicons never scores the first token (compute_stats: ``effective_ids = id[1:]``), so the
        # text must start with a BOS: ask for it (bos_token=True prepends the tokenizer's bos_token
        # string) only where the tokenizer does not add one itself
        self.bos_token = tok("x")["input_ids"][:1] != [tok.bos_token_id]

    def run(self, text: str) -> dict:
        """minicons' words and surprisals (nats) for one text, with the terms that explain them."""
        scored = self.scorer.word_score_tokenized([text], str.split, bow_correction=True, bos_token=self.bos_token,
                                                  surprisal=True)[0]
        encoded, _ = self.scorer.prepare_text([text], bos_token=self.bos_token)
        ids = encoded["input_ids"][0].tolist()
        # word_score_tokenized's own spans over ids[1:] (each word re-tokenized alone, with its leading space)
        spans = self.scorer.word_spans_tokenized([" ".join(text.split())], str.split)[0][0]
        # row r: log p of the token after ids[:r + 1]; row e is the distribution after a word's span [s, e)
        log_p = torch.log_softmax(self.scorer.model(**encoded).logits[0].double(), -1)
        bow = torch.tensor(self.scorer.bow_subword_idx)
        return {"words": [w for w, _ in scored], "surprisal": [float(s) for _, s in scored], "context": ids[:1],
                "pieces": [self.scorer.tokenizer.decode(ids[1:][s:e]) for s, e in spans],
                "bow_correction": self.scorer.is_bow_tokenizer,
                "bow_after": [log_p[e, bow].logsumexp(0).item() for _, e in spans]}


def main() -> None:
    out = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    sys.stdout = sys.stderr  # whatever the libraries print stays off the protocol
    peer: Peer | None = None
    for line in sys.stdin:
        request = json.loads(line)
        try:
            if peer is None:
                started = time.perf_counter()
                peer = Peer(request["model"], request["tokenizer"])
                reply = {"ready": True, "load_s": time.perf_counter() - started, "bos_token": peer.bos_token}
            else:
                reply = peer.run(request["text"])
        except Exception as error:  # reported to the bench, which raises it there
            reply = {"error": f"{type(error).__name__}: {error}"}
        out.write(json.dumps(reply) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
