"""What the benches and the tests share: the app's server and Chromium under Playwright
(bench.support.browser), the app driven headless by AppTest (bench.support.apptest), and text in
many scripts: the prompts of bench/next_scripts.tsv and the crash bench's generator (bench.support.scripts)."""
