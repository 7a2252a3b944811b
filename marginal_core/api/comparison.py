"""One text under two or more models, side by side: each model's figures and their difference.

log p(text) is the probability of the string, so it compares across vocabularies; log p(canonical)
is each model's score of its own tokenizer's cut, which misses a different share of each model's
mass. A model is named as the CLI's ``--model`` takes it, or ``name@dtype`` to compare one model in
two precisions (docs/design.md, "Comparing models"). The figures of one model are computed by
:func:`figures` from its Estimates, the one place the library, the CLI and the app take them from.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from marginal_core.corpus.scan_compare import flips, moves
from marginal_core.estimators.methods import Method, parse_methods
from marginal_core.ground.errors import MarginalError
from marginal_core.search.surprisal.result import bits_per_byte

if TYPE_CHECKING:
    import pandas as pd

    from marginal_core.estimators.estimate_options import EstimateOptions
    from marginal_core.estimators.estimate_result import Estimate
    from marginal_core.estimators.marginalizer import Marginalizer

DEFAULT_METHODS = ("canonical", "beam")


@dataclass(frozen=True)
class Side:
    """One model of a comparison: its name, device and precision ('auto': resolved at load)."""

    name: str
    device: str = "auto"
    dtype: str = "auto"

    @classmethod
    def parse(cls, spec: str, device: str = "auto", dtype: str = "auto") -> Side:
        """``name`` or ``name@dtype`` (the same model in two precisions compares the precisions)."""
        name, _, own = spec.strip().rpartition("@") if "@" in spec else (spec.strip(), "", "")
        if not name.strip():
            raise MarginalError(f"no model named in {spec!r}: give a name, or name@dtype")
        return cls(name.strip(), device, own.strip() or dtype)


def parse_sides(specs: str | Sequence[str], device: str = "auto", dtype: str = "auto") -> list[Side]:
    """Two or more models from a comma list (or list) of ``name`` / ``name@dtype``."""
    items = specs.split(",") if isinstance(specs, str) else list(specs)
    return [Side.parse(s, device, dtype) for s in items if s.strip()]


def labels(sides: Sequence[Side]) -> list[str]:
    """Each side's label: its name, with @dtype (and @device) where that tells two sides apart
    (MarginalError for fewer than two sides, or two the same)."""
    if len(sides) < 2:
        raise MarginalError(f"a comparison needs two models or more, got {len(sides)}: --models A,B")
    out = []
    for s in sides:
        twins = [t for t in sides if t.name == s.name]
        label = s.name
        if len(twins) > 1:
            label += f"@{s.dtype}"
            if len({t.dtype for t in twins}) < len(twins):
                label += f"@{s.device}"
        out.append(label)
    if len(set(out)) < len(out):
        raise MarginalError("two sides of the comparison are the same model, device and precision: "
                            + ", ".join(s.name for s in sides))
    return out


@dataclass(frozen=True)
class Figures:
    """One model's figures on a text: canonical tokens, the exact count of tokenizations, log
    p(canonical), the best lower bound on log p(text) (``exact`` when it is the value itself,
    else ``certified_gap`` nats at most below it; inf: not known), the mass off the canonical
    (a share of that bound), that bound in bits per byte of the text (a scale models of different
    vocabularies share) and the heaviest tokenization found, with the method that found it."""

    canonical_tokens: tuple[str, ...]
    num_paths: int
    log_p_canonical: float
    log_p_text: float
    method: str
    exact: bool
    certified_gap: float
    mass_off_canonical: float
    bits_per_byte: float
    heaviest: tuple[str, ...]
    heaviest_log_p: float

    def as_json(self) -> dict[str, Any]:
        """JSON-safe: the count as a decimal string, infinities as null."""
        from marginal_core.ground.jsonsafe import json_float

        return {"canonical_tokens": list(self.canonical_tokens), "num_paths": str(self.num_paths),
                "log_p_canonical": json_float(self.log_p_canonical), "log_p_text": json_float(self.log_p_text),
                "method": self.method, "exact": self.exact, "certified_gap": json_float(self.certified_gap),
                "mass_off_canonical": self.mass_off_canonical, "bits_per_byte": json_float(self.bits_per_byte),
                "heaviest": list(self.heaviest),
                "heaviest_log_p": json_float(self.heaviest_log_p)}


def figures(marginalizer: Marginalizer, estimates: Mapping[str, Estimate]) -> Figures:
    """A model's figures from its Estimates on one text (any methods; the best bound among the
    lower-bounding ones is log p(text); the canonical score alone where none ran)."""
    lat = marginalizer.lattice
    count = lat.count()
    lpc = marginalizer.canonical_score().log_p
    bounds = [e for e in estimates.values() if e.method.is_bound]
    best = max(bounds, key=lambda e: e.log_marginal, default=None)
    log_p_text = best.log_marginal if best is not None else lpc
    gap = min((e.certified_gap(lat) for e in bounds if e.log_marginal >= log_p_text),
              default=0.0 if count == 1 else math.inf)
    heaviest, heaviest_log_p = lat.canonical, lpc
    for e in (e for e in bounds if len(e.log_p)):
        i = int(e.log_p.argmax())
        if e.log_p[i] > heaviest_log_p:
            heaviest, heaviest_log_p = e.paths[i], float(e.log_p[i])
    return Figures(
        canonical_tokens=tuple(lat.pieces(lat.canonical)), num_paths=count, log_p_canonical=lpc, log_p_text=log_p_text,
        method=best.method.value if best is not None else Method.CANONICAL.value, exact=gap == 0.0,
        certified_gap=gap, mass_off_canonical=max(0.0, -math.expm1(lpc - log_p_text)),
        bits_per_byte=bits_per_byte(log_p_text, marginalizer.text),
        heaviest=tuple(lat.pieces(tuple(heaviest))), heaviest_log_p=heaviest_log_p)


@dataclass(frozen=True)
class Difference:
    """log p_A − log p_B by canonical and by marginal (nats), for the first two models."""

    a: str
    b: str
    canonical: float
    marginal: float

    @property
    def flips(self) -> bool:
        """Marginalizing changes which model finds the text more likely."""
        return bool(flips(self.canonical, self.marginal))

    @property
    def moved(self) -> float:
        """How far marginalizing moves the difference, in nats."""
        return self.marginal - self.canonical

    def sentence(self) -> str | None:
        """One sentence where marginalizing matters to the comparison; None where it does not."""
        if self.flips:
            return (f"Marginalizing changes which model finds the text more likely: {self._ahead(self.canonical)} by "
                    f"its canonical tokenization ({abs(self.canonical):.3f} nats), {self._ahead(self.marginal)} over all "
                    f"tokenizations ({abs(self.marginal):.3f} nats).")
        if moves(self.canonical, self.marginal):
            return (f"Marginalizing moves the difference by {self.moved:+.3f} nats: {self.canonical:+.3f} by the "
                    f"canonical tokenizations, {self.marginal:+.3f} over all tokenizations "
                    f"(log p({self.a}) − log p({self.b})).")
        return None

    def _ahead(self, d: float) -> str:
        return self.a if d > 0 else self.b

    def as_json(self) -> dict[str, Any]:
        """JSON-safe, with the sentence."""
        from marginal_core.ground.jsonsafe import json_float

        return {"a": self.a, "b": self.b, "canonical": json_float(self.canonical), "marginal": json_float(self.marginal),
                "moved": json_float(self.moved), "flips": self.flips, "sentence": self.sentence()}


def difference(a: str, fa: Figures, b: str, fb: Figures) -> Difference:
    """Model a's figures against model b's."""
    return Difference(a, b, fa.log_p_canonical - fb.log_p_canonical, fa.log_p_text - fb.log_p_text)


def run_methods(marginalizer: Marginalizer, methods: Sequence[str], options: EstimateOptions | None = None,
                progress_for: Any = None) -> dict[str, Estimate]:
    """Each method's estimate on the marginalizer's text, in the order given; ``progress_for(name)``
    gives a (progress, close) pair per method (the CLI's bars), or None for none."""
    out = {}
    for name in methods:
        progress, close = progress_for(name) if progress_for is not None else (None, lambda: None)
        try:
            out[name] = marginalizer.estimate(name, options, progress=progress)
        finally:
            close()
    return out


def compare(text: str, models: Sequence[str | Side], context: str | None = None,
            methods: str | Sequence[str] = DEFAULT_METHODS, *, options: EstimateOptions | None = None,
            device: str = "auto", dtype: str = "auto") -> pd.DataFrame:
    """The text's figures under each model: one row per model (indexed by its label), with the
    Estimates behind it in the column ``estimates``; ``frame.attrs["difference"]`` is the first
    model's against the second's. Models load and run one after the other."""
    import pandas as pd

    from marginal_core.estimators.marginalizer import Marginalizer
    from marginal_core.models import dtype_name, load_model

    names = labels(sides := [m if isinstance(m, Side) else Side.parse(m, device, dtype) for m in models])
    chosen = parse_methods(methods, allowed=[m.value for m in Method])
    rows, found = [], {}
    for label, side in zip(names, sides):
        lm = load_model(side.name, device=side.device, dtype=side.dtype)
        marginalizer = Marginalizer(lm, text, context)
        estimates = run_methods(marginalizer, chosen, options)
        found[label] = f = figures(marginalizer, estimates)
        rows.append({"model": side.name, "device": lm.loaded.device, "dtype": dtype_name(lm.dtype),
                     "canonical_tokens": len(f.canonical_tokens), "num_paths": f.num_paths,
                     "log_p_canonical": f.log_p_canonical, "log_p_text": f.log_p_text,
                     "bits_per_byte": f.bits_per_byte, "exact": f.exact,
                     "certified_gap": f.certified_gap, "mass_off_canonical": f.mass_off_canonical,
                     "heaviest": "|".join(f.heaviest), "method": f.method,
                     "seconds": sum(e.seconds for e in estimates.values()), "estimates": estimates})
    frame = pd.DataFrame(rows, index=pd.Index(names, name="label"))
    frame.attrs["difference"] = difference(names[0], found[names[0]], names[1], found[names[1]]).as_json()
    return frame
