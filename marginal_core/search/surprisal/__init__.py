"""Surprisal by region (docs/design.md, "Surprisal: where in the text"): the search's bounds at
every byte cut into words, characters or tokens."""
