"""plotly charts: sample lengths, mass shares, cumulative top-n mass, log p against log q, and
the running estimates against samples or seconds (with an anytime beam's rounds marked)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from marginal_core.estimators.beam_width import Round
from marginal_core.viz.style import COLORS, KIND_LABELS
from marginal_core.viz.text import format_small

if TYPE_CHECKING:
    import pandas as pd
    import plotly.graph_objects as go

    from marginal_core.estimators.estimate_result import Estimate


def _layout(fig: go.Figure, title: str, x: str, y: str, height: int = 360) -> go.Figure:
    fig.update_layout(
        title=title,
        xaxis_title=x,
        yaxis_title=y,
        height=height,
        margin=dict(l=10, r=10, t=50, b=10),
        legend=dict(orientation="h", yanchor="bottom", y=1.0, xanchor="right", x=1),
    )
    return fig



def length_histogram(groups: Mapping[str, Sequence[int]], canonical_len: int | None = None) -> go.Figure:
    """Bars of how many samples of each group have each number of tokens (one trace a group).

    Group names that are sample kinds (off_by_one, uniform, proxy, ...) get their colours.
    """
    import plotly.graph_objects as go

    fig = go.Figure()
    for name, lengths in groups.items():
        values, counts = np.unique(np.asarray(list(lengths), dtype=int), return_counts=True)
        fig.add_trace(
            go.Bar(
                x=values, y=counts, name=KIND_LABELS.get(name, name), marker_color=COLORS.get(name),
                opacity=0.75,
            )
        )
    if canonical_len is not None:
        fig.add_vline(x=canonical_len, line_dash="dot", line_color=COLORS["canonical"],
                      annotation_text="canonical", annotation_position="top")
    fig.update_layout(barmode="group")
    return _layout(fig, "Lengths of the samples", "tokens", "samples")



def mass_bar(frame: pd.DataFrame, group: str, title: str, log_y: bool = False) -> go.Figure:
    """Share of the found probability mass per group (a frame from analysis.mass_by_*).

    Bars are labelled with the share and hover shows the log mass and number of paths. With
    log_y the shares are on a log axis, where shares of 1e-40 next to 99.99% stay visible.
    """
    import plotly.graph_objects as go

    labels = [KIND_LABELS.get(str(g), str(g)) for g in frame[group]]
    colors = [COLORS.get(str(g), COLORS["canonical"] if group == "kind" else "#5b8fc9") for g in frame[group]]
    percent = 100 * frame["share"].to_numpy(dtype=float)
    fig = go.Figure(
        go.Bar(
            x=labels if group == "kind" else frame[group],
            y=percent,
            marker_color=colors,
            text=[format_small(s, 1, percent=True) for s in frame["share"]],
            textposition="outside",
            customdata=np.stack([frame["log_mass"], frame["paths"]], axis=1),
            hovertemplate="%{x}<br>share %{y:.3g}%<br>log mass %{customdata[0]:.3f}<br>%{customdata[1]} paths<extra></extra>",
            name="share",
        )
    )
    if log_y:
        _decades_only(fig, percent[percent > 0], "y")
    else:
        fig.update_yaxes(ticksuffix="%", rangemode="tozero")
    x_title = {"kind": "", "tokens": "tokens in the tokenization", "splits": "splits from the canonical"}
    return _layout(fig, title, x_title.get(group, group), "share of found mass (%)")



def _decades_only(fig: go.Figure, values: np.ndarray, axis: str) -> None:
    """A log axis labelled at powers of ten only (at most about eight labels), never at the
    2s and 5s between them, which read as stray numbers."""
    low, high = (float(np.log10(values.min())), float(np.log10(values.max()))) if len(values) else (0.0, 2.0)
    step = max(1, math.ceil((high - low) / 8))
    update = fig.update_yaxes if axis == "y" else fig.update_xaxes
    update(type="log", dtick=step, exponentformat="power", minor=dict(showgrid=False))



def top_n_figure(frame: pd.DataFrame) -> go.Figure:
    """Cumulative share of the found mass held by the n most probable tokenizations."""
    import plotly.graph_objects as go

    fig = go.Figure(go.Scatter(x=frame["n"], y=frame["cumulative_share"], mode="lines+markers",
                               name="top n", marker=dict(size=4)))
    if len(frame) > 30:
        _decades_only(fig, frame["n"].to_numpy(dtype=float), "x")
    fig.update_yaxes(tickformat=".0%", range=[0, 1.05])
    return _layout(fig, "Cumulative mass of the n most probable tokenizations", "n", "share of found mass (%)")



def rank_scatter(estimate: Estimate, rho: float | None = None) -> go.Figure:
    """log p against log q for the distinct proxy samples, with Spearman's rho in the title."""
    import plotly.graph_objects as go

    from marginal_core.viz.analysis import spearman

    if estimate.log_q is None:
        raise ValueError("a rank scatter needs proxy samples (with log q)")
    rows = estimate.distinct_paths()
    if rho is None:
        rho, _ = spearman(estimate)
    fig = go.Figure(
        go.Scatter(
            x=rows["log_q"], y=rows["log_p"], mode="markers", name="distinct samples",
            marker=dict(color=COLORS["proxy"], size=np.clip(4 + 2 * np.log2(rows["draws"]), 4, 16), opacity=0.7),
            customdata=rows["draws"],
            hovertemplate="log q %{x:.3f}<br>log p %{y:.3f}<br>drawn %{customdata}×<extra></extra>",
        )
    )
    rho_text = "n/a (fewer than 3 distinct samples)" if rho is None or math.isnan(rho) else f"{rho:.3f}"
    return _layout(fig, f"log p against log q — Spearman ρ = {rho_text} (n = {len(rows)})",
                   "log q (constrained LM)", "log p (language model)")



