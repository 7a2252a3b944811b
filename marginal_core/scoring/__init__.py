"""Stage 2, scoring: log p of many tokenizations in batched passes of the model.

* ``trie_scoring``: ``score_paths``, the paths' prefix trie run through the decoder, each
  distinct prefix once; ``trie`` plans its passes (numpy), ``trie_run`` runs them (torch).
* ``pass_budget``: how large one pass may be; ``score_stats``: the work scoring did.
* ``plain_scoring``: the reference scorer (padded batches), what the trie scorer is checked against.
"""
