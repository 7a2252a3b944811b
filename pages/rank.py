"""Rank correlation: does the constrained LM (q) order tokenizations as the LM (p) does?"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from marginal_core import analysis
from marginal_core import app_state as S
from marginal_core import viz
from pages import _common as C


def main(inp: C.Inputs) -> None:
    st.title("Rank correlation between p and q")
    st.markdown(
        "Importance sampling works well when the proposal *q* (the model constrained to the lattice) "
        "ranks tokenizations as the model *p* does. Each dot is a distinct proxy sample; **Spearman's ρ** "
        "measures how well the two orders agree (1 = identical). The paper finds only moderate "
        "agreement (Table 1), one reason proxy sampling converges slowly."
    )

    C.require_lattice(inp)  # validates the text before anything runs
    c = st.columns(3)
    pk = int(c[0].number_input("Proxy samples", min_value=3, max_value=100_000, value=S.DEFAULT_SAMPLES, step=50,
                               key="pk", bind="query-params"))
    seed = int(c[1].number_input("Seed", min_value=0, value=0, key="seed", bind="query-params"))

    key = inp.key("proxy", pk, seed)
    est = C.cached(key)
    if est is None:
        if st.button("Draw proxy samples", type="primary", key="draw"):
            m = C.require_marginalizer(inp)
            with C.guard("drawing proxy samples"):
                est = C.run_stream(key, lambda: S.live_stream(m, "proxy", samples=pk, seed=seed), "Drawing proxy samples")
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
    lengths = t[0].multiselect("Lengths (characters)", sorted(S.RANK_SENTENCES), default=[50, 100], key="lengths",
                               bind="query-params")
    per = int(t[1].number_input("Sentences per length", min_value=1, max_value=5, value=2, key="per",
                                bind="query-params"))
    tk = int(t[2].number_input("Proxy samples per sentence", min_value=3, max_value=5000, value=50, step=10, key="tk",
                               bind="query-params"))
    with st.expander("Sentences"):
        for length in sorted(lengths):
            for sentence in S.RANK_SENTENCES[length][:per]:
                st.markdown(f"- ({len(sentence)} chars) {sentence}")

    tkey = (inp.model, inp.device, "table1", tuple(sorted(lengths)), per, tk, seed)
    table = C.cached(tkey)
    if table is None and lengths and st.button("Compute the table", key="table"):
        C.model(inp.model, inp.device)
        rows = []
        jobs = [(length, s) for length in sorted(lengths) for s in S.RANK_SENTENCES[length][:per]]
        bar = st.progress(0.0, text="Sentences…")
        with C.guard("computing the table"):
            for i, (length, sentence) in enumerate(jobs):
                bar.progress(i / len(jobs), text=f"Sentence {i + 1} of {len(jobs)} ({length} chars)")
                m = C.marginalizer_for(inp.model, inp.device, sentence, "")
                est = m.proxy(tk, seed=seed)
                rho, n = analysis.spearman(est)
                rows.append({"length": length, "chars": len(sentence), "sentence": sentence, "rho": rho,
                             "distinct": n, "draws": est.num_samples, "seconds": round(est.seconds, 1)})
            bar.empty()
            table = pd.DataFrame(rows)
            C.store(tkey, table)
    if table is not None:
        st.dataframe(S.rank_table(table), hide_index=True)
        st.dataframe(table, hide_index=True)


C.run_page(main)
