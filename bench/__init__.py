"""Benchmarks, run as modules from the repository root: `python -m bench.NAME [--help]`.

bench.support holds the machinery the benches and the tests share (the app's server, Chromium
under Playwright, AppTest); nothing here imports from tests/.
"""
