"""Running estimates: each estimator against the number of samples and against time, live."""

from __future__ import annotations

from collections.abc import Iterator

import pandas as pd
import streamlit as st

from marginal_core import app_state as S
from marginal_core import viz
from marginal_core.estimators import Estimate
from pages import _common as C


def main(inp: C.Inputs) -> None:
    st.title("Running estimates")
    st.markdown(
        "Each estimate of log p(text) as samples come in. The **lattice** estimate (Algorithm 1) is a "
        "sum over distinct scored tokenizations, so it only grows; the **proxy** estimate is an "
        "importance-sampling average, unbiased but noisy and slow (every sample is generated token by "
        "token). Dotted: the canonical tokenization alone; dashed: the exact marginal, where the "
        "lattice is small enough to enumerate."
    )

    lat = C.require_lattice(inp)
    c = st.columns([1, 1, 1, 2, 1])
    k = int(c[0].number_input("Samples k", min_value=1, max_value=100_000, value=S.DEFAULT_SAMPLES, step=100,
                              key="k", bind="query-params", help="For each method."))
    L = int(c[1].number_input("Length bound L", min_value=1, value=lat.default_max_len(), key="L", bind="query-params"))
    seed = int(c[2].number_input("Seed", min_value=0, value=0, key="seed", bind="query-params"))
    methods = c[3].multiselect("Methods", ["lattice", "proxy"], default=["lattice", "proxy"], key="methods",
                               bind="query-params")
    exact = C.exact_toggle(c[4], lat, "Exact line")

    keys = {"lattice": inp.key("lattice", k, L, seed), "proxy": inp.key("proxy", k, seed), "exact": inp.key("exact")}
    wanted = list(methods) + (["exact"] if exact else [])


    def _finished() -> dict[str, Estimate]:
        return {name: r for name in wanted if (r := C.cached(keys[name])) is not None}


    b = st.columns([1, 1, 3, 3], vertical_alignment="center")
    run = b[0].button("Run", icon=":material/play_arrow:", type="primary", key="run", disabled=not wanted)
    C.stop_button(b[1])
    y = b[3].segmented_control(
        "Plot", ["log p(text)", "non-canonical mass"], default="log p(text)", key="y", bind="query-params",
        label_visibility="collapsed", help="The non-canonical mass is the part the estimators estimate; "
        "on the log p(text) scale it is often too small to see.",
    )
    y = "noncanonical" if y == "non-canonical mass" else "marginal"
    status = st.empty()
    left, right = st.columns(2)
    plot_samples, plot_seconds = left.empty(), right.empty()
    table_spot = st.empty()


    drawn = [0]  # each redraw needs fresh element keys within one run

    def draw(results: dict[str, Estimate]) -> None:
        """Both plots and the summary table for the results so far."""
        drawn[0] += 1
        m_lpc = next(iter(results.values())).log_p_canonical if results else None
        if m_lpc is None:
            return
        traces = [viz.RunTrace.of(r, label=name) for name, r in results.items() if name != "exact"]
        exact_done = "exact" in results and results["exact"].done
        log_exact = None
        if exact_done:
            e = results["exact"]
            log_exact = e.log_marginal if y == "marginal" else e.log_noncanonical
        plot_samples.plotly_chart(viz.running_figure(traces, log_p_canonical=m_lpc, log_exact=log_exact, x="samples", y=y),
                                  key=f"by_samples_{drawn[0]}")
        plot_seconds.plotly_chart(viz.running_figure(traces, log_p_canonical=m_lpc, log_exact=log_exact, x="seconds", y=y),
                                  key=f"by_seconds_{drawn[0]}")
        rows = []
        for name, r in results.items():
            row = {"method": name, **r.summary()}
            row["log_p_canonical"] = r.log_p_canonical
            row["done"] = "yes" if r.done else f"stopped at {r.num_samples}/{r.requested}"
            rows.append(row)
        table_spot.dataframe(pd.DataFrame(rows), hide_index=True)


    results = _finished()
    if run:
        m = C.require_marginalizer(inp)
        with C.guard("running the estimators"):
            for name in wanted:
                if name in results:
                    continue
                def stream(name: str = name) -> Iterator[Estimate]:
                    return S.live_stream(m, name, samples=k, seed=seed, max_len=L, budget=S.APP_EXACT_BUDGET)

                def update(partial: Estimate, name: str = name) -> None:
                    draw({**results, name: partial})

                with status.container():
                    results[name] = C.run_stream(keys[name], stream, f"Scoring: {name}", on_update=update)
            status.success("Done: " + ", ".join(f"{n} {r.seconds:.1f} s" for n, r in results.items()))
    else:
        stopped = {name: p for name in wanted if name not in results and (p := C.partial(keys[name])) is not None}
        if stopped:
            status.warning("Stopped: " + ", ".join(f"{n} after {p.num_samples} of {p.requested} samples"
                                                   for n, p in stopped.items()) + ". Press Run to start again.")
            results = {**results, **stopped}
        elif not results:
            status.caption("Press Run to start scoring; the plots grow as chunks of samples are scored.")
    draw(results)


C.run_page(main)
