"""Start the app's server: check its variables, warm the model its visitors open on, run Streamlit.

``python -m pages._app.runtime.serve [streamlit options]`` is what ``make app`` and ``make serve-class``
run. It checks the ``MARGINAL_*`` variables (pages/_app/runtime/server.py) and stops with one line on a bad
one; then, while Streamlit starts and the first browser loads the page, a background thread loads
the model the sidebar opens on (its tokenizer, vocabulary index and weights, and one forward pass),
so the first visitor's Home shows log p(canonical) without waiting for the model's load.
``$MARGINAL_PRELOAD`` names the models to warm instead (comma-separated; ``none``: none). They
go into the library's one owner of loaded models, which the app's pages read.

Links work on a fresh server however it starts: what keeps the first request for a page's link
from a "Page not found" dialog is app.py's own (its ``st.App``, imported before the first
request), the same under this launcher as under a plain ``streamlit run app.py``.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path

from pages._app.runtime import server
from pages._app.ui.defaults import DEFAULT_CONTEXT, DEFAULT_TEXT

PRELOAD_ENV = "MARGINAL_PRELOAD"
APP = Path(__file__).resolve().parents[3] / "app.py"


def preloads(policy: server.ServerPolicy, env: Mapping[str, str] = os.environ) -> list[str]:
    """The models to warm: $MARGINAL_PRELOAD's, else the one the sidebar opens on."""
    from marginal_core.models import known_models

    raw = env.get(PRELOAD_ENV, "").strip()
    if raw.lower() == "none":
        return []
    if raw:
        return [name for n in raw.split(",") if (name := n.strip()) and policy.allows(name)]
    return [(policy.models or tuple(known_models()))[0]]


def warm(name: str) -> None:
    """Load a model as the app's pages load it (default device and dtype) and run one forward
    pass; a failure is left to the page that needs the model to report."""
    started = time.perf_counter()
    print(f"marginal app: warming {name} (a page that needs it shows its load until then)", file=sys.stderr, flush=True)
    try:
        from marginal_core import vocabulary
        from marginal_core.models import load_text_tokenizer
        from marginal_core.models.preparing import needs_preparing, prepare

        if needs_preparing(name):  # an empty cache: the preparation the first visitors' pages show
            preparation = prepare(name)
            preparation.wait()
            if preparation.error is not None:
                raise preparation.error

        vocabulary(load_text_tokenizer(name))  # the lattice's, before torch's import (Home's chips need it first)
        from marginal_core import Marginalizer
        from marginal_core.models import load_model

        # Home's own text after its context: the model keeps the context's prefill for the page
        Marginalizer(load_model(name, device=None, dtype="auto"), DEFAULT_TEXT, DEFAULT_CONTEXT).canonical_score()
    except Exception as exc:  # noqa: BLE001 -- the page's own load shows the error
        print(f"marginal app: could not preload {name}: {exc}", file=sys.stderr, flush=True)
        return
    print(f"marginal app: {name} loaded and warm in {time.perf_counter() - started:.1f} s", file=sys.stderr, flush=True)


def _option(argv: list[str], name: str) -> str | None:
    """A Streamlit option's value on the command line (``--name value`` or ``--name=value``), or None."""
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(f"{name}="):
            return arg.split("=", 1)[1]
    return None


def main(argv: list[str]) -> int:
    """Check the server's variables, start warming its models, then run Streamlit on app.py."""
    if server.check() != 0:
        return 2
    server.listening_on(_option(argv, "--server.address"))  # warm only what it will offer (app.py records it again)
    names = preloads(server.policy())
    threading.Thread(target=lambda: [warm(n) for n in names], name="preload", daemon=True).start()
    from streamlit.web import cli

    # `streamlit run app.py`, as a user types it: Streamlit serves app.py's st.App, whose import
    # keeps a fresh server out of the legacy pages/ mode (app.py's docstring), here as there.
    sys.argv = ["streamlit", "run", str(APP), *argv]
    return cli.main()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
