"""Figures and tables of lattices and estimates, in small modules: ``text`` (pieces, chips,
numbers for display), ``arcs`` (which arcs a drawing shows), ``drawing`` (graphviz drawings),
``frames`` (pandas tables), ``charts`` (plotly), ``compare`` (two models on one byte axis) and
``notebook`` (how a Lattice and an Estimate show themselves in Jupyter), with the
colours every view shares in ``style``.

Plain Python, so the app, notebooks and tests use the same figures; nothing here runs a model
(callers pass lattices and :class:`~marginal_core.estimators.estimate_result.Estimate` objects in). graphviz,
plotly and pandas are imported by the functions that need them, so ``import marginal_core.viz``
works without them. The names below are the package's public face: ``viz.lattice_graph`` etc.
"""

from __future__ import annotations

from marginal_core.lattice.readable import segmented, show_piece
from marginal_core.viz.arcs import (
    MAX_DRAW_ARCS,
    READABLE_NODES,
    arc_roles,
    arcs_in_bound,
    default_window,
    fit_window,
    token_window,
    window_arcs,
    window_nodes,
)
from marginal_core.viz.charts import (
    MIN_Y_SPAN,
    RUNNING_Y,
    RunTrace,
    length_histogram,
    mass_bar,
    rank_scatter,
    running_figure,
    top_n_figure,
)
from marginal_core.viz.compare import MIN_FLOW_SHARE, byte_axis_chips_html, differing_cuts, flows_figure
from marginal_core.viz.drawing import (
    FLOW_FLOOR,
    RenderError,
    TooLargeToDrawError,
    dot_to_svg,
    flow_color,
    lattice_dot,
    lattice_graph,
)
from marginal_core.viz.frames import arcs_frame, samples_frame
from marginal_core.viz.notebook import estimate_html, lattice_html
from marginal_core.viz.style import COLORS, KIND_LABELS
from marginal_core.viz.text import (
    chips_html,
    code_span,
    count_label,
    direction,
    format_log,
    format_small,
    isolate_rtl,
    with_base,
)

__all__ = [
    "COLORS",
    "KIND_LABELS",
    "FLOW_FLOOR",
    "MAX_DRAW_ARCS",
    "MIN_Y_SPAN",
    "READABLE_NODES",
    "RUNNING_Y",
    "TooLargeToDrawError",
    "RenderError",
    "show_piece",
    "code_span",
    "count_label",
    "format_log",
    "format_small",
    "segmented",
    "chips_html",
    "direction",
    "isolate_rtl",
    "with_base",
    "arc_roles",
    "arcs_in_bound",
    "arcs_frame",
    "token_window",
    "default_window",
    "window_arcs",
    "window_nodes",
    "fit_window",
    "flow_color",
    "lattice_graph",
    "lattice_dot",
    "dot_to_svg",
    "samples_frame",
    "length_histogram",
    "mass_bar",
    "top_n_figure",
    "rank_scatter",
    "RunTrace",
    "running_figure",
    "MIN_FLOW_SHARE",
    "byte_axis_chips_html",
    "differing_cuts",
    "flows_figure",
    "lattice_html",
    "estimate_html",
]