RUNNING_Y = {"marginal": "log p(text) (nats)", "noncanonical": "log non-canonical mass (nats)"}

# The narrowest y range of a running plot, in nats: estimates that differ from the canonical by
# less (a bound that found little mass) sit on its line instead of stretching the axis to 14-decimal ticks;
# the non-canonical mass view shows such differences.
MIN_Y_SPAN = 0.01



@dataclass(frozen=True)
class RunTrace:
    """One estimator's run for the running-estimate plots.

    ``checkpoints`` are (samples done, seconds since the start) pairs, one per scored chunk;
    ``running`` is the full log marginal after each sample and ``noncanonical`` the log of the
    non-canonical part alone (what the estimators actually estimate).
    """

    label: str
    running: np.ndarray
    checkpoints: Sequence[tuple[int, float]]
    color: str | None = None
    noncanonical: np.ndarray | None = None
    rounds: Sequence[Round] = ()  # an anytime beam's finished rounds, marked on the plots

    @classmethod
    def of(cls, estimate: Estimate, label: str | None = None) -> RunTrace:
        """From an Estimate (its checkpoints, or one point at its end)."""
        return cls(
            label or str(estimate.method),
            estimate.running_marginal(),
            list(estimate.run.checkpoints) or [(estimate.num_samples, estimate.seconds)],
            COLORS.get(estimate.method),
            np.asarray(estimate.running, dtype=float),
            estimate.rounds,
        )



def _readable_y(fig: go.Figure, ys: Sequence[float]) -> None:
    """A y axis of at least MIN_Y_SPAN with ticks of at most three decimals (hover keeps six)."""
    if not ys:
        return
    low, high = min(ys), max(ys)
    span = max(high - low, MIN_Y_SPAN)
    if high - low < MIN_Y_SPAN:
        middle = (low + high) / 2
        pad = 0.1 * span
        fig.update_yaxes(range=[middle - span / 2 - pad, middle + span / 2 + pad])
    decimals = min(3, max(0, math.ceil(-math.log10(span / 5))))
    fig.update_yaxes(tickformat=f",.{decimals}f", hoverformat=".6f")



