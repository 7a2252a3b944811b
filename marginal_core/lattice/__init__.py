"""Stage 1, the lattice: a text's tokenizations as a graph, counted and sampled without a model.

* ``tokenizer``: what the stage needs from a tokenizer, as one protocol; ``tokenizer_snapshot``:
  a BPE tokenizer loaded without transformers.
* ``vocab``: token ids and their surface bytes, and the index of tokens matching at a position.
* ``graph``: the :class:`Lattice` of a text under a tokenizer (``lattice_of``).
* ``paths`` (counting, ranking and unranking paths) over ``bigint`` (exact counts past 64 bits).
* ``sampling``: the model-free samplers (uniform distinct paths, Algorithm 1).
* ``proposal``: the proxy's proposal automaton; ``conditioning``: what a tokenization is scored after.

No torch anywhere in this stage.
"""
