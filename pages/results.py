"""Results: open a results folder (`marginal scan`, `eval-qa`, `eval-mt`, lm-eval) and go from its
rows to the views of one text."""

from __future__ import annotations

from urllib.parse import urlencode

import streamlit as st

from pages._app import folders, server, tables
from pages._app.errors import guard, show_error


def page() -> None:
    """The results page."""
    st.title("Results folders")
    st.markdown(
        "Open the folder a command wrote: `marginal scan FILE --out DIR` (texts ranked by how much the "
        "marginal gains over the canonical tokenization), `marginal eval-qa` / `eval-mt` (the questions or "
        "sentences whose pick differs by method), or an lm-eval run. Each row links to the mass flow of its "
        "text (Lattice) and its probability mass, with its context and model."
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
    rows = folders.scan_rows(folder.path)
    st.subheader(f"{rows['text'].nunique()} texts, largest gain first")
    st.caption("Gain: log p(text) by the best bound any method found, minus log p(canonical), in nats (natural-log "
               "units: a gain of 1 nat is a factor e ≈ 2.7). Off the canonical: the share of the text's probability "
               "the canonical tokenization misses.")
    tables.wrapped_dataframe(rows, {"text": 360, "heaviest tokenization": 360}, column_config={
        "gain (nats)": st.column_config.NumberColumn(format="%.3f"),
        "off the canonical (%)": st.column_config.NumberColumn(format="%.1f"),
        "mass flow": st.column_config.LinkColumn(display_text="mass flow"),
        "probability mass": st.column_config.LinkColumn(display_text="probability mass"),
    })


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
    tables.wrapped_dataframe(rows, {}, column_config=links)


if __name__ == "__main__":  # a fresh server's first request, in Streamlit's legacy pages/ mode (see app.py)
    from app import main

    main()
