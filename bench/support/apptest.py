"""The app driven headless (streamlit.testing.v1.AppTest), opened as a shared link opens it."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parents[2] / "app.py")


def app(page: str | None = None, **params: str) -> AppTest:
    """An AppTest of app.py opened on a page with URL parameters, as a shared link opens it."""
    at = AppTest.from_file(APP, default_timeout=600)
    for key, value in params.items():
        at.query_params[key] = value
    if page:
        at.switch_page(page)
    return at.run()
