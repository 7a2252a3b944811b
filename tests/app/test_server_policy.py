"""A server others reach (pages/_app/runtime/server.py): MARGINAL_SERVE=class and the MARGINAL_MAX_* caps.

The policy is read from the environment on every script run, so each test sets its variables
with monkeypatch before it builds its AppTest (which runs the app in this process). The pages run
with SmolLM2 135M and tiny texts; a refused model stops the run before anything loads.
"""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from bench.support.apptest import app
from marginal_core.ground.errors import UnknownModelError
from pages._app.runtime import serve, server
from pages._app.runtime.server import PolicyError, ServerPolicy
from pages._app.ui import error_messages

SMOL = "smollm2-135m"
SHORT = " Paris."
SECRET = "/srv/marginal-secret"  # a server path no message may name in class mode


def shown(at: AppTest, kinds: tuple[str, ...] = ("error", "warning", "info", "caption")) -> list[str]:
    """Every message (and caption) on the page and in the sidebar."""
    return [e.value for kind in kinds for e in at.get(kind)]


@pytest.fixture
def class_mode(monkeypatch):
    """A server in class mode with no cap set by hand (the class defaults)."""
    for name in (server.ALLOWED_MODELS, server.MAX_SAMPLES_ENV, server.MAX_TEXT_CHARS_ENV, server.MAX_BEAM_WIDTH_ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(server.SERVE, "class")


@pytest.fixture
def loads(monkeypatch) -> list[str]:
    """The model names the app asks the library to load a tokenizer or model for, in order."""
    import marginal_core.models as models

    names: list[str] = []
    for loader in ("load_model", "load_tokenizer", "load_text_tokenizer"):
        real = getattr(models, loader)

        def record(name, *args, _real=real, **kwargs):
            names.append(name)
            return _real(name, *args, **kwargs)

        monkeypatch.setattr(models, loader, record)
    return names


# --------------------------------------------------------------------------------------------
# The policy


def test_no_variable_keeps_the_local_freedom():
    rules = ServerPolicy.from_env({})
    assert rules == ServerPolicy() and not rules.class_mode and rules.shows_server_paths
    assert rules.allows("/any/folder") and rules.allows("meta-llama/Llama-2-7b")
    assert rules.cap_samples(100_000) == 100_000 and rules.cap_beam_width(1024) == 1024
    assert rules.max_text_chars is None and rules.offer() == ""


@pytest.mark.parametrize(("env", "address", "mode", "why"), [
    ({}, None, "open", ""),  # no server (AppTest, a notebook)
    ({}, "127.0.0.1", "open", "it listens on this machine only"),  # make app
    ({}, "localhost", "open", "it listens on this machine only"),
    ({}, "::1", "open", "it listens on this machine only"),
    ({}, "", "class", "it listens on every network interface"),  # plain streamlit run app.py
    ({}, "0.0.0.0", "class", "it listens on every network interface"),
    ({}, "192.168.1.20", "class", "it listens on 192.168.1.20"),
    ({"SPACE_ID": "someone/demo"}, "127.0.0.1", "class", "it runs on Hugging Face Spaces: SPACE_ID is set"),
    ({"SPACE_ID": "someone/demo"}, None, "class", "it runs on Hugging Face Spaces: SPACE_ID is set"),
    ({server.SERVE: "open"}, "", "open", "MARGINAL_SERVE=open"),
    ({server.SERVE: "local"}, "0.0.0.0", "open", "MARGINAL_SERVE=local"),
    ({server.SERVE: "class"}, "127.0.0.1", "class", "MARGINAL_SERVE=class"),  # make serve-class HOST=127.0.0.1
])
def test_a_server_others_reach_is_in_class_mode_unless_told_otherwise(env, address, mode, why):
    """Issue 60: the mode follows where the server listens and where it runs, unless MARGINAL_SERVE
    says; the log's line and the sidebar's help say which and why."""
    rules = ServerPolicy.from_env(env, address)
    assert ("class" if rules.class_mode else "open") == mode and rules.why == why
    line = rules.describe()
    assert line.startswith(f"marginal app, {mode} mode" + (f" ({why}" if why else ":")), line
    assert ("MARGINAL_SERVE=open lifts the limits" in line) == (mode == "class" and not why.startswith("MARGINAL"))
    if mode == "class":
        assert rules.models == ("gemma3-270m", "smollm2-135m") and not rules.allows("/srv/x")
        assert why in rules.help() and "class mode" in rules.help()
    else:
        assert rules.models is None and line.endswith("any model id or folder, the app's own limits.")


def test_shared_passes_are_on_unless_turned_off():
    assert ServerPolicy.from_env({}).shared_passes
    assert ServerPolicy.from_env({server.SHARED_PASSES_ENV: " On "}).shared_passes
    assert not ServerPolicy.from_env({server.SHARED_PASSES_ENV: "off"}).shared_passes
    with pytest.raises(PolicyError, match="MARGINAL_SHARED_PASSES='sometimes': expected 'on' or 'off'"):
        ServerPolicy.from_env({server.SHARED_PASSES_ENV: "sometimes"})


def test_class_mode_defaults_and_caps_set_alone():
    rules = ServerPolicy.from_env({server.SERVE: "class"})
    assert rules.models == ("gemma3-270m", "smollm2-135m") and not rules.shows_server_paths
    assert (rules.max_samples, rules.max_text_chars, rules.max_beam_width) == (1_000, 2_000, 64)
    assert rules.allows("SmolLM2-135M ") and not rules.allows("/etc") and not rules.allows("meta-llama/Llama-2-7b")
    assert rules.offer() == ("This server offers: gemma3-270m, smollm2-135m; samples k up to 1,000; beam width W up "
                             "to 64; texts and contexts up to 2,000 characters.")
    alone = ServerPolicy.from_env({server.MAX_SAMPLES_ENV: "500", server.ALLOWED_MODELS: "smollm2-135m, org/model,"})
    assert not alone.class_mode and alone.shows_server_paths
    assert alone.models == ("smollm2-135m", "org/model") and alone.cap_samples(1_000) == 500
    assert alone.max_beam_width is None and alone.max_text_chars is None
    assert ServerPolicy.from_env({server.SERVE: "class", server.MAX_SAMPLES_ENV: "50"}).max_samples == 50


@pytest.mark.parametrize("name, value", [
    (server.SERVE, "klass"), (server.MAX_SAMPLES_ENV, "abc"), (server.MAX_SAMPLES_ENV, "5"),
    (server.MAX_SAMPLES_ENV, "1000000"), (server.MAX_TEXT_CHARS_ENV, "-3"), (server.MAX_BEAM_WIDTH_ENV, "8"),
    (server.ALLOWED_MODELS, " , "),
])
def test_a_bad_variable_is_one_message_naming_it(name, value):
    with pytest.raises(PolicyError, match=name):
        ServerPolicy.from_env({name: value})


def test_a_bad_variable_stops_the_app_with_one_message(monkeypatch):
    monkeypatch.setenv(server.MAX_SAMPLES_ENV, "lots")
    at = app(model=SMOL, text=SHORT)
    assert not at.exception
    (error,) = [e.value for e in at.error]
    assert "MARGINAL_MAX_SAMPLES='lots'" in error and "Tokenizations" not in [m.label for m in at.metric]


# --------------------------------------------------------------------------------------------
# Models


@pytest.mark.models
@pytest.mark.parametrize("asked", ["/etc", "meta-llama/Llama-2-7b"])
def test_class_mode_refuses_another_model_with_one_message_and_loads_nothing(class_mode, loads, asked, monkeypatch):
    monkeypatch.setenv(server.ALLOWED_MODELS, f"{SMOL},gemma3-270m")  # SmolLM2 first: the next run loads it fast
    at = app("pages/views/lattice.py", model=asked, text=SHORT)
    assert not at.exception
    (error,) = [e.value for e in at.error]
    assert "offers only these models: smollm2-135m, gemma3-270m" in error and asked in error
    assert "nothing was loaded" in error
    assert loads == [] and not at.metric
    box = at.sidebar.selectbox(key="model")
    assert box.options == [SMOL, "gemma3-270m"] and not box.proto.accept_new_options
    assert "This server offers: smollm2-135m, gemma3-270m; samples k up to 1,000; beam width W up to 64; texts and " \
           "contexts up to 2,000 characters." in shown(at)
    at.run()  # the next run (a click, a page) follows the sidebar: the first model offered
    assert not at.error and at.session_state["model"] == SMOL and "Tokenizations" in [m.label for m in at.metric]
    assert asked not in loads


@pytest.mark.models
def test_class_mode_offers_its_models(class_mode, loads):
    at = app("pages/views/lattice.py", model=SMOL, text=SHORT)
    assert not at.exception and not at.error
    assert at.session_state["model"] == SMOL and "Tokenizations" in [m.label for m in at.metric]
    assert set(loads) <= {SMOL}


def test_the_local_default_still_takes_any_id_or_folder(monkeypatch, loads):
    monkeypatch.delenv(server.SERVE, raising=False)
    at = app(model=SECRET, text="hello")
    assert not at.exception
    assert at.sidebar.selectbox(key="model").proto.accept_new_options
    (error,) = [e.value for e in at.error]
    assert f"there is no folder {SECRET}" in error  # the operator's own machine: the path helps
    assert SECRET in loads
    assert not any("This server offers" in c for c in shown(at))


# --------------------------------------------------------------------------------------------
# Caps


@pytest.mark.models
def test_class_mode_caps_k_and_w_and_a_link_past_them_is_named(class_mode):
    at = app("pages/views/samplers.py", model=SMOL, text=SHORT, k="5000", W="500", pk="20")
    assert not at.exception and not at.error
    assert at.number_input(key="k").max == 1_000 and at.number_input(key="pk").max == 1_000
    assert at.number_input(key="W").max == 64
    assert at.session_state["k"] == 100 and at.session_state["W"] == 32 and at.session_state["pk"] == 20
    (warning,) = [w.value for w in at.warning if "The link holds numbers" in w.value]
    assert "`k=5000` (using k = 100; this server takes k up to 1,000)" in warning
    assert "`W=500` (using W = 32; this server takes W up to 64)" in warning and "pk" not in warning


@pytest.mark.models
def test_a_cap_set_alone_limits_k_and_nothing_else(monkeypatch, loads):
    monkeypatch.delenv(server.SERVE, raising=False)
    monkeypatch.setenv(server.MAX_SAMPLES_ENV, "20")
    at = app("pages/views/samplers.py", model=SMOL, text=SHORT, k="50", W="5000")
    assert not at.exception and not at.error
    assert at.number_input(key="k").max == 20 and at.session_state["k"] == 20  # the default, within the cap
    (warning,) = [w.value for w in at.warning if "The link holds numbers" in w.value]
    assert "this server takes k up to 20" in warning and "`W=5000` (using W = 32)" in warning
    assert at.sidebar.selectbox(key="model").proto.accept_new_options  # any model still
    assert any(c == "This server offers: samples k up to 20." for c in shown(at))


@pytest.mark.models
def test_class_mode_caps_the_text_and_says_so(class_mode, monkeypatch):
    monkeypatch.setenv(server.MAX_TEXT_CHARS_ENV, "12")
    text = " Paris is the capital of France."
    at = app("pages/views/lattice.py", model=SMOL, text=text, context="")
    assert not at.exception and not at.error
    assert at.sidebar.text_area(key="text").proto.max_chars == 12
    assert at.session_state["text"] == text[:12]
    (warning,) = [w.value for w in at.warning if "The link's text" in w.value]
    assert f"has {len(text)} characters" in warning and "first 12" in warning
    at.run()
    assert not any("The link's text" in w.value for w in at.warning)


# --------------------------------------------------------------------------------------------
# No server path in class mode


def test_class_mode_messages_name_no_server_path(class_mode, monkeypatch):
    """An allowed model whose folder is gone (the operator offers it, so the model box names it):
    the message says it could not load, not where it looked."""
    monkeypatch.setenv(server.ALLOWED_MODELS, f"{SECRET},{SMOL}")
    at = app(text="hello")
    assert not at.exception
    (error,) = [e.value for e in at.error]
    assert "could not load the model" in error
    assert not any("/srv" in m for m in shown(at, ("error", "warning", "info")))


def test_describe_error_masks_paths_in_class_mode_only(monkeypatch):
    missing = OSError(f"[Errno 2] No such file or directory: '{SECRET}/questions.csv'")
    unknown = UnknownModelError(f"cannot load model 'x': there is no folder {SECRET} (it does not exist)")
    monkeypatch.delenv(server.SERVE, raising=False)
    assert SECRET in error_messages.describe_error(missing)[1] and SECRET in error_messages.describe_error(unknown)[1]
    monkeypatch.setenv(server.SERVE, "class")
    level, message = error_messages.describe_error(missing, "loading the dataset")
    assert level == "error" and SECRET not in message and "No such file or directory: '[server path]'" in message
    assert "/" not in error_messages.describe_error(unknown)[1]
    org = error_messages.describe_error(RuntimeError("org/name: see https://huggingface.co/org/name"))[1]
    assert "org/name: see https://huggingface.co/org/name" in org  # ids and URLs are not server paths


@pytest.mark.models
def test_class_mode_task_pages_open_no_server_file(class_mode):
    at = app("pages/tasks/qa.py", model=SMOL)
    assert not at.exception
    assert not at.radio and "local file…" not in at.selectbox(key="qa_dataset").options
    assert at.number_input(key="qa_k").max == 1_000
    assert not any("results in" in c.value or "/" in c.value for c in at.caption if "questions ×" in c.value)


def test_the_server_warms_the_model_the_sidebar_opens_on_and_only_allowed_ones():
    """pages/_app/runtime/serve.py: the first offered model by default; $MARGINAL_PRELOAD's allowed names, or none."""
    local, klass = ServerPolicy(), ServerPolicy.from_env({server.SERVE: "class", server.ALLOWED_MODELS: SMOL})
    assert serve.preloads(local, {}) == ["gemma3-270m"]
    assert serve.preloads(klass, {}) == [SMOL]
    assert serve.preloads(klass, {serve.PRELOAD_ENV: f"gemma3-270m, {SMOL}"}) == [SMOL]
    assert serve.preloads(local, {serve.PRELOAD_ENV: "None"}) == []


def test_the_launcher_reads_the_address_it_passes_to_streamlit():
    """make app / make serve-class: the models warmed are those the server will offer where it listens."""
    assert serve._option(["--server.headless", "true", "--server.address", "0.0.0.0"], "--server.address") == "0.0.0.0"
    assert serve._option(["--server.address=127.0.0.1"], "--server.address") == "127.0.0.1"
    assert serve._option(["--server.port", "8501"], "--server.address") is None
    everywhere = ServerPolicy.from_env({serve.PRELOAD_ENV: "meta-llama/Llama-2-7b, smollm2-135m"}, "")
    assert serve.preloads(everywhere, {serve.PRELOAD_ENV: "meta-llama/Llama-2-7b, smollm2-135m"}) == [SMOL]
