"""What comes next, drawn (docs/design.md, "What comes next"): the most probable next characters as
grouped bars, the marginal with its certified interval beside the canonical and healed views, and
a second model's marginal on the same axis (characters are the one axis every vocabulary shares)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from marginal_core.search.next.results import CERTIFIED, NextChar, NextCharacters
from marginal_core.viz.style import COLORS, MODEL_COLORS, TEXT_FONTS
from marginal_core.viz.text import with_base

if TYPE_CHECKING:
    import plotly.graph_objects as go

VIEW_COLORS = {"canonical": COLORS["canonical"], "healed": COLORS["off_by_one"]}


def next_figure(results: Sequence[NextCharacters], *, projector: bool = False) -> go.Figure:
    """The first result's characters (then any the others add), each model's marginal bar with its
    interval, and the first model's canonical and healed bars. None: the empty axes (a page draws
    them before its run, so the browser loads plotly)."""
    import plotly.graph_objects as go

    fig = go.Figure()
    if results:
        order = list(dict.fromkeys(r.bytes for res in results for r in res.rows + res.rest))
        labels = {r.bytes: with_base(r.shown) for res in results for r in res.rows + res.rest}  # a mark alone on ◌
        x = [labels[b] for b in order]
        for res, colour in zip(results, MODEL_COLORS * len(results), strict=False):
            rows = {r.bytes: r for r in res.rows + res.rest}
            fig.add_trace(_marginal(res.model, [rows.get(b) for b in order], x, colour))
        first = {r.bytes: r for r in results[0].rows + results[0].rest}
        for view in ("canonical", "healed"):
            fig.add_trace(go.Bar(x=x, y=[getattr(first[b], view) if b in first else None for b in order],
                                 name=f"{view} ({results[0].model})", marker_color=VIEW_COLORS[view],
                                 hovertemplate=f"%{{x}}: {view} %{{y:.4f}}<extra></extra>"))
    font = 20 if projector else 13
    fig.update_layout(barmode="group", height=460 if projector else 360, font=dict(size=font, family=TEXT_FONTS),
                      title="The next character: over every tokenization, and by the canonical tokens",
                      yaxis_title="probability", yaxis_range=[0, 1], xaxis_title=None,
                      margin=dict(l=10, r=10, t=50, b=10),
                      legend=dict(orientation="h", yanchor="bottom", y=1.0, xanchor="right", x=1))
    return fig


def _marginal(model: str, rows: Sequence[NextChar | None], x: list[str], colour: str) -> go.Bar:
    """One model's marginal bars (no bar where the model does not list the character): a certified
    row with its interval, any other with its standing written on it and no whisker (an interval
    still open to 1 is no range a reader can use)."""
    import plotly.graph_objects as go

    def whisker(r: NextChar | None, value: float) -> float:
        return value if r is not None and r.status == CERTIFIED else 0.0

    y = [r.probability if r is not None else None for r in rows]
    above = [whisker(r, r.upper - r.probability) if r is not None else 0.0 for r in rows]
    below = [whisker(r, r.probability - r.lower) if r is not None else 0.0 for r in rows]
    return go.Bar(x=x, y=y, name=f"marginal ({model})", marker_color=colour,
                  error_y=dict(type="data", array=above, arrayminus=below, visible=True),
                  text=[r.status if r is not None and r.status != CERTIFIED else "" for r in rows],
                  textposition="outside", textangle=-90,
                  customdata=[[r.interval] if r is not None else [""] for r in rows],
                  hovertemplate="%{x}: marginal %{y:.4f}, %{customdata[0]}<extra></extra>")
