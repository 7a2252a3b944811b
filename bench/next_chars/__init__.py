"""bench.next_chars: What comes next beside genlm-bytes, its speed, its continuation and the finding
(``python -m bench.next_chars``; the tables and what they measure: __main__.py)."""
