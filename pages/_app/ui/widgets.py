"""Page widgets that several pages share, defined once: the same label, limits, step and URL
key wherever they appear (a value set on one page carries over to the next)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import streamlit as st

from marginal_core import DEFAULT_BEAM_WIDTH, MAX_BEAM_WIDTH, auto_widths
from marginal_core.viz import count_label
from pages._app.runtime import server
from pages._app.ui.defaults import APP_EXACT_BUDGET, DEFAULT_SAMPLES, MAX_SAMPLES, exact_feasible

if TYPE_CHECKING:
    from streamlit.delta_generator import DeltaGenerator

    from marginal_core import Lattice

_L_DEFAULT = "_L_default"  # the default L last put in the length-bound widget (see length_bound)


def samples_k(where: DeltaGenerator, *, disabled: bool = False,
              help: str = "Lattice samples: off-by-one first, then uniform paths of at most L tokens.") -> int:
    """The number of samples k of an estimate (URL key k), up to the server's cap."""
    top = server.policy().cap_samples(MAX_SAMPLES)
    return int(where.number_input("Samples k", min_value=1, max_value=top, value=min(DEFAULT_SAMPLES, top), step=50,
                                  key="k", bind="query-params", disabled=disabled, help=help))


def proxy_samples(where: DeltaGenerator) -> int:
    """The number of proxy samples (URL key pk), up to the server's cap."""
    top = server.policy().cap_samples(MAX_SAMPLES)
    return int(where.number_input("Proxy samples", min_value=1, max_value=top, value=min(DEFAULT_SAMPLES, top),
                                  step=50, key="pk", bind="query-params",
                                  help="Tokenizations drawn from the model constrained to the lattice."))


def beam_width(where: DeltaGenerator, *, disabled: bool = False) -> int | None:
    """The beam's width W (URL key W), up to the server's cap, or None for the anytime beam (URL
    key Wauto, the default): widened round by round until a widening stops finding mass."""
    top = server.policy().cap_beam_width(MAX_BEAM_WIDTH)
    auto = where.toggle(
        "Auto W", value=True, key="Wauto", bind="query-params", disabled=disabled,
        help=f"Widen the beam by itself (W = {', '.join(map(str, auto_widths(top)))}) until a widening adds "
        "less than 1% of the mass found, or the last round prunes nothing (then the bound is exact).")
    width = int(where.number_input(
        "Beam width W", min_value=1, max_value=top, value=DEFAULT_BEAM_WIDTH, step=1, key="W",
        bind="query-params", disabled=disabled or auto,
        help="Prefixes the beam extends per lattice state; its lower bound grows with W (exact once W covers "
        f"every prefix). 1 to {top:,}. Turn Auto W off to fix it.",
    ))
    return None if auto else width


def length_bound(where: DeltaGenerator, lat: Lattice, *, disabled: bool = False) -> int:
    """The length bound L of the lattice sampler (URL key L); default: canonical length + 10.

    The default follows the text: a new text gets its own default unless L was set by hand (or
    came with a shared link). An L below the text's shortest tokenization is said under the
    widgets' row, with a button for the smallest L that has a path.
    """
    state, default = st.session_state, lat.default_max_len()
    if state.get("L") not in (None, default) and state.get("L") == state.get(_L_DEFAULT):
        state["L"] = default  # still the default of an earlier text: take this text's
    state[_L_DEFAULT] = default if state.get("L") in (None, default) else None
    bound = int(where.number_input(
        "Length bound L", min_value=1, value=default, step=1, key="L", bind="query-params",
        disabled=disabled, help="Uniform samples are paths of at most L tokens; arcs on no such path are greyed "
        f"on the lattice page (default: canonical length + 10 = {default:,}).",
    ))
    if bound < lat.min_len and not disabled:
        st.warning(f"No tokenization of this text has L = {bound:,} tokens or fewer: the shortest has "
                   f"{lat.min_len:,} (the default for this text is {default:,}). Raise L to at least {lat.min_len:,}.",
                   icon=":material/warning:")
        st.button(f"Use L = {lat.min_len:,}", key="L_feasible", on_click=_set_length, args=(lat.min_len,),
                  help="The smallest length bound that some tokenization of this text meets.")
    return bound


def _set_length(value: int) -> None:
    st.session_state["L"] = value


def seed(where: DeltaGenerator, *, disabled: bool = False) -> int:
    """The seed of every sampler (URL key seed)."""
    return int(where.number_input("Seed", min_value=0, value=0, step=1, key="seed", bind="query-params",
                                  disabled=disabled, help="The same seed draws the same samples."))


def exact_toggle(where: DeltaGenerator, lat: Lattice, label: str) -> bool:
    """A toggle for exact enumeration (URL key exact), on by default and offered only while the
    lattice is small."""
    count = lat.count()
    feasible = exact_feasible(count)
    on = where.toggle(label, value=feasible, disabled=not feasible, key="exact", bind="query-params",
                      help=f"Offered up to {APP_EXACT_BUDGET:,} tokenizations; this text has {count_label(count)}.")
    return bool(on) and feasible
