"""Results: open a results folder (`marginal scan`, `eval-qa`, `eval-mt`, lm-eval) and go from its
rows to the views of one text; a scan of two or more models also compares them text by text."""

from __future__ import annotations

from urllib.parse import urlencode

import pandas as pd
import streamlit as st

from marginal_core.corpus.scan_compare import MOVED_NATS, Comparison, differ_most
from marginal_core.viz.charts import paired_scatter
from pages._app.runtime import folders, server
from pages._app.ui import wrapped_tables
from pages._app.ui.error_messages import guard, show_error


def page() -> None:
    """The results page."""
    st.title("Results folders")
    st.markdown(
        "Open the folder a command wrote: `marginal scan FILE --out DIR` (texts ranked by how much the "
        "marginal gains over the canonical tokenization), `marginal eval-qa` / `eval-mt` (the questions or "
        "sentences whose pick differs by method), or an lm-eval run. Each row links to the mass flow of its "
        "text (Lattice) and its probability mass, with its context and model; a scan of several models also "
        "compares two of them text by text, each text linked to the Compare page."
    )
    raw = _choose()
    if not raw:
        return
    try:
        folder = folders.open_folder(raw)
    except Exception as exc:  # noqa: BLE001 -- one friendly message, never a traceback
        show_error(exc, "opening the folder")
        return
    st.caption(f"{folders.KINDS[folder.kind]} folder")
    with guard("reading the folder"):
        if folder.kind == "scan":
            _scan(folder)
        elif folder.kind == "lm-eval":
            link = "qa?" + urlencode({"qa_source": "an lm-eval results folder", "qa_lm_eval": raw})
            st.page_link(link, label="Open this lm-eval run on the Multiple-choice Q&A page", icon=":material/quiz:")
        else:
            _changed(folder)


def _choose() -> str:
    """The folder to open: any path on a local server; on a class server, only the app's own."""
    own = [str(p) for p in folders.app_folders()]
    if not server.policy().shows_server_paths:
        if not own:
            st.info("No results here yet: the Q&A and translation pages keep their runs, and list here once run.")
            return ""
        return st.selectbox("Results of this server's Q&A and translation pages", own, key="folder_pick")
    raw = st.text_input("Results folder", key="folder", bind="query-params",
                        placeholder="e.g. runs/scan (the --out of marginal scan, eval-qa or eval-mt)")
    if not raw.strip() and own:
        st.caption("Or one the app's own Q&A and translation pages wrote: " + ", ".join(f"`{p}`" for p in own[:5]))
    return raw


def _scan(folder: folders.Folder) -> None:
    table = folders.scan_table(folder.path)
    rows = folders.scan_rows(table)
    st.subheader(f"{rows['text'].nunique()} texts, largest gain first")
    st.caption("Gain: log p(text) by the best bound any method found, minus log p(canonical), in nats (natural-log "
               "units: a gain of 1 nat is a factor e ≈ 2.7). Off the canonical: the share of the text's probability "
               "the canonical tokenization misses.")
    wrapped_tables.wrapped_dataframe(rows, {"text": 360, "heaviest tokenization": 360}, column_config={
        "gain (nats)": st.column_config.NumberColumn(format="%.3f"),
        "off the canonical (%)": st.column_config.NumberColumn(format="%.1f"),
        "mass flow": st.column_config.LinkColumn(display_text="mass flow"),
        "probability mass": st.column_config.LinkColumn(display_text="probability mass"),
    })
    regions = folders.surprisal_rows(folder.path, table)
    if regions is not None:
        st.subheader("Where marginal and canonical surprisal differ most")
        st.caption("The regions of the scan's surprisal.csv (`marginal scan --surprisal`) where the surprisal over "
                   "every tokenization and the canonical tokenization's differ most, in nats: the canonical row "
                   "charges each token to the region of its first byte that is not whitespace, so a word's share "
                   "moves where the tokenizer cuts it.")
        wrapped_tables.wrapped_dataframe(regions, {"region": 160}, column_config={
            "surprisal": st.column_config.LinkColumn(display_text="surprisal")})
    models = list(dict.fromkeys(table["model"]))
    if len(models) > 1:
        with guard("comparing the models"):
            _compare(table, models)


def _compare(table: pd.DataFrame, models: list[str]) -> None:
    """Two models of the scan text by text: the gains and log p(text) plotted against each other,
    Spearman's rho of the gains, the texts that flip and those that differ most, the paired CSV."""
    st.subheader("Compare models")
    if len(models) > 2:
        c = st.columns(2)
        a = c[0].selectbox("Model A", models, key="scan_a", bind="query-params")
        b = c[1].selectbox("Model B", [m for m in models if m != a], key="scan_b", bind="query-params")
    else:
        a, b = models
    comparison = Comparison.of(table, a, b)
    paired = comparison.paired
    if not len(paired):
        st.info(f"No text was scored under both {a} and {b} yet.")
        return
    st.caption(f"A: {a}, B: {b}. Each text's best bound under both; the difference log p(A) − log p(B) by the "
               "canonical tokenizations and by the marginal, in nats: a text *flips* where marginalizing changes "
               "which model finds it more likely.")
    rho, flips = comparison.rho, comparison.flips
    c = st.columns(3)
    c[0].metric("Spearman's ρ of the gains", "n/a" if rho is None else f"{rho:.3f}",
                help="Over the texts both models scored; n/a with fewer than 3 texts or one model's gains all equal.")
    c[1].metric("Texts that flip", f"{len(flips)} of {len(paired)}")
    c[2].metric(f"Difference moved ≥ {MOVED_NATS} nats", f"{int(paired['moved'].sum())} of {len(paired)}")
    c = st.columns(2)
    c[0].plotly_chart(paired_scatter(paired, a, b, "gain_nats", "Gain over the canonical", "gain (nats)"),
                      key="compare_gain")
    c[1].plotly_chart(paired_scatter(paired, a, b, "log_p_text", "log p(text), best bound", "log p(text)"),
                      key="compare_log_p")
    links = {"compare": st.column_config.LinkColumn(display_text="compare")}
    if len(flips):
        st.markdown(f"**The {len(flips)} texts where marginalizing changes which model is more likely**")
        wrapped_tables.wrapped_dataframe(folders.paired_rows(flips).drop(columns="flips"), {"text": 360},
                                 column_config=links)
    else:
        st.success("Marginalizing changes which model is more likely on none of these texts.")
    by = st.radio("The texts where the models differ most, by", ["log p(text)", "gain"], horizontal=True,
                  key="differ_by", bind="query-params")
    shown = differ_most(paired, "marginal" if by == "log p(text)" else "gain")
    wrapped_tables.wrapped_dataframe(folders.paired_rows(shown), {"text": 360}, column_config=links)
    st.download_button("Download the paired table (CSV)", paired.to_csv(index=False), file_name="compare.csv",
                       mime="text/csv", key="compare_csv")


def _changed(folder: folders.Folder) -> None:
    rows = folders.changed_rows(folder)
    unit = "questions" if folder.kind == "qa" else "sentences"
    if not len(rows):
        st.success(f"Every method picks the same answer on every {unit[:-1]} scored in this folder.")
        return
    st.subheader(f"{len(rows)} {unit} whose pick differs by method")
    st.caption("Each method's pick and, in brackets, its margin in nats over its second choice; the links open "
               "the mass flow of each pick after its context.")
    links = {c: st.column_config.LinkColumn(display_text="mass flow") for c in rows.columns if c.endswith("mass flow")}
    wrapped_tables.wrapped_dataframe(rows, {}, column_config=links)

