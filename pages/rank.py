"""Rank correlation: does the constrained LM (q) order tokenizations as the LM (p) does?"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from marginal_core import viz
from pages._app import inputs, live, loaders, results, server, widgets
from pages._app.errors import guard
from pages._app.table1 import RANK_SENTENCES, rank_table


def page() -> None:
    """The rank correlation page."""
    from marginal_core import analysis  # scipy: imported when this page is opened, not at start

    inp = inputs.current()
    st.title("Rank correlation between p and q")
    st.markdown(
        "Importance sampling works well when the proposal *q* (the model constrained to the lattice) "
        "ranks tokenizations as the model *p* does. Each dot is a distinct proxy sample; **Spearman's ρ** "
        "measures how well the two orders agree (1 = identical). The paper finds only moderate "
        "agreement (Table 1), one reason proxy sampling converges slowly."
    )

    loaders.require_lattice(inp)  # validates the text before anything runs
    c = st.columns(3)
    pk = widgets.proxy_samples(c[0])
    seed = widgets.seed(c[1])

    key = inp.key("proxy", pk, seed)
    est = results.cached(key)
    if est is None:
        b = st.columns([1, 1, 4])
        draw = b[0].button("Draw proxy samples", type="primary", key="draw")
        live.stop_button(b[1])
        if draw:
            m = loaders.require_marginalizer(inp)
            with guard("drawing proxy samples"):
                est = live.run_live(key, m, "proxy", "Drawing proxy samples", samples=pk, seed=seed)
        elif (stopped := live.unfinished(key)) is not None:
            st.warning(f"Stopped {stopped.describe()}. Press the button to start again.")
        else:
            st.caption("Press the button to draw proxy samples for the text in the sidebar.")
    if est is not None:
        rho, n = analysis.spearman(est)
        c[2].metric("Spearman ρ", "n/a" if rho != rho else f"{rho:.3f}", help=f"over {n} distinct samples")
        st.plotly_chart(viz.rank_scatter(est, rho), key="scatter")

    st.divider()
    st.subheader("Table 1, small: ρ for sentences of several lengths")
    st.markdown(
        "For each sentence, draw proxy samples, then take ρ over the distinct ones; report mean ± standard "
        "deviation per length. The paper uses 15 sentences per length and 1000 unique tokenizations; the "
        "defaults here are small so that a CPU finishes in about a minute."
    )
    t = st.columns(3)
    lengths = t[0].multiselect("Lengths (characters)", sorted(RANK_SENTENCES), default=[50, 100], key="lengths",
                               bind="query-params")
    per = int(t[1].number_input("Sentences per length", min_value=1, max_value=5, value=2, key="per",
                                bind="query-params"))
    most = server.policy().cap_samples(5000)
    tk = int(t[2].number_input("Proxy samples per sentence", min_value=3, max_value=most, value=min(50, most), step=10,
                               key="tk", bind="query-params"))
    with st.expander("Sentences"):
        for length in sorted(lengths):
            for sentence in RANK_SENTENCES[length][:per]:
                st.markdown(f"- ({len(sentence)} chars) {sentence}")

    tkey = (inp.model, inp.device, inp.dtype, "table1", tuple(sorted(lengths)), per, tk, seed)
    table = results.cached(tkey)
    if table is None and lengths and st.button("Compute the table", key="table"):
        loaders.model(inp.model, inp.device, inp.dtype)
        rows = []
        jobs = [(length, s) for length in sorted(lengths) for s in RANK_SENTENCES[length][:per]]
        bar = live.Bar("Sentences")
        with guard("computing the table"):
            for i, (length, sentence) in enumerate(jobs):
                bar.update(i / len(jobs), f"Sentence {i + 1} of {len(jobs)} ({length} chars)")
                m = loaders.marginalizer_for(inp.model, inp.device, inp.dtype, sentence, "")
                est = m.proxy(tk, seed=seed, should_stop=bar.should_stop)
                if est.run.cancelled:
                    st.stop()
                rho, n = analysis.spearman(est)
                rows.append({"length": length, "chars": len(sentence), "sentence": sentence, "rho": rho,
                             "distinct": n, "draws": est.num_samples, "seconds": round(est.seconds, 1)})
            bar.empty()
            table = pd.DataFrame(rows)
            results.store(tkey, table)
    if table is not None:
        st.dataframe(rank_table(table), hide_index=True)
        st.dataframe(table, hide_index=True)


if __name__ == "__main__":  # a fresh server's first request, in Streamlit's legacy pages/ mode (see app.py)
    from app import main

    main()
