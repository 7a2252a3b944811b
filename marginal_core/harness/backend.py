"""The ``marginal`` model of lm-evaluation-harness: log-likelihoods are log marginals.

``loglikelihood`` returns, for each (context, continuation) request, the log marginal of the
continuation given the context by one method (canonical, lattice, beam or proxy), so every
multiple-choice task of lm-eval ranks its choices by marginals. The requests of one context
share its KV (one prefill per distinct context). ``loglikelihood_rolling`` is the log marginal
of the whole text after BOS (no rolling windows: the text must fit the model's window), and
``generate_until`` is greedy generation through the LM adapter.

``method=prefix`` has no seam: log P(continuation | context) = log P(context + continuation as a
prefix) − log P(context as a prefix), over every tokenization of the two joined (the prefix
search, ``mc.prefix``; after BOS, nothing moved), each continuation extending its context's
state; is_greedy says whether the greedy character continuation from the marginal writes the
continuation, and ``loglikelihood_rolling`` is log P(text as a prefix). ``time_budget`` bounds
each search (seconds, "auto": the default stop, or "none").

The tokenization convention is lm-eval's (docs/design.md, "lm-eval"): trailing whitespace of the
context moves to the continuation; a non-empty context is BOS (where the tokenizer adds one) plus
its tokens, an empty one is BOS (EOS where there is none); the continuation is tokenized on its
own, which is lm-eval's split wherever no token crosses the seam.

Data parallelism is lm-eval's own: under ``accelerate launch`` (or torchrun) each process takes
its shard of the requests and lm-eval gathers the results through this model's collectives.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import lm_eval.models  # noqa: F401  (lm-eval's own models first: a registry that is not empty skips them)
from lm_eval.api.model import LM as HarnessLM
from lm_eval.api.registry import register_model
from tqdm import tqdm

from marginal_core.estimators.beam_width import DEFAULT_BEAM_WIDTH, parse_width
from marginal_core.estimators.methods import TASK_METHODS
from marginal_core.ground.errors import MarginalError
from marginal_core.lattice.conditioning import context_ids, split_pair
from marginal_core.search.settings import AUTO, TimeBudget, check_time_budget, parse_time_budget
from marginal_core.tasks.options import EvalOptions

if TYPE_CHECKING:
    from marginal_core.search.prefix import Prefix

PREFIX = "prefix"  # the method of the joined marginal (module docstring): not a Marginalizer's
MODEL_ARGS = ("model", "method", "samples", "beam_width", "max_len", "seed", "dtype", "device", "time_budget")
"""What --model_args may set (``pretrained`` is taken as ``model``, as for lm-eval's hf)."""
HARNESS_ARGS = ("batch_size", "max_batch_size")
"""What lm-eval itself passes to every model; the estimators batch by context, so unused."""
DEFAULT_GEN_TOKENS = 256


@register_model("marginal")
class MarginalLM(HarnessLM):
    """lm-eval's LM whose log-likelihoods are marginals over tokenizations (module docstring)."""

    def __init__(
        self,
        model: str | None = None,
        method: str = "canonical",
        samples: int = 100,
        beam_width: int = DEFAULT_BEAM_WIDTH,
        max_len: int | None = None,
        seed: int = 0,
        dtype: str = "auto",
        device: str | None = None,
        time_budget: TimeBudget | str = AUTO,
        **kwargs: Any,
    ) -> None:
        super().__init__()
        model = kwargs.pop("pretrained", model)
        unknown = sorted(k for k in kwargs if k not in HARNESS_ARGS)
        if unknown:
            raise MarginalError(
                f"unknown model argument(s) {', '.join(unknown)} for --model marginal; "
                f"accepted: {', '.join(MODEL_ARGS)}"
            )
        choices = ", ".join([*TASK_METHODS, PREFIX])
        if "," in str(method):
            raise MarginalError(f"--model marginal runs one method, not {method!r}; choose from {choices}")
        if str(method) not in (*TASK_METHODS, PREFIX):
            raise MarginalError(f"unknown method {method!r} for --model marginal; choose from {choices}")
        options = EvalOptions(samples=int(samples), methods="canonical" if method == PREFIX else str(method),
                              seed=int(seed), beam_width=parse_width(beam_width),
                              max_len=None if max_len in (None, "", "None") else int(max_len))  # checked as a task's
        self.method = PREFIX if method == PREFIX else options.methods[0]
        self.time_budget = parse_time_budget(time_budget) if isinstance(time_budget, str) else check_time_budget(time_budget)
        self.samples, self.seed, self.max_len, self.beam_width = options.samples, options.seed, options.max_len, \
            options.beam_width
        device = self._distribute(device)

        from marginal_core.models import DEFAULT_MODEL, dtype_name, load_model

        self.lm = load_model(model or DEFAULT_MODEL, device=device, dtype=dtype)
        self._device = self.lm.loaded.device
        self.dtype_name = dtype_name(self.lm.dtype)
        self.scored = 0  # requests scored by this process (those a cache answered are not)
        print(f"marginal: {self.lm.name} on {self._device} in {self.dtype_name} (dtype={dtype}), "
              f"method {self.method}", file=sys.stderr)

    def get_model_info(self) -> dict[str, Any]:
        """What lm-eval records beside the results (its config section): where the model ran and
        in which dtype ``auto`` resolved to, so that two machines' figures can be told apart."""
        return {"model_name": self.lm.name, "model_device": str(self._device),
                "model_dtype": self.dtype_name, "method": self.method}

    @classmethod
    def create_from_arg_string(cls, arg_string: str, additional_config: dict | None = None) -> MarginalLM:
        from lm_eval.utils import simple_parse_args_string

        return cls.create_from_arg_obj(simple_parse_args_string(arg_string), additional_config)

    @classmethod
    def create_from_arg_obj(cls, arg_dict: dict[str, Any], additional_config: dict | None = None) -> MarginalLM:
        """The model from --model_args and lm-eval's own settings; a device in --model_args wins
        over --device (whose default, cuda:0, lm-eval always passes)."""
        harness = {k: v for k, v in (additional_config or {}).items() if v is not None}
        return cls(**{**harness, **arg_dict})

    def _distribute(self, device: str | None) -> str | None:
        """Join lm-eval's data parallelism when launched with several processes (accelerate,
        torchrun): rank and world size from the process group, each process on its own device
        (lm-eval passes --device, cuda:0 by default, to every process alike)."""
        from accelerate import Accelerator

        accelerator = Accelerator()
        if accelerator.num_processes <= 1:
            return _available(device)
        self.accelerator = accelerator
        self._rank, self._world_size = accelerator.process_index, accelerator.num_processes
        if accelerator.device.type == "cpu":
            return "cpu"
        return str(accelerator.device)  # this process's GPU, whatever --device says (as lm-eval's hf)

    # ---------------------------------------------------------------- lm-eval's collectives

    def all_gather(self, tensor: Any) -> Any:
        return tensor if self.world_size <= 1 else self.accelerator.gather(tensor)

    def gather_object(self, obj: Any, dst: int = 0) -> list[Any] | None:
        if self.world_size <= 1:
            return [obj]
        import torch.distributed

        out = [None] * self.world_size if self.rank == dst else None
        torch.distributed.gather_object(obj, out, dst=dst)
        return out

    def barrier(self) -> None:
        if self.world_size > 1:
            self.accelerator.wait_for_everyone()

    @property
    def tokenizer_name(self) -> str:
        return str(self.lm.name).replace("/", "__")

    # ---------------------------------------------------------------- requests

    def _marginals(self, pairs: Sequence[tuple[str | None, str]], what: str, disable_tqdm: bool,
                   greedy: bool = False) -> Iterator[tuple[int, float, bool]]:
        """(index, log marginal, is_greedy) of each (context, continuation) as it is scored,
        grouped by context so that each distinct context is prefilled once. is_greedy is checked
        (on the canonical tokenization, as lm-eval's hf does) only where asked, else False."""
        if self.method == PREFIX:
            yield from self._joined(pairs, what, disable_tqdm, greedy)
            return
        from marginal_core.estimators.marginalizer import by_context

        lm = self.lm
        with tqdm(total=len(pairs), desc=f"marginal {self.method} {what}", disable=disable_tqdm or self.rank != 0) as bar:
            for i, m in by_context(lm, pairs):
                est = m.estimate(self.method, samples=self.samples, max_len=self.max_len, seed=self.seed,
                                 beam_width=self.beam_width)
                is_greedy = greedy and lm.is_greedy(m.context_state(), m.lattice.canonical)
                self.scored += 1
                bar.update(1)
                yield i, float(est.log_marginal), is_greedy

    def _joined(self, pairs: Sequence[tuple[str | None, str]], what: str, disable_tqdm: bool,
                greedy: bool) -> Iterator[tuple[int, float, bool]]:
        """method=prefix's (index, log P(continuation | context) over every tokenization of the two
        joined, is_greedy), a context's state searched once and each continuation extending it."""
        from marginal_core.search.prefix import prefix_of

        groups: dict[str, list[int]] = defaultdict(list)
        for i, (context, _) in enumerate(pairs):
            groups[context or ""].append(i)
        with tqdm(total=len(pairs), desc=f"marginal prefix {what}", disable=disable_tqdm or self.rank != 0) as bar:
            for context, indices in groups.items():
                p = prefix_of(self.lm, context, None, time_budget=self.time_budget)
                base = p.log_prob().value
                written = greedy_written(p, [pairs[i][1] for i in indices]) if greedy else set()
                for i in indices:
                    continuation = pairs[i][1]
                    value = (p + continuation).log_prob().value - base
                    self.scored += 1
                    bar.update(1)
                    yield i, value, continuation in written

    def _answer(self, requests: list[Any], pairs: Sequence[tuple[str | None, str]], what: str,
                disable_tqdm: bool, result: Callable[[float, bool], Any], greedy: bool = False) -> list[Any]:
        """Each request's result, handed to lm-eval's cache as soon as it is scored, so that a
        run restarted with --use_cache recomputes only what an interrupted one had not finished."""
        out: list[Any] = [None] * len(requests)
        for i, value, is_greedy in self._marginals(pairs, what, disable_tqdm, greedy):
            out[i] = result(value, is_greedy)
            self.cache_hook.add_partial(what, requests[i].args, out[i])
        return out

    def loglikelihood(self, requests: list[Any], disable_tqdm: bool = False) -> list[tuple[float, bool]]:
        """(log marginal, is_greedy) per request. is_greedy, which tasks such as LAMBADA score, is
        whether greedy decoding produces the continuation's canonical tokenization, as with hf:
        the question of which continuation the model generates is the same for every method."""
        pairs = [tuple(req.args) if self.method == PREFIX else split_pair(*req.args) for req in requests]
        return self._answer(requests, pairs, "loglikelihood", disable_tqdm, lambda v, g: (v, g), greedy=True)

    def loglikelihood_rolling(self, requests: list[Any], disable_tqdm: bool = False) -> list[float]:
        """The log marginal of each whole text after BOS; a text longer than the model's window is
        refused (ContextWindowError) rather than cut into rolling windows."""
        pairs = [(None, req.args[0]) for req in requests]
        return self._answer(requests, pairs, "loglikelihood_rolling", disable_tqdm, lambda v, _: float(v))

    def generate_until(self, requests: list[Any], disable_tqdm: bool = False) -> list[str]:
        """Greedy continuations through the LM adapter, cut at the first stop string (``until``)
        and at ``max_gen_toks`` tokens; sampling options are refused."""
        lm = self.lm
        out = []
        for req in tqdm(requests, desc="marginal generate_until", disable=disable_tqdm or self.rank != 0):
            context, options = req.args[0], dict(req.args[1] or {})
            if options.pop("do_sample", False):
                raise MarginalError("--model marginal generates greedily; do_sample is not supported")
            until = options.pop("until", None) or []
            until = [until] if isinstance(until, str) else list(until)
            max_tokens = int(options.pop("max_gen_toks", DEFAULT_GEN_TOKENS))
            ids = lm.generate(context_ids(lm.tokenizer, context), max_new_tokens=max_tokens, do_sample=False)[0]
            text = lm.tokenizer.decode(ids, skip_special_tokens=True)
            for stop in until:
                text = text.split(stop)[0] if stop else text
            self.cache_hook.add_partial("generate_until", req.args, text)
            out.append(text)
        return out


def greedy_written(p: Prefix, continuations: Sequence[str]) -> set[str]:
    """The continuations the greedy character continuation from the marginal after ``p`` writes,
    read a character at a time and stopped once it has left every one."""
    from marginal_core.search.next.continuations import greedy_characters

    alive, text, written = {c for c in continuations if c}, "", set()
    for character in greedy_characters(p) if alive else ():
        text += character
        written |= {c for c in alive if c == text}
        alive = {c for c in alive if c != text and c.startswith(text)}
        if not alive:
            break
    return written


def _available(device: str | None) -> str | None:
    """The device asked for, or None (the best available) for a CUDA device on a machine without
    CUDA, as lm-eval's hf backend does with its --device default."""
    if device is not None and device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            return None
    return device
