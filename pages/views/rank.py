"""Rank correlation: does the constrained LM (q) order tokenizations as the LM (p) does?"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from marginal_core import viz
from marginal_core.corpus.scan import text_id
from marginal_core.tasks import rank
from marginal_core.tasks.evaluator import evaluate
from pages._app.runtime import loaders, server
from pages._app.ui import inputs, live_page, widgets
from pages._app.ui.tasks import app_folder, run_task
from pages.views.table1 import RANK_SENTENCES

# The summary's columns as the page names them.
SUMMARY_COLUMNS = {"length": "length ≈ (chars)", "sentences": "sentences", "with_rho": "with ρ", "rho": "ρ",
                   "distinct": "distinct (mean)"}


def page() -> None:
    """The rank correlation page."""
    from marginal_core.viz import analysis  # scipy: imported when this page is opened, not at start

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

    job = live_page.estimate_job(inp, "proxy", inp.key("proxy", pk, seed), "proxy", "Drawing proxy samples", said="",
                                 samples=pk, seed=seed)
    est = live_page.run_on_press("Draw proxy samples", "draw", [job], widths=[1, 1, 4], doing="drawing proxy samples",
                                 idle=None if job.stopped else "Press the button to draw proxy samples for the text in "
                                 "the sidebar.").get("proxy")
    if est is not None:
        rho, n = analysis.spearman(est)
        c[2].metric("Spearman ρ", "n/a" if rho != rho else f"{rho:.3f}", help=f"over {n} distinct samples")
        st.plotly_chart(viz.rank_scatter(est, rho), key="scatter")

    st.divider()
    _table1(inp, seed)


def _table1(inp: inputs.Inputs, seed: int) -> None:
    """Table 1, small: Spearman's rho for sentences of several lengths, as the paper reports it."""
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

    sentences = rank.sentences_by_length({length: [(text_id(t, ""), t) for t in RANK_SENTENCES[length][:per]]
                                          for length in lengths})
    task = rank.RankTask("app", sentences)
    folder = app_folder("rank", dataset="app", model=inp.model, dtype=inp.dtype, samples=tk, seed=seed)
    if sentences and st.button("Compute the table", key="table"):
        lm = loaders.model(inp.model, inp.device, inp.dtype)
        run_task(lambda **watch: evaluate(task, folder, rank.rank_options(tk, seed, show_bar=False), lm=lm, **watch),
                 "sentences", "ranking the sentences", lambda s: s.text)
    if sentences and (folder / "rows.csv").is_file():
        report = task.report(folder, [s.id for s in sentences], rank.RANK_METHODS)
        if report["sentences"] < len(sentences):
            st.warning(f"{report['sentences']} of {len(sentences)} sentences are ranked; press the button to continue.")
        st.dataframe(pd.DataFrame(report["by_length"]).rename(columns=SUMMARY_COLUMNS)[list(SUMMARY_COLUMNS.values())],
                     hide_index=True)
        st.dataframe(pd.DataFrame(report["rows"]).drop(columns="item"), hide_index=True)

