"""Helpers shared by the app's headless page tests (tests/test_app*.py): the small model and text
they open pages with, and readers of what a page shows (metrics, errors, plotly figures, buttons)."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

SMOL = "smollm2-135m"
SHORT = " Paris."  # 30 tokenizations under SmolLM2: small enough for exact


def metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def assert_clean(at: AppTest) -> None:
    """No exception element and no error message on the page."""
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def plotly(at: AppTest) -> list:
    """The plotly figures on the page, as plotly Figure objects."""
    import plotly.io

    return [plotly.io.from_json(e.proto.spec) for e in at.get("plotly_chart")]


def values(array) -> list:
    """A plotly data array as a list (Streamlit sends numeric arrays base64-encoded)."""
    if isinstance(array, dict) and "bdata" in array:
        import base64

        import numpy as np

        return np.frombuffer(base64.b64decode(array["bdata"]), dtype=array["dtype"]).tolist()
    return list(array)


def click(at: AppTest, key: str) -> AppTest:
    at.button(key=key).click().run()
    return at
