"""What a tokenization is conditioned on (DESIGN.md point 8)."""

from __future__ import annotations

from transformers import PreTrainedTokenizerBase

from marginal_core.lattice import canonical_ids


def adds_bos(tokenizer: PreTrainedTokenizerBase) -> bool:
    """Whether the tokenizer puts a BOS token in front of what it encodes."""
    bos = tokenizer.bos_token_id
    return bos is not None and tokenizer("a")["input_ids"][:1] == [bos]


def context_ids(tokenizer: PreTrainedTokenizerBase, context: str | None = None) -> list[int]:
    """Token ids every tokenization of a text is scored after.

    With a context: its canonical tokenization, after BOS where the tokenizer adds one. Without:
    BOS alone (EOS where there is no BOS), as lm-evaluation-harness does for unconditional
    log-likelihoods.
    """
    if context:
        prefix = [tokenizer.bos_token_id] if adds_bos(tokenizer) else []
        return prefix + canonical_ids(tokenizer, context)
    start = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
    if start is None:
        raise ValueError("the tokenizer has neither a BOS nor an EOS token to condition on")
    return [start]