def running_figure(
    traces: Sequence[RunTrace],
    *,
    log_p_canonical: float,
    log_exact: float | None = None,
    x: str = "samples",
    y: str = "marginal",
) -> go.Figure:
    """Running estimates against the number of samples or against seconds.

    ``y="marginal"``: log p(text), with the canonical log probability (and the exact marginal
    where known) as horizontal lines. ``y="noncanonical"``: the log of the non-canonical mass
    alone, where the estimators differ visibly; ``log_exact`` is then the exact non-canonical
    log mass. Points with no mass found yet (-inf) are left out.
    """
    import plotly.graph_objects as go

    if x not in ("samples", "seconds"):
        raise ValueError("x must be 'samples' or 'seconds'")
    if y not in RUNNING_Y:
        raise ValueError(f"y must be one of {', '.join(RUNNING_Y)}")
    fig = go.Figure()
    shown: list[float] = []  # every y value drawn, for the axis range and its tick format
    for trace in traces:
        values = trace.running if y == "marginal" else trace.noncanonical
        if values is None:
            raise TypeError(f"trace {trace.label!r} has no noncanonical values to plot")
        if x == "samples":
            xs, ys = np.arange(1, len(values) + 1), np.asarray(values, dtype=float)
        else:
            points = [(s, n) for n, s in trace.checkpoints if 0 < n <= len(values)]
            start = [(0.0, log_p_canonical)] if y == "marginal" else []
            xs = np.array([p[0] for p in start] + [s for s, _ in points], dtype=float)
            ys = np.array([p[1] for p in start] + [values[n - 1] for _, n in points], dtype=float)
        keep = np.isfinite(ys)
        shown.extend(ys[keep].tolist())
        fig.add_trace(
            go.Scatter(x=xs[keep], y=ys[keep], mode="lines+markers", name=trace.label,
                       line=dict(color=trace.color, width=2.5), opacity=0.85,
                       marker=dict(size=6, maxdisplayed=0 if x == "seconds" else 30))
        )
    for trace in traces:  # where each round of an anytime beam ended, with the width it reached
        for r in trace.rounds:
            fig.add_vline(x=r.seconds if x == "seconds" else r.paths, line_dash="dot", line_width=1,
                          line_color=trace.color or "grey", annotation_text=f"W={r.width}",
                          annotation_position="bottom left", annotation_font_size=11)
    # The reference lines go under the traces: an estimate equal to the canonical stays visible.
    if y == "marginal":
        shown.append(log_p_canonical)
        fig.add_hline(y=log_p_canonical, line_dash="dot", line_color=COLORS["canonical"], layer="below",
                      annotation_text="canonical", annotation_position="bottom right")
    has_exact = log_exact is not None and math.isfinite(log_exact)
    if log_exact is not None and has_exact:
        shown.append(log_exact)
        fig.add_hline(y=log_exact, line_dash="dash", line_color=COLORS["exact"], layer="below",
                      annotation_text="exact", annotation_position="top right")
    _readable_y(fig, shown)
    # Invisible traces so that the reference lines appear in the legend too.
    if y == "marginal":
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="lines", name="canonical",
                                 line=dict(color=COLORS["canonical"], dash="dot")))
    if has_exact:
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="lines", name="exact",
                                 line=dict(color=COLORS["exact"], dash="dash")))
    what = "log p(text)" if y == "marginal" else "Non-canonical mass"
    title = f"{what} estimate vs. " + ("samples" if x == "samples" else "seconds")
    return _layout(fig, title, "samples" if x == "samples" else "seconds", RUNNING_Y[y])



def paired_scatter(paired: pd.DataFrame, a: str, b: str, value: str, title: str, axis: str) -> go.Figure:
    """A scan's texts under models a and b (a row of scan_compare.paired_table each): ``value``'s
    ``_a`` column on x against its ``_b`` on y, with the line y = x; the texts that flip stand out."""
    import plotly.graph_objects as go

    from marginal_core.viz.style import MODEL_COLORS

    x, y = paired[f"{value}_a"].to_numpy(dtype=float), paired[f"{value}_b"].to_numpy(dtype=float)
    seen = np.concatenate([x, y])
    seen = seen[np.isfinite(seen)]
    low, high = (float(seen.min()), float(seen.max())) if len(seen) else (0.0, 1.0)
    fig = go.Figure(go.Scatter(x=[low, high], y=[low, high], mode="lines", name="y = x", hoverinfo="skip",
                               line=dict(color=COLORS["rest"], dash="dot", width=1)))
    flips = paired["flips"].to_numpy(dtype=bool)
    for name, keep, color in (("same model ahead", ~flips, MODEL_COLORS[0]), ("flips", flips, MODEL_COLORS[1])):
        if keep.any():
            fig.add_trace(go.Scatter(
                x=x[keep], y=y[keep], mode="markers", name=name, marker=dict(color=color, size=8, opacity=0.75),
                text=[t if len(t) <= 60 else t[:59] + "…" for t in paired["text"][keep]],
                hovertemplate=f"%{{text}}<br>{a}: %{{x:.3f}}<br>{b}: %{{y:.3f}}<extra></extra>"))
    return _layout(fig, title, f"{axis}, {a}", f"{axis}, {b}")
