"""pandas tables of a lattice's arcs and of an estimate's distinct tokenizations."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from marginal_core.lattice.graph import Lattice
from marginal_core.lattice.paths import Path
from marginal_core.lattice.readable import segmented, show_piece
from marginal_core.viz.arcs import arc_roles, arcs_in_bound

if TYPE_CHECKING:
    import pandas as pd

    from marginal_core.estimators.estimate_result import Estimate


def arcs_frame(lattice: Lattice, max_len: int | None = None) -> pd.DataFrame:
    """Every arc as a table row: byte span, token id, piece, role and whether it fits in L."""
    import pandas as pd

    roles = arc_roles(lattice)
    ok = arcs_in_bound(lattice, max_len)
    prefix, suffix = lattice.shortest
    return pd.DataFrame(
        {
            "start": lattice.arc_start,
            "end": lattice.arc_end,
            "token_id": lattice.arc_token,
            "piece": [show_piece(p) for p in lattice.pieces(tuple(lattice.arc_token.tolist()))],
            "role": roles,
            "fewest_tokens_through": prefix[lattice.arc_start] + 1 + suffix[lattice.arc_end],
            "within_L": ok,
        }
    )



def samples_frame(
    lattice: Lattice,
    estimate: Estimate | None = None,
    *,
    paths: Sequence[Path] | None = None,
    kinds: Sequence[str] | None = None,
) -> pd.DataFrame:
    """One row per distinct tokenization: its segmented text, length and scores.

    From an Estimate: log p, log q (proxy only) and how often it was drawn, in order of first
    draw. From bare ``paths`` (unscored samples): only the text and the length.
    """
    import pandas as pd

    if estimate is not None:
        rows = estimate.distinct_paths()
        frame = pd.DataFrame(
            {
                "tokenization": [segmented(lattice, p) for p in rows["ids"]],
                "tokens": rows["ids"].map(len).to_numpy(),
                "kind": rows["kind"].to_numpy(),
                "log_p": rows["log_p"].to_numpy(),
            }
        )
        if estimate.log_q is not None:
            frame["log_q"] = rows["log_q"].to_numpy()
            frame["draws"] = rows["draws"].to_numpy()
        return frame
    paths = list(paths or [])
    frame = pd.DataFrame({"tokenization": [segmented(lattice, p) for p in paths], "tokens": [len(p) for p in paths]})
    if kinds is not None:
        frame["kind"] = list(kinds)
    return frame
