"""The classroom bench (`python -m bench.classroom`): N browser sessions press Run at once on one
app server, timed in the pages and from the server's log, against the same N estimates one after
another.

__main__ (the command: sizes, the run, the JSON dump), measure (one size N: the server's side and
the serial reference), sessions (Chromium at nice 19, a Running-estimates page each, the clicks),
report (the markdown table and its notes) and sentences (one per session; bench.batching runs
them too).
"""
