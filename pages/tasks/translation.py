"""Translation reranking: candidates ranked by canonical probability vs. marginals (paper Table 4)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import streamlit as st

from marginal_core.tasks import mt
from marginal_core.tasks.report import load_rows, mt_report
from marginal_core.tasks.store import read_items
from pages._app.runtime import loaders, server
from pages._app.ui import inputs
from pages._app.ui.error_messages import show_error
from pages._app.ui.task_tables import choices_table, mt_sentences_table
from pages._app.ui.tasks import app_folder, run_row, run_task, samples_view, scoring_settings, speed_metrics

if TYPE_CHECKING:
    from pathlib import Path

LOCAL = "local file…"


ABOUT = (
    "The model (sidebar) samples distinct candidate translations of each sentence after a zero-shot "
    "prompt; each method keeps the candidate it finds most probable: **Canon** by the canonical "
    "tokenization, **Lattice**, **Proxy** and **Beam** by the marginal over tokenizations. The kept "
    "translations are scored against the references with **chrF** (COMET-22 is used only where "
    "`unbabel-comet` and its model are installed). `en-de` and `en-cs` are 30 sentences each "
    "shipped with the project."
)


def page() -> None:
    """The translation page."""
    inp = inputs.current()
    st.title("Translation reranking")
    st.markdown(ABOUT)
    with st.expander("Prompt"):
        st.code(mt.PROMPT.format(src="English", tgt="German", source="{source}") + " {candidate}", language=None)
    dataset, target, limit, n, k, seed, methods = _settings()
    try:
        pairs, langs = mt.load_pairs(dataset, limit)
        mt.languages_for(dataset, langs, target)
    except Exception as exc:  # noqa: BLE001
        show_error(exc, "loading the sentences")
        st.stop()
    folder = app_folder("mt", dataset=dataset, model=inp.model, samples=k, seed=seed, candidates=n, target=target)

    prior = ("expect minutes per sentence on a CPU (its candidates are generated, then each scored"
             + (", the proxy drawing each of its k samples token by token" if "proxy" in methods else "")
             + "), much less on a GPU")

    def start() -> None:
        lm = loaders.model(inp.model, inp.device, inp.dtype)
        run_task(
            lambda **watch: mt.run_mt(dataset, folder, lm=lm, limit=limit, candidates=n, samples=k, methods=methods,
                                      seed=seed, target_language=target, show_bar=False, **watch),
            "sentences", "translating", lambda p: p.source,
        )

    run_row("mt", folder, [p.id for p in pairs], methods, f"{len(pairs)} sentences × {n} candidates × "
            f"{len(methods)} methods", "sentence", prior, start)

    if not (folder / "rows.csv").is_file():
        st.caption("Press Run to generate and rerank translations; a progress bar counts the sentences, and Stop "
                   "keeps those finished.")
        return
    _report(inp, folder, pairs, methods)


def _settings() -> tuple[str, str | None, int, int, int, int, list[str]]:
    """The dataset (a packaged pair, or a local file and its target language where the server
    shows its paths), sentences, candidates, k, the seed and the methods; the page ends, said,
    without a file or a method."""
    c = st.columns([2, 1, 1, 1, 1, 2])
    rules = server.policy()  # a server others reach opens none of its files and caps k
    choice = c[0].selectbox("Dataset", list(mt.PACKAGED_PAIRS) + ([LOCAL] if rules.shows_server_paths else []),
                            key="mt_dataset", bind="query-params")
    dataset, target = choice, None
    if choice == LOCAL:
        d = st.columns(2)
        dataset = d[0].text_input("Path to a .tsv or .jsonl file (source, reference)", key="mt_path").strip()
        target = d[1].text_input("Target language", value="", key="mt_target",
                                 help="e.g. German; read from the file name (en-de…) when empty.").strip() or None
        if not dataset:
            st.info("Type the path of a sentence file.")
            st.stop()
    limit = int(c[1].number_input("Sentences", min_value=1, max_value=2000, value=5, key="mt_limit", bind="query-params"))
    n = int(c[2].number_input("Candidates", min_value=1, max_value=16, value=4, key="mt_candidates", bind="query-params"))
    k, seed, methods = scoring_settings(c[3:6], "mt")
    return dataset, target, limit, n, k, seed, methods


def _report(inp: inputs.Inputs, folder: Path, pairs: list[mt.Pair], methods: list[str]) -> None:
    """Each method's chrF (or COMET-22), the paper's tables, the sentences and one sentence's candidates."""
    report = mt_report(folder, sentences=[p.id for p in pairs], methods=methods)
    if report["sentences"] < len(pairs):
        st.warning(f"{report['sentences']} of {len(pairs)} sentences are done; press Run to continue.")
    if not report["sentences"]:
        return
    m = st.columns(len(report["scores"]) + 2)
    for i, (name, score) in enumerate(report["scores"].items()):
        m[i].metric(f"{name} chrF", f"{score['chrf']:.1f}")
    speed_metrics(report, m[-2], m[-1], "candidates")
    if report["metric"] != "COMET-22":
        st.caption(f"Figures are chrF, not COMET-22 ({report['comet_note']}).")
    with st.expander("Tables (as in the paper)"):
        st.markdown(report["markdown"])

    st.subheader("Sentences")
    table = mt_sentences_table(folder, [p.id for p in pairs])
    st.dataframe(table, hide_index=True)

    st.subheader("One sentence")
    items = read_items(folder)
    done = [p for p in pairs if p.id in set(table["item"])]
    p = st.selectbox("Sentence", done, format_func=lambda p: f"{p.index}: {p.source[:100]}", key="mt_pick",
                     bind="query-params")
    if p is None:
        return
    st.markdown(f"**{p.source}**  \nReference: *{p.reference}*")
    st.dataframe(choices_table(load_rows(folder), p.id), hide_index=True)
    samples_view(folder, p.id, "Candidate", items[p.id]["candidates"], methods, ("mt_cand", "mt_sample_method"),
                 inp.model)
