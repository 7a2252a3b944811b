"""Stage 3, the estimators: the marginal of a text by each method, and what is read from it.

* ``marginalizer``: :class:`Marginalizer`, every method on one text (streams and all);
  ``methods`` names them, ``estimate_options`` checks what a run is told, ``run_state`` records
  how far it got, ``estimate_result`` holds the :class:`Estimate` (``jsonsafe``: its JSON numbers).
* ``proxy`` (importance sampling, the paper's baseline), ``beam`` and ``beam_width`` (the anytime beam).
* ``prefix_heads``, ``prefix_search``, ``surprisal_run`` and ``surprisal_result``: where in the
  text, the marginal surprisal of every byte, character or word.
* ``shared_scores``: one score per path across estimates shown together.
"""
