"""What a tokenization is conditioned on (docs/design.md, point 8)."""

from __future__ import annotations

from marginal_core.ground.errors import UnrepresentableTextError
from marginal_core.lattice.tokenizer import TokenizerLike, text_tokenizer


def adds_bos(tokenizer: TokenizerLike) -> bool:
    """Whether the tokenizer puts a BOS token in front of what it encodes."""
    return text_tokenizer(tokenizer).special.adds_bos


def context_ids(tokenizer: TokenizerLike, context: str | None = None) -> list[int]:
    """Token ids every tokenization of a text is scored after.

    With a context: its canonical tokenization, after BOS where the tokenizer adds one. Without:
    BOS alone (EOS where there is no BOS), as lm-evaluation-harness does for unconditional
    log-likelihoods.
    """
    view = text_tokenizer(tokenizer)
    special = view.special
    if context:
        UnrepresentableTextError.check_unicode(context, "context")
        prefix = [special.bos_id] if special.adds_bos and special.bos_id is not None else []
        return prefix + view.encode(context)
    start = special.bos_id if special.bos_id is not None else special.eos_id
    if start is None:
        raise ValueError("the tokenizer has neither a BOS nor an EOS token to condition on")
    return [start]
