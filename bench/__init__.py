"""Benchmarks, run as modules from the repository root: `python -m bench.NAME [--help]`.

The commands are the modules at the top of bench/ (bench/NAME.py, each with a __main__ block) and
the packages with a __main__.py (bench/NAME/, a bench split into modules); `make bench` runs them
all. Nothing else sits at the top: bench.support holds the machinery the benches and the tests
share (the app's server, Chromium under Playwright, AppTest), bench.peers the peers' runners, and a
piece of one bench lives in its package; nothing here imports from tests/.
"""
