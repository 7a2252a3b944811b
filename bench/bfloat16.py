"""bfloat16 against float32: the precision table of docs/precision.md and where the error comes from.

The table: each precision's seconds for a lattice estimate (Gemma 3, k = 300, the first three
sentences of the estimator benchmark) and its |d log marginal| against float32. Rows: float32;
``bfloat16`` as the library runs it (split products, refined head: models/split_bfloat16.py,
lm/refined_head.py); the whole model in bfloat16 (what ``bfloat16`` was); float16 (mixed).
``--where``: d log p of 30 texts (10 sentences, 20 Q&A answers after their question) against
float32 with one kind of the decoder's linear layers in plain bfloat16 at a time, the rest split,
and with every layer's weights split but not its inputs: which rounding matters.
Run: .venv/bin/python -m bench.bfloat16 [--samples 300] [--texts 3] [--device cuda] [--where]
"""

from __future__ import annotations

import argparse
import copy
import time

import torch

from bench.estimators import text_sets
from marginal_core.estimators.marginalizer import Marginalizer
from marginal_core.lm.adapter import LM
from marginal_core.models import load_model
from marginal_core.models.loading import LoadedModel
from marginal_core.models.split_bfloat16 import split_linear, split_terms

KINDS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def whole_bfloat16(f32: LM) -> LM:
    """The float32 model's copy all in bfloat16 (weights and activations)."""
    return LM(LoadedModel(name=f32.name, model=copy.deepcopy(f32.model).to(torch.bfloat16), device=f32.loaded.device,
                          dtype=torch.bfloat16))


def table(model: str, samples: int, texts: int, device: str = "cpu") -> None:
    """One row per precision: seconds per text, speed-up and max |d log marginal| against float32."""
    f32 = load_model(model, device=device, dtype="float32")
    precisions = {"float32": f32,
                  "bfloat16 (split, refined head)": load_model(model, device=device, dtype="bfloat16"),
                  "bfloat16 (whole model)": whole_bfloat16(f32),
                  "float16 (mixed)": load_model(model, device=device, dtype="float16")}
    pairs = text_sets()["sentences"][:texts]
    seconds: dict[str, list[float]] = {name: [] for name in precisions}
    logs: dict[str, list[float]] = {name: [] for name in precisions}
    for lm in precisions.values():
        Marginalizer(lm, " warm up").lattice_estimate(4, seed=0)
    for context, text in pairs:
        for name, lm in precisions.items():
            started = time.perf_counter()
            estimate = Marginalizer(lm, text, context).lattice_estimate(samples, seed=0)
            seconds[name].append(time.perf_counter() - started)
            logs[name].append(estimate.log_marginal)
    where_run = torch.cuda.get_device_name() if device == "cuda" else f"cpu, {torch.get_num_threads()} threads"
    print(f"{model}, lattice k = {samples}, {texts} sentences, {where_run}, torch {torch.__version__}")
    print("| precision | seconds per sentence | speed-up over float32 | max abs d log marginal (each sentence) |")
    print("|---|---|---|---|")
    for name in precisions:
        d = [abs(a - b) for a, b in zip(logs[name], logs["float32"])]
        speed = sum(seconds["float32"]) / sum(seconds[name])
        cells = [" / ".join(f"{s:.1f}" for s in seconds[name]), f"{speed:.2f}x",
                 "-" if name == "float32" else f"{max(d):.3f} ({' / '.join(f'{x:.3f}' for x in d)})"]
        print(f"| {name} | " + " | ".join(cells) + " |", flush=True)


def where(model: str) -> None:
    """d log p of 30 texts against float32, one rounding or one kind of layer at a time."""
    lm = load_model(model, device="cpu", dtype="float32")
    sets = text_sets()
    items = [lm.tokenizer(t)["input_ids"] for _, t in sets["sentences"]]
    items += [lm.tokenizer(f"{c or ''} {a}")["input_ids"] for c, a in sets["qa"]]
    decoder, head = lm.model.get_decoder(), lm.model.get_output_embeddings().weight
    linears = {n: m for n, m in decoder.named_modules() if isinstance(m, torch.nn.Linear)}
    own = {n: m.forward for n, m in linears.items()}
    terms = {n: split_terms(m.weight.detach()) for n, m in linears.items()}

    def forward(name: str, mode: str):
        k = linears[name].in_features
        if mode == "bfloat16":
            return lambda x: torch.nn.functional.linear(x.bfloat16(), terms[name][:, :k]).float()
        if mode == "weights split":  # the weight's two parts, the input and output rounded
            both = torch.cat([terms[name][:, :k], terms[name][:, k : 2 * k]])
            return lambda x: torch.nn.functional.linear(x.bfloat16(), both).float().unflatten(-1, (2, -1)).sum(-2)
        return lambda x: split_linear(x, terms[name])

    def log_ps() -> torch.Tensor:
        out = []
        with torch.inference_mode():
            for ids in items:
                hidden = decoder(input_ids=torch.tensor([ids])).last_hidden_state[0, :-1]
                lp = torch.log_softmax(hidden.double() @ head.double().T, dim=-1)
                out.append(lp[torch.arange(len(ids) - 1), torch.tensor(ids[1:])].sum().item())
        return torch.tensor(out, dtype=torch.float64)

    reference = log_ps()
    rules = {"every layer split": lambda n: "split", "every layer plain bfloat16": lambda n: "bfloat16",
             "weights split, inputs and outputs rounded": lambda n: "weights split"}
    rules |= {f"{kind} plain bfloat16, the rest split": (lambda n, k=kind: "bfloat16" if n.endswith(k) else "split")
              for kind in KINDS}
    print(f"{model}: d log p(text) against float32 (head float32), 10 sentences and 20 Q&A answers")
    print("| decoder's linear layers | sentences max / mean abs d | Q&A max / mean abs d |")
    print("|---|---|---|")
    for label, rule in rules.items():
        for name, module in linears.items():
            module.forward = forward(name, rule(name))
        d = (log_ps() - reference).abs()
        print(f"| {label} | {d[:10].max():.4f} / {d[:10].mean():.4f} | {d[10:].max():.4f} / {d[10:].mean():.4f} |", flush=True)
    for name, module in linears.items():
        module.forward = own[name]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="gemma3-270m")
    parser.add_argument("--samples", type=int, default=300)
    parser.add_argument("--texts", type=int, default=3)
    parser.add_argument("--where", action="store_true", help="where the error comes from, by layer kind")
    parser.add_argument("--device", default="cpu", help="cpu or cuda (the table only)")
    args = parser.parse_args()
    where(args.model) if args.where else table(args.model, args.samples, args.texts, args.device)


if __name__ == "__main__":
    main()
