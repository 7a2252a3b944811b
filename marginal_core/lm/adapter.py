"""The LM adapter: the one object through which scoring, the proxy, the estimators and the tasks
drive a causal LM (docs/design.md, "Architecture").

It owns the device and dtype, the split of the model into decoder and LM head, the head's
chunked log-softmax in fp32 (no [rows, vocab] tensor beyond a bounded block; Gemma 3 has 262,144
outputs), the prefill of a context into a KV cache that callers share, and generation.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Sequence
from typing import Any, Protocol

import torch
from transformers import DynamicCache

from marginal_core.ground import hooks as serving_hooks
from marginal_core.ground.errors import MarginalError
from marginal_core.lm.attention import CONTIGUOUS_SDPA, FLEX_OR_SDPA, tree_kernel, use_tree_attention
from marginal_core.lm.contexts import ContextState, KeptContexts
from marginal_core.lm.oom import halved
from marginal_core.lm.refined_head import refined_logprobs


class Loaded(Protocol):
    """What the adapter reads of a loaded model (``marginal_core.models.LoadedModel``, the record
    ``load_model`` wraps in the LM it returns): its name, the transformers model, its precision and
    its tokenizers (transformers', and the lattice's view)."""

    name: str
    model: Any
    device: str
    dtype: torch.dtype

    @property
    def tokenizer(self) -> Any: ...

    @property
    def text_tokenizer(self) -> Any: ...

LOGIT_CHUNK_BYTES = 1 << 28
PREFILL_TOKENS = 1024
MASKABLE_LAYERS = {"full_attention", "sliding_attention"}


class LM:
    """A causal LM as marginal's algorithms see it: the one model type the library passes
    around (``load_model`` returns one; ``loaded`` is the record of what it loaded)."""

    def __init__(self, loaded: Loaded) -> None:
        model = loaded.model
        cfg = model.config.get_text_config()
        self.loaded, self.model, self.config = loaded, model, cfg
        self.decoder: torch.nn.Module = model.get_decoder()
        self.head: torch.nn.Module = model.get_output_embeddings()
        types = getattr(cfg, "layer_types", None)
        self.layer_types: tuple[str, ...] | None = tuple(sorted(set(types))) if types is not None else None
        self.vocab: int = self.head.weight.shape[0]
        heads = cfg.num_attention_heads
        self.layers, self.heads = cfg.num_hidden_layers, heads
        self.kv_heads: int = getattr(cfg, "num_key_value_heads", None) or heads
        self.head_dim: int = getattr(cfg, "head_dim", None) or cfg.hidden_size // heads
        self.intermediate: int = getattr(cfg, "intermediate_size", None) or 4 * cfg.hidden_size
        self.device: torch.device = next(model.parameters()).device
        self.dtype: torch.dtype = loaded.dtype  # the decoder's products (float16 runs over float32 elsewhere)
        self.head16 = _float16_head(self.head, self.dtype, self.device)
        self.head_low = _bfloat16_head(self.head, self.dtype)
        # the hidden states' and keys' dtype: float32 under split bfloat16 (models/split_bfloat16.py)
        split = self.dtype == torch.bfloat16 and model.get_input_embeddings().weight.dtype == torch.float32
        self.activation_dtype: torch.dtype = torch.float32 if split else self.dtype
        # what the weights hold on the device (head copies included): what passes may not plan on
        self.weight_bytes: int = _stored_bytes([*model.parameters(), *model.buffers(),
                                                *(h for h in (self.head16, self.head_low) if h is not None)])
        self.tree_kernel = tree_kernel()  # the kernel tree-masked passes take (lm/attention.py)
        use_tree_attention(model, self.tree_kernel)
        self.prefills = 0  # contexts prefilled so far (what the context sharing saves is visible here)
        self.contexts = KeptContexts()

    @property
    def tokenizer(self) -> Any:
        """The model's transformers tokenizer (generation, decoding; loaded on first use)."""
        return self.loaded.tokenizer

    @property
    def text_tokenizer(self) -> Any:
        """The tokenizer the lattice and the contexts are built with (no transformers needed)."""
        return self.loaded.text_tokenizer

    @property
    def name(self) -> str:
        """The model's name, as loaded."""
        return self.loaded.name

    # ---------------------------------------------------------------- sizes and checks

    @property
    def max_positions(self) -> int | None:
        """The most positions the model takes, context and text together (its context window; None
        where its config does not say)."""
        return getattr(self.config, "max_position_embeddings", None)

    @property
    def window(self) -> int | None:
        """The sliding-attention window, read from the config on each use (it may be changed)."""
        return getattr(self.config, "sliding_window", None)

    @property
    def softcap(self) -> float | None:
        """The final logit soft-cap, where the model has one."""
        return getattr(self.config, "final_logit_softcapping", None)

    @property
    def logit_dtype(self) -> torch.dtype:
        """The log-softmax's dtype: fp32, or the model's own if wider."""
        return torch.promote_types(self.dtype, torch.float32)

    def head_rows(self, max_rows: int) -> int:
        """Hidden states the LM head takes at a time: max_rows, within LOGIT_CHUNK_BYTES."""
        return max(1, min(max_rows, LOGIT_CHUNK_BYTES // (self.logit_dtype.itemsize * self.vocab)))

    def activation_bytes(self, rows: int, queries: int, keys: int) -> int:
        """Rough peak memory of one forward pass: KV cache, attention scores, MLP, masks (FlexAttention
        holds neither scores nor a dense mask)."""
        item = self.activation_dtype.itemsize
        cache = 2 * self.layers * rows * self.kv_heads * keys * self.head_dim * item
        mlp = 3 * rows * queries * self.intermediate * item
        if self.tree_kernel == "flex":
            return cache + mlp
        scores = 2 * rows * self.heads * queries * keys * 4
        masks = 2 * rows * queries * keys * item
        return cache + scores + mlp + masks

    def require_tree_masks(self) -> None:
        """Refuse attention that cannot take the tree masks the trie scorer passes."""
        impl = self.config._attn_implementation
        if impl not in ("eager", "sdpa", CONTIGUOUS_SDPA, FLEX_OR_SDPA):
            raise MarginalError(
                f"scoring passes tree attention masks, which {impl!r} attention does not take; "
                "load the model with attn_implementation='sdpa'"
            )
        if self.layer_types is not None and not set(self.layer_types) <= MASKABLE_LAYERS:
            raise MarginalError(f"scoring cannot mask attention layers of types {list(self.layer_types)}")

    @contextlib.contextmanager
    def masked_attention(self) -> Iterator[None]:
        """Decoder calls that pass tree masks run inside this: on CUDA, with SDPA's math kernel
        only, or the memory-efficient one alone where ``tree_kernel`` asks for it (lm/attention.py:
        that kernel silently miscomputed a masked pass over keys that grouped-query attention
        broadcast, pytorch/pytorch#191937; tests/library/test_cuda.py pins a sentence it miscomputed).
        FlexAttention is its own kernel."""
        if self.device.type != "cuda" or self.tree_kernel == "flex":
            yield
            return
        from torch.nn.attention import SDPBackend, sdpa_kernel

        with sdpa_kernel(SDPBackend.MATH if self.tree_kernel == "math" else SDPBackend.EFFICIENT_ATTENTION):
            yield

    def check_ids(self, ids: Sequence[int]) -> None:
        """Refuse token ids outside the model's vocabulary."""
        if len(ids) and (min(ids) < 0 or max(ids) >= self.vocab):
            raise ValueError(f"token ids must lie in [0, {self.vocab}), the model's vocabulary")

    # ---------------------------------------------------------------- the head

    def head_logits(self, hidden: torch.Tensor, scratch: dict[str, torch.Tensor]) -> torch.Tensor:
        """head(hidden) in logit_dtype, softcapped where the model caps. A float16 model on CUDA
        multiplies in float16 into float32 logits (``head16``). A bias-free linear head in
        logit_dtype writes into one block reused through ``scratch``: the caller's (one per
        call, so threads never share it), or, inside a run that takes turns, the device's one
        block, which only the unit holding the device uses (so a class's waiting runs hold
        none; ``serving_hooks.head_scratch``). A fresh block per chunk costs page faults on a CPU."""
        head = self.head
        if self.head16 is not None:
            logits = torch.mm(hidden.to(torch.float16), self.head16.T, out_dtype=torch.float32)
        elif isinstance(head, torch.nn.Linear) and head.bias is None and head.weight.dtype == self.logit_dtype:
            block = self.logit_block(scratch, len(hidden), hidden.dtype, hidden.device)
            logits = torch.matmul(hidden, head.weight.T, out=block[: len(hidden)])
        else:
            logits = head(hidden).to(self.logit_dtype)
        if self.softcap:
            logits.div_(self.softcap).tanh_().mul_(self.softcap)
        return logits

    def logit_block(self, scratch: dict[str, torch.Tensor], rows: int, dtype: torch.dtype,
                    device: torch.device) -> torch.Tensor:
        """A [>= rows, vocab] block to write logits into, kept in ``scratch`` (or, inside a run
        that takes turns, the device's: ``serving_hooks.head_scratch``) and reused."""
        scratch = serving_hooks.head_scratch(scratch)
        block = scratch.get("logits")
        if (block is None or len(block) < rows or block.shape[1] != self.vocab
                or block.dtype != dtype or block.device != device):
            scratch.pop("logits", None)  # freed before the new one is allocated
            block = scratch["logits"] = torch.empty(rows, self.vocab, dtype=dtype, device=device)
        return block

    def token_logprobs(
        self,
        hidden: torch.Tensor,
        rows: torch.Tensor,
        tokens: torch.Tensor,
        max_rows: int,
        scratch: dict[str, torch.Tensor] | None = None,
        dtype: torch.dtype | None = None,
    ) -> torch.Tensor:
        """log-softmax(head(hidden[row]))[token] for (row, token) pairs sorted by row.

        Logits and normalizers in fp32 at least; their difference in dtype (default the same).
        The head runs on at most max_rows hidden states at a time, within LOGIT_CHUNK_BYTES of
        logits; each row's logsumexp, computed in place, serves all its pairs.
        """
        scratch = {} if scratch is None else scratch
        out = torch.empty(len(rows), dtype=dtype or self.logit_dtype, device=hidden.device)
        step = self.head_rows(max_rows)
        starts = torch.arange(0, len(hidden) + step, step, device=rows.device)
        bounds = torch.searchsorted(rows, starts).tolist()
        for i, first in enumerate(range(0, len(hidden), step)):
            lo, hi = bounds[i], bounds[i + 1]
            if lo == hi:
                continue
            local = rows[lo:hi] - first
            if self.head_low is not None:  # bfloat16 products, refined in float32 (lm/refined_head.py)
                chunk = hidden[first : first + step]
                block = self.logit_block(scratch, len(chunk), self.head_low.dtype, chunk.device)
                out[lo:hi] = refined_logprobs(chunk, self.head.weight, self.head_low, local, tokens[lo:hi],  # type: ignore[arg-type]
                                              self.softcap, block).to(out.dtype)
                continue
            logits = self.head_logits(hidden[first : first + step], scratch)
            picked = logits[local, tokens[lo:hi]]
            top = logits.amax(dim=-1, keepdim=True)
            lse = top.squeeze(-1) + logits.sub_(top).exp_().sum(dim=-1).log()
            out[lo:hi] = picked.to(out.dtype) - lse[local].to(out.dtype)
        return out

    def allowed_logprobs(self, hidden: torch.Tensor, tokens: torch.Tensor, width: torch.Tensor) -> torch.Tensor:
        """Per row of hidden [R, H]: log p of each allowed token of tokens [R, A] (the first
        width[r] real, the rest padding, which gets -inf), normalized over the whole vocabulary;
        in fp64, so that renormalizing over the allowed tokens loses nothing."""
        n_rows, n_cols = tokens.shape
        rows = torch.arange(n_rows, device=hidden.device).repeat_interleave(n_cols)
        with serving_hooks.unit():
            flat = self.token_logprobs(hidden, rows, tokens.reshape(-1), n_rows, dtype=torch.float64)
        lp = flat.reshape(n_rows, n_cols)
        pad = torch.arange(n_cols, device=tokens.device)[None, :] >= width[:, None]
        return lp.masked_fill(pad, float("-inf"))

    # ---------------------------------------------------------------- contexts and generation

    def prefill(self, ids: Sequence[int], chunk_tokens: int = PREFILL_TOKENS) -> ContextState:
        """Run a context once, in chunks of chunk_tokens (halved on out-of-memory), into one
        cache that keeps every layer whole."""
        ids = tuple(int(t) for t in ids)
        if not ids:
            raise ValueError("the context is empty: condition on at least a BOS token (see context_ids)")
        self.check_ids(ids)
        tensor = torch.tensor([ids], device=self.device)
        while True:
            try:
                with torch.inference_mode():
                    cache = DynamicCache()
                    for start in range(0, len(ids), chunk_tokens):
                        with serving_hooks.unit():
                            out = self.decoder(
                                input_ids=tensor[:, start : start + chunk_tokens], cache=cache, use_cache=True
                            )
                break
            except (RuntimeError, MemoryError) as err:
                chunk_tokens = halved(chunk_tokens, err, self.device.type)
        with _LOCK:
            self.prefills += 1
        return ContextState(ids, cache, out.last_hidden_state[0, -1:], -(-len(ids) // chunk_tokens))

    def context(self, ids: Sequence[int]) -> ContextState:
        """The prefilled state of a context: one this model keeps, else a fresh prefill it keeps."""
        key = tuple(int(t) for t in ids)
        state = self.contexts.get(key)
        if state is None:
            state = self.prefill(key)
            self.contexts.put(state)
        return state

    def state_of(self, context: Sequence[int] | ContextState, chunk_tokens: int = PREFILL_TOKENS) -> ContextState:
        """A context's state: the one given (shared), else a fresh prefill of the ids (a caller
        that counts passes tells the two apart by identity)."""
        return context if isinstance(context, ContextState) else self.prefill(context, chunk_tokens)

    def is_greedy(self, context: ContextState, ids: Sequence[int]) -> bool:
        """Whether each of ids is the most probable token after the context and the ids before it
        (lm-eval's is_greedy, for this one tokenization). Most continuations fail at their first
        token, read off the context's last hidden state; the others take one pass over ids[:-1]
        on the shared context's states, which it leaves as they were."""
        ids = [int(t) for t in ids]
        self.check_ids(ids)
        with torch.inference_mode(), serving_hooks.unit():
            if self.head_logits(context.last_hidden, {}).argmax(dim=-1).tolist() != ids[:1]:
                return False
            if len(ids) == 1:
                return True
            return self.head_logits(self.hidden_after(context, ids[:-1]), {}).argmax(dim=-1).tolist() == ids[1:]

    def hidden_after(self, context: ContextState, ids: Sequence[int]) -> torch.Tensor:
        """The hidden state after each of ids, after the context: one pass over them on a copy of
        the shared context's KV, which it leaves as it was (call under inference_mode)."""
        cache = DynamicCache((layer.keys, layer.values) for layer in context.cache.layers)  # type: ignore[union-attr]
        positions = torch.arange(len(context), len(context) + len(ids), device=self.device)[None]
        out = self.decoder(input_ids=torch.tensor([list(ids)], device=self.device), position_ids=positions,
                           cache=cache, use_cache=True)
        return out.last_hidden_state[0]

    def generate(self, prompt_ids: Sequence[int], **options: object) -> list[list[int]]:
        """Continuations of a prompt (options as for transformers' ``generate``; padding with
        the tokenizer's pad token, else EOS), as lists of new token ids."""
        tok = self.tokenizer
        options.setdefault("pad_token_id", tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id)
        ids = torch.tensor([list(prompt_ids)], device=self.device)
        with torch.inference_mode(), serving_hooks.unit():
            out = self.model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), **options)
        return [row[len(prompt_ids) :].tolist() for row in out]


def _float16_head(head: torch.nn.Module, dtype: torch.dtype, device: torch.device) -> torch.Tensor | None:
    """For a float16 model on CUDA, a float16 copy of its float32 head's weight, multiplied into
    float32 logits (``torch.mm``'s out_dtype; float16 logits would round by hundredths of a nat,
    a float32 product would run the head, a large share of a Gemma's work, at a fraction of the
    rate); None elsewhere, or where this torch cannot multiply so (checked once)."""
    if not (dtype == torch.float16 and device.type == "cuda" and isinstance(head, torch.nn.Linear)
            and head.bias is None and head.weight.dtype == torch.float32):
        return None
    probe = torch.ones(1, 8, dtype=torch.float16, device=device)
    try:
        torch.mm(probe, probe.T, out_dtype=torch.float32)
    except (RuntimeError, TypeError, NotImplementedError):
        return None
    return head.weight.detach().to(torch.float16)


def _stored_bytes(tensors: Sequence[torch.Tensor]) -> int:
    """The bytes the tensors' storages hold, each storage once (a split weight is a view)."""
    storages = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in tensors}
    return sum(storages.values())


def _bfloat16_head(head: torch.nn.Module, dtype: torch.dtype) -> torch.Tensor | None:
    """For a split-bfloat16 model, a bfloat16 copy of its float32 head's weight, for the
    refined log-softmax (lm/refined_head.py); None elsewhere."""
    if not (dtype == torch.bfloat16 and isinstance(head, torch.nn.Linear) and head.bias is None
            and head.weight.dtype == torch.float32):
        return None
    return head.weight.detach().to(torch.bfloat16)


_LOCK = threading.RLock()
