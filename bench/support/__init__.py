"""What the benches and the tests share: the app's server and Chromium under Playwright
(bench.support.browser) and the app driven headless by AppTest (bench.support.apptest)."""
