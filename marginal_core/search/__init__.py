"""The prefix search (docs/design.md, "Surprisal" and "What comes next"): P(s<j) at every byte of a
text and past its end, summed over tokenizations, in rounds of batched trie passes, with intervals.
``Prefix`` (``prefix.py``) is its face: the text as a prefix under a model, a state you extend.
``surprisal/`` and ``next/`` are its two readings."""
