"""An :class:`Estimate`: one method's estimate with every sample behind it, its run's state, and
the tables and figures read from it; its :class:`Source` names what it was computed from
(docs/design.md, "The estimators"). Made by ``marginal_core.estimators.marginalizer``; no torch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np

from marginal_core.estimators.beam_width import Round
from marginal_core.estimators.methods import Method
from marginal_core.estimators.run_state import BeamRun, RunState
from marginal_core.ground.errors import MarginalError
from marginal_core.ground.jsonsafe import json_float
from marginal_core.lattice.graph import Lattice
from marginal_core.lattice.paths import PathBatch

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True, eq=False)
class Source:
    """What an Estimate was computed from, for its displays: the model's name, precision and
    device, the context, and the text's lattice (the Marginalizer's own, shared, not copied)."""

    model: str
    dtype: str
    device: str
    context: str | None
    lattice: Lattice

    def __repr__(self) -> str:
        """One short line (the lattice stays out of it)."""
        return f"Source({self.model}, {self.dtype}, {self.device})"


@dataclass(frozen=True, eq=False)
class Estimate:
    """One method's estimate with every sample behind it, in sample order, and its run's state.

    ``running`` is the non-canonical log estimate after each sample. Marginals are natural
    logs; -inf means no mass found (no non-canonical path, or the canonical method). ``source``
    (set by the Marginalizer) names the model and holds the lattice its displays decode with.
    """

    method: Method
    log_p_canonical: float
    log_noncanonical: float
    paths: PathBatch
    kinds: np.ndarray
    log_p: np.ndarray
    log_q: np.ndarray | None
    running: np.ndarray
    seconds: float
    forward_passes: int
    run: RunState
    num_paths: int | None = None
    source: Source | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "method", Method.parse(self.method))  # a name given as a string

    def __repr__(self) -> str:
        """One short line (the arrays stay out of a table's cell or a notebook's output)."""
        sign = "≈" if not self.method.is_bound else "=" if self.certified_gap() == 0 else "≥"
        state = "" if self.run.done else f", {'stopped' if self.run.cancelled else 'running'}"
        return (f"Estimate({self.method.value}: log p(text) {sign} {self.log_marginal:.3f}, "
                f"{self.num_distinct:,} paths, {self.seconds:.2f} s{state})")

    def _lattice(self, lattice: Lattice | None) -> Lattice | None:
        """The lattice given, else the source's (None where neither is known)."""
        return lattice if lattice is not None else self.source.lattice if self.source is not None else None

    def _known_lattice(self, lattice: Lattice | None) -> Lattice:
        """The lattice given, else the source's; an error where neither is known."""
        lattice = self._lattice(lattice)
        if lattice is None:
            raise MarginalError("this Estimate was not made by a Marginalizer, so it knows no lattice: pass lattice=")
        return lattice

    def distinct_paths(self) -> pd.DataFrame:
        """One row per distinct path, in sample order: ids, kind, log p, log q (NaN where unknown)
        and how often it was drawn."""
        import pandas as pd

        frame = pd.DataFrame({"ids": self.paths.tolist(), "kind": self.kinds, "log_p": self.log_p,
                              "log_q": self.log_q if self.log_q is not None else np.nan})
        counts = frame.groupby("ids", sort=False).size().rename("draws")
        return frame.drop_duplicates("ids").join(counts, on="ids").reset_index(drop=True)

    def found(self, lattice: Lattice | None = None) -> pd.DataFrame:
        """Every distinct tokenization found plus the canonical one (kind "canonical"), most probable
        first: ids, kind, log p, log q, draws and share of the mass found."""
        import pandas as pd

        lattice = self._known_lattice(lattice)
        rows = self.distinct_paths()
        if lattice.canonical not in set(rows["ids"]):
            canonical = pd.DataFrame({"ids": [lattice.canonical], "kind": ["canonical"],
                                      "log_p": [self.log_p_canonical]})
            rows = pd.concat([canonical, rows], ignore_index=True)
        rows = rows.sort_values("log_p", ascending=False, kind="stable").reset_index(drop=True)
        rows.loc[rows["ids"] == lattice.canonical, "kind"] = "canonical"
        log_p = rows["log_p"].to_numpy(dtype=float)
        rows["share"] = np.exp(log_p - np.logaddexp.reduce(log_p))
        return rows

    def to_pandas(self, lattice: Lattice | None = None) -> pd.DataFrame:
        """One row per distinct scored tokenization plus the canonical one, most probable first:
        its tokens joined by "|", their number, log p, kind and share of the mass found."""
        import pandas as pd

        from marginal_core.lattice.readable import segmented

        lattice = self._known_lattice(lattice)
        rows = self.found(lattice)
        return pd.DataFrame({"tokenization": [segmented(lattice, p) for p in rows["ids"]],
                             "tokens": rows["ids"].map(len).to_numpy(dtype=int), "log_p": rows["log_p"].to_numpy(),
                             "kind": rows["kind"].to_numpy(), "share": rows["share"].to_numpy()})

    def rounds_frame(self) -> pd.DataFrame:
        """An anytime beam's rounds, one row each: width, log mass found, prefixes pruned, certified
        gap (nats), seconds and paths at its end; no rows for any other run."""
        import pandas as pd

        columns = ["width", "log_mass", "pruned", "certified_gap", "seconds", "paths"]
        return pd.DataFrame([[r.width, r.log_mass, r.pruned, r.certified_gap, r.seconds, r.paths] for r in self.rounds],
                            columns=columns)

    def certified_gap(self, lattice: Lattice | None = None) -> float:
        """Nats the exact log p(text) may lie above ``log_marginal``, at most: 0 where exact (every
        tokenization scored, a finished exact run, or a finished anytime beam that pruned nothing),
        a finished anytime beam's certificate, inf where not known (or not a bound: the proxy)."""
        if not self.method.is_bound:
            return math.inf
        known = self._lattice(lattice)
        if known is not None and known.count() <= len(self.paths) + 1 and (
                len(set(self.paths.tolist()) | {known.canonical}) == known.count()):
            return 0.0  # every tokenization scored
        if self.method is Method.EXACT and self.run.done:
            return 0.0
        return self.rounds[-1].certified_gap if self.rounds and self.run.done else math.inf

    @property
    def rounds(self) -> tuple[Round, ...]:
        """An anytime beam's finished rounds; none for every other run."""
        return self.run.rounds if isinstance(self.run, BeamRun) else ()

    @property
    def log_marginal(self) -> float:
        """log p(text): the canonical path plus the non-canonical estimate."""
        return float(np.logaddexp(self.log_p_canonical, self.log_noncanonical))

    @property
    def num_samples(self) -> int:
        return len(self.log_p)

    @cached_property
    def num_distinct(self) -> int:
        return self.paths.distinct()

    def running_marginal(self) -> np.ndarray:
        """The full log marginal after each sample."""
        return np.logaddexp(self.log_p_canonical, self.running)

    def summary(self) -> dict:
        """The figures the CLI prints (non-finite logs become None, as JSON has no -inf)."""
        row: dict[str, Any] = {
            "log_marginal": json_float(self.log_marginal),
            "log_noncanonical": json_float(self.log_noncanonical),
            "num_samples": self.num_samples,
            "num_distinct": self.num_distinct,
            "seconds": round(self.seconds, 4),
            "forward_passes": self.forward_passes,
        }
        if self.num_paths is not None:
            row["num_paths"] = str(self.num_paths)
        if self.run.cancelled:
            row["cancelled"] = True
        if self.rounds:  # the anytime beam: each round's width, mass found, pruned prefixes, seconds and paths
            row["rounds"] = [{**r._asdict(), "log_mass": json_float(r.log_mass), "log_missed": json_float(r.log_missed),
                              "seconds": round(r.seconds, 4)}
                             for r in self.rounds]
        return row
