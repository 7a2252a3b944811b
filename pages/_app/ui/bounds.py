"""How a shown estimate stands against the best lower bound found for the same text, by any page
or session, and how converged an anytime beam is: said on every page that shows a bound, so a
method that misses most of the mass never passes for the whole story."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import streamlit as st

from marginal_core import Method, describe_rounds
from marginal_core.viz import format_log, format_small
from pages._app.runtime import shared_results

if TYPE_CHECKING:
    from marginal_core import Estimate
    from pages._app.ui.inputs import Inputs

# A bound this many nats of log p(text) below the best one found (about 10% of the probability) is
# warned about: finer differences are the estimators' ordinary spread on long texts.
FAR_BELOW = 0.1


def width_label(width: int | None) -> str:
    """A beam width as the pages write it: a number, or 'auto' for the anytime beam."""
    return "auto" if width is None else f"{width:,}"


def setting_label(key_tail: tuple) -> str:
    """A result's method and settings in words, from its key after the inputs (pages' keys:
    ("beam", W), ("lattice", k, L, seed), ("exact",), ("proxy", k, seed))."""
    method, *settings = key_tail
    if method == "beam":
        return f"beam (W = {width_label(settings[0])})"
    if method in ("lattice", "proxy"):
        return f"{method} (k = {settings[0]:,})"
    return str(method)


def best_bound(inp: Inputs) -> tuple[str, Estimate] | None:
    """The finished lower bound with the most mass for these inputs (model, precision, text,
    context) among every stored result, with its label (exact wherever it is known: a bound a
    rounding error above it is no better); None when none is stored."""
    from marginal_core import Estimate

    found = [(setting_label(key[len(inp.key()):]), r) for key, r in shared_results.under(inp.key())
             if isinstance(r, Estimate) and len(key) > len(inp.key()) and r.method.is_bound]
    exact = [pair for pair in found if pair[1].method is Method.EXACT]  # the value itself: no bound passes it
    return (exact or [max(found, key=lambda pair: pair[1].log_marginal, default=None)])[0]


def shortfall(est: Estimate, label: str, best: tuple[str, Estimate] | None) -> str | None:
    """A warning when est (a bound, shown as label) lies FAR_BELOW or more under the best bound."""
    if best is None or not est.method.is_bound:
        return None
    best_label, top = best
    gap = top.log_marginal - est.log_marginal
    if gap < FAR_BELOW:
        return None
    missed = -math.expm1(est.log_noncanonical - top.log_noncanonical) if math.isfinite(est.log_noncanonical) else 1.0
    return (f"The {label} bound is {gap:.2f} nats below the best bound found for this text, {best_label}: "
            f"log p(text) {'=' if top.method is Method.EXACT else '≥'} {format_log(top.log_marginal)} there, "
            f"{format_log(est.log_marginal)} here. It misses at "
            f"least {format_small(missed, 1, percent=True)} of the mass off the canonical that {best_label} found: "
            "read its shares and paths as a partial view.")


def say(inp: Inputs, est: Estimate, label: str) -> None:
    """Under a shown estimate: how converged an anytime beam is, and a warning when a better bound
    for the same text shows this one to be far short."""
    if est.rounds:
        st.caption(f"Anytime beam: {describe_rounds(est.rounds)}.")
    if (warning := shortfall(est, label, best_bound(inp))) is not None:
        st.warning(warning, icon=":material/trending_down:")
