"""The Streamlit app: `streamlit run app.py` (or `make app`).

This file is the router: on every run it draws the inputs every page shares (model, device,
text, context) in the sidebar, bound to the URL so that a link reproduces a view, and runs the
chosen page; a page reads the inputs with ``pages._app.ui.inputs.current()``. Each page shows its
own errors as friendly messages, never a traceback.

The pages are modules of pages/views/ and pages/tasks/ (the navigation's two sections), each a
``page()`` function that this router runs; no page imports app.py.

It is also the server's entry point. With a folder named pages/ beside it, a fresh Streamlit
server (1.67) starts in its legacy pages/ mode (``PagesManager.uses_pages_directory``, set as its
first session starts) and stays there until ``st.navigation`` first runs: a run in that mode first
navigates among app.py and the files at the top of pages/ (none sits there), finds no page for a
link's path and sends "Page not found", a dialog over the right page that takes the clicks until
it is closed. So this file also defines ``app = st.App(__file__)``: ``streamlit run app.py`` finds
it and imports this module before the server's first request, and that import records what
``st.navigation`` records. Every way of starting the server, ``streamlit run app.py`` (what hosted
services run) as well as ``make app`` and ``make serve-class`` (pages/_app/runtime/serve.py, which runs
that command), answers a fresh server's first request for a page's link with that page and no
dialog (tests/app/test_server_starts.py). Home's own path, /home, is one too: Streamlit gives the
default page the path "" and would answer /home with that dialog, so a run asked for /home is
asked for the default page (``home_by_its_name``). The import also records where the server
listens, which decides what it offers (pages/_app/runtime/server.py), and says that once in the
server's log. Run as the script, once per session's run, it routes.
"""

from __future__ import annotations

import streamlit as st
from streamlit.runtime.pages_manager import PagesManager
from streamlit.runtime.scriptrunner import get_script_run_ctx

from marginal_core.serving.turns import TurnCancelled
from pages._app.runtime import live, loaders, machine, server
from pages._app.ui import fonts, inputs, lesson, links, projector
from pages.tasks import qa, results, translation
from pages.views import compare, home, lattice, mass, rank, running, samplers, surprisal
from pages.views import next as next_page

HOME = "home"  # Home's path: the default page's, "" to Streamlit, and also its own (/home)


def navigation() -> dict[str, list[st.Page]]:
    """The app's pages by section, in the lesson's order (lesson.py; new Page objects on every run:
    each records that it ran)."""
    return {
        "Views": [
            st.Page(home.page, title="Home", icon=":material/home:", url_path=HOME, default=True),
            st.Page(lattice.page, title="Lattice", icon=":material/account_tree:", url_path="lattice"),
            st.Page(surprisal.page, title="Surprisal", icon=":material/bar_chart:", url_path="surprisal"),
            st.Page(next_page.page, title="What comes next", icon=":material/keyboard_tab:", url_path="next"),
            st.Page(mass.page, title="Probability mass", icon=":material/balance:", url_path="mass"),
            st.Page(samplers.page, title="Samplers", icon=":material/casino:", url_path="samplers"),
            st.Page(running.page, title="Running estimates", icon=":material/timeline:", url_path="running"),
            st.Page(compare.page, title="Compare models", icon=":material/compare_arrows:", url_path="compare"),
            st.Page(rank.page, title="Rank correlation", icon=":material/scatter_plot:", url_path="rank"),
        ],
        "Downstream tasks": [
            st.Page(qa.page, title="Multiple-choice Q&A", icon=":material/quiz:", url_path="qa"),
            st.Page(translation.page, title="Translation", icon=":material/translate:", url_path="translation"),
            st.Page(results.page, title="Results folders", icon=":material/folder_open:", url_path="results"),
        ],
    }


def home_by_its_name() -> None:
    """A request for /home (Home's own url_path, which Streamlit gives the default page as ""):
    asked for as the default page, not answered with "Page not found" over Home."""
    ctx = get_script_run_ctx()
    if ctx is not None and ctx.pages_manager.intended_page_name == HOME and not ctx.pages_manager.intended_page_script_hash:
        ctx.pages_manager.set_script_intent("", "")


def main() -> None:
    """One run of the app: the navigation, the shared inputs, then the chosen page."""
    st.set_page_config(page_title="marginal: tokenization marginals", page_icon=":material/join:", layout="wide",
                       initial_sidebar_state="collapsed" if projector.requested() else "auto")
    fonts.inject()  # every script's glyphs in Streamlit's own text too (the chips carry theirs)
    sections = navigation()
    home_by_its_name()
    page = st.navigation(sections)
    if (opens := inputs.page_to_open()) is not None:  # an example that opens its own page (Compare)
        target = next(p for pages in sections.values() for p in pages if p.url_path == opens)
        st.switch_page(target, query_params={})  # the widgets bound to the URL write theirs again there
    live.begin_script_run()
    inputs.sidebar()
    inp = inputs.current()
    loaders.prepared(inp.model)  # a fresh cache's first visitors: the model's preparation, step by step
    loaders.preload(inp)  # the model loads while the page draws what needs none
    links.take_numbers()
    notice = st.container()  # above the page: what the link held that the page could not use
    queue = st.container()  # above the page: where this session's run waits for the machine
    try:
        with machine.taking_turns(queue, live.stop_check()):
            page.run()
    except TurnCancelled:
        st.stop()  # stopped while waiting: the newer run of this session shows what was kept
    finally:
        links.report_numbers(notice)
        lesson.next_link(page.url_path, {p.url_path or "home": p for group in sections.values() for p in group})


if __name__ == "__main__":  # the script: one session's run
    main()
else:  # the module the server imports before its first request (`app:app`)
    PagesManager.uses_pages_directory = False  # as st.navigation sets it: never the legacy pages/ mode
    server.started(st.get_option("server.address"))  # its mode follows where it listens; said once, in its log
    app = st.App(__file__)
