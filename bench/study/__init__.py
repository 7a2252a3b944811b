"""The study (`python -m bench.study`): every estimator against exact and against genlm-bytes,
which one buys the most mass a second, on short and longer texts.

__main__ (the command: models, texts, the run), points (the texts and each method's Point on a
text), report (the tables per model) and worst_case (the tokenizations the best method found that
a weaker one missed, and where the beam pruned them).
"""
