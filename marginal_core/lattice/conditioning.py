"""What a tokenization is conditioned on (docs/design.md, point 8), and how lm-evaluation-harness
splits and encodes a (context, continuation) pair (docs/design.md, "lm-eval")."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

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


def split_pair(context: str, continuation: str) -> tuple[str | None, str]:
    """lm-eval's (context, continuation) split: trailing whitespace of the context moves to the
    continuation; an empty context is None (conditioned on BOS alone)."""
    stripped = context.rstrip()
    return (stripped or None), context[len(stripped):] + continuation


@dataclass(frozen=True)
class HarnessPair:
    """How lm-evaluation-harness's ``hf`` model encodes a (context, continuation) pair (its
    ``loglikelihood`` and ``_encode_pair``): ``context``, the ids it conditions on; ``whole``, the
    encoding of context + continuation it cuts at the context's length; ``own``, the continuation
    (after the whitespace moved to it) encoded on its own, as the ``canonical`` method scores it."""

    context: tuple[int, ...]
    whole: tuple[int, ...]
    own: tuple[int, ...]

    @property
    def continuation(self) -> tuple[int, ...]:
        """The ids lm-eval scores: the whole encoding past the context encoding's length (empty
        where a token crosses the seam and swallows the continuation: lm-eval's assertion fails)."""
        return self.whole[len(self.context):]

    @property
    def crosses(self) -> bool:
        """Whether lm-eval's split differs from the context's encoding followed by the
        continuation's own: a token of the whole encoding crosses the seam."""
        return self.whole != self.context + self.own


def harness_pair(tokenizer: TokenizerLike, context: str, continuation: str,
                 start: Sequence[int] | None = None) -> HarnessPair:
    """lm-eval ``hf``'s encoding of the pair. An empty context is its prefix token (BOS, else EOS)
    with the continuation encoded alone; otherwise the context's trailing whitespace moves to the
    continuation (``split_pair``), and the context and context + continuation are encoded whole
    with the tokenizer's own special tokens (BOS where it adds one). ``start``: ids in place of
    those special tokens (a text before the pair, as its ``context_ids``). Encoding is the
    canonical tokenization's (special-token strings read as text)."""
    view = text_tokenizer(tokenizer)
    if not context:
        head = list(start) if start is not None else context_ids(tokenizer, None)
        own = view.encode(continuation)
        return HarnessPair(tuple(head), tuple(head + own), tuple(own))
    stripped, moved = split_pair(context, continuation)
    special = view.special
    if start is not None:
        head = list(start)
    else:
        head = [special.bos_id] if special.adds_bos and special.bos_id is not None else []
    own = view.encode(moved)
    context_enc = head + (view.encode(stripped) if stripped else [])
    return HarnessPair(tuple(context_enc), tuple(head + view.encode((stripped or "") + moved)), tuple(own))
