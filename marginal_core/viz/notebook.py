"""How a Lattice and an Estimate show themselves in a notebook: the lattice as an inline drawing
(a window of a long text, as the app draws it), an Estimate as an HTML card of its figures."""

from __future__ import annotations

import html
import math
from typing import TYPE_CHECKING, Any

from marginal_core.lattice.graph import Lattice
from marginal_core.lattice.readable import segmented, show_piece
from marginal_core.viz.arcs import default_window
from marginal_core.viz.drawing import dot_to_svg, lattice_dot
from marginal_core.viz.style import COLORS
from marginal_core.viz.surprisal import strip_html
from marginal_core.viz.text import count_label, format_log, format_small

if TYPE_CHECKING:
    from marginal_core.estimators.estimate_result import Estimate

# A card shows this many characters of the text and the context at most.
SHOWN_CHARS = 200
_TABLE = "border-collapse:collapse;font-size:0.9em;margin:4px 0"
_CELL = "padding:1px 6px;text-align:left"


def lattice_html(lattice: Lattice) -> str:
    """The lattice as an inline SVG drawing (canonical arcs blue, off-by-one orange), a window of a
    long text where the app would draw one; one line saying why where it cannot be drawn."""
    head = html.escape(repr(lattice))
    try:
        window = default_window(lattice)
        svg = dot_to_svg(lattice_dot(lattice, window=window)).decode("utf-8")
    except Exception as exc:  # noqa: BLE001 -- a display never raises: no dot binary, too many arcs
        return f"<pre>{head}\nnot drawn: {html.escape(str(exc))}</pre>"
    legend = (f"<span style='color:{COLORS['canonical']}'>blue</span>: the canonical tokenization; "
              f"<span style='color:{COLORS['off_by_one']}'>orange</span>: arcs of the off-by-one splits")
    if window is not None:
        first, last = (lattice.canonical_nodes.index(b) for b in window)
        shown = show_piece(lattice.data[window[0] : window[1]].decode("utf-8", "replace"))
        legend += (f"<br>Window: bytes {window[0]}–{window[1]} ({html.escape(shown)}), canonical tokens {first + 1}–{last} "
                   f"of {len(lattice.canonical)}; draw another with "
                   "<code>viz.lattice_graph(lattice, window=viz.token_window(lattice, first, count))</code>")
    return (f"<div><code>{head}</code><br><small>{legend}</small>"
            f"<div style='overflow-x:auto'>{svg[svg.find('<svg') :]}</div></div>")


def _shortened(text: str) -> str:
    return text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 1] + "…"


def _table(header: list[str] | None, rows: list[list[str]]) -> str:
    """Rows of cells (already HTML), under a header where given, as a small table."""
    head = "" if header is None else "<tr>" + "".join(f"<th style='{_CELL}'>{h}</th>" for h in header) + "</tr>"
    body = "".join("<tr>" + "".join(f"<td style='{_CELL}'>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table style='{_TABLE}'>{head}{body}</table>"


def log_p_text(estimate: Estimate) -> str:
    """What an Estimate says of log p(text): "= x" where exact, "≥ x" for a bound (with its certified
    gap where known), "≈ x" for the proxy."""
    gap = estimate.certified_gap()
    value = format_log(estimate.log_marginal)
    if gap == 0:
        return f"= {value}"
    if not estimate.method.is_bound:
        return f"≈ {value}"
    return f"≥ {value}" + (f" (at most {format_small(gap)} nats below)" if math.isfinite(gap) else "")


def estimate_html(estimate: Estimate) -> str:
    """An Estimate as a card: method, model, dtype, log p(canonical), log p(text), the mass off the
    canonical, seconds, the five heaviest tokenizations with their shares, an anytime beam's rounds."""
    from marginal_core.estimators.beam_width import describe_rounds
    from marginal_core.viz.analysis import top_tokenizations

    source = estimate.source
    facts = []
    if source is not None:
        facts += [("model", source.model), ("dtype", source.dtype), ("device", source.device),
                  ("text", _shortened(source.lattice.text))]
        if source.context:
            facts.append(("context", _shortened(source.context)))
    mass_off = max(0.0, -math.expm1(estimate.log_p_canonical - estimate.log_marginal))  # never "-0.00%"
    scored = f"{estimate.num_distinct:,}"
    if source is not None:
        scored += f" of {count_label(source.lattice.count())}"
    facts += [("log p(canonical)", format_log(estimate.log_p_canonical)), ("log p(text)", log_p_text(estimate)),
              ("mass off the canonical", format_small(mass_off, 2, percent=True)), ("tokenizations scored", scored),
              ("seconds", f"{estimate.seconds:.2f}")]
    if not estimate.run.done:
        facts.append(("run", ("stopped: " if estimate.run.cancelled else "running: ") + estimate.run.describe()))
    parts = [_table(None, [[html.escape(k), html.escape(v)] for k, v in facts])]
    if source is not None:
        top = top_tokenizations(source.lattice, estimate, 5)
        rows = [[f"<code style='color:{COLORS['canonical'] if canonical else 'inherit'}'>"
                 f"{html.escape(segmented(source.lattice, ids))}</code>", str(len(ids)), format_log(log_p),
                 format_small(share, 2, percent=True)]
                for ids, log_p, share, canonical in top.itertuples(index=False)]
        parts.append("<b>The heaviest tokenizations</b> (share of the mass found; canonical in blue)"
                     + _table(["tokenization", "tokens", "log p", "share"], rows))
    if estimate.rounds:
        rows = [[str(r.width), format_log(r.log_mass), f"{r.pruned:,}",
                 format_small(r.certified_gap) if math.isfinite(r.certified_gap) else "∞", f"{r.seconds:.2f}",
                 f"{r.paths:,}"] for r in estimate.rounds_frame().itertuples(index=False)]
        parts.append("<b>Rounds</b> (" + html.escape(describe_rounds(estimate.rounds)) + ")"
                     + _table(["width", "log mass", "pruned", "certified gap", "seconds", "paths"], rows))
    return ("<div style='border:1px solid #ccc;border-radius:8px;padding:6px 12px;display:inline-block;"
            f"font-family:sans-serif'><b>Estimate: {estimate.method.value}</b>" + "".join(parts) + "</div>")


def register_formatters(shell: Any) -> None:
    """Have an IPython shell draw every Lattice (lattice_html), Estimate (estimate_html) and
    Surprisal (its strip) it shows, registered by module and class name: the core's classes know
    nothing of their display."""
    formatter = shell.display_formatter.formatters["text/html"]
    formatter.for_type_by_name("marginal_core.lattice.graph", "Lattice", lattice_html)
    formatter.for_type_by_name("marginal_core.estimators.estimate_result", "Estimate", estimate_html)
    formatter.for_type_by_name("marginal_core.search.surprisal.result", "Surprisal", lambda s: strip_html([s]))
