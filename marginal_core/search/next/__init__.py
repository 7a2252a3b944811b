"""What comes next (docs/design.md, "What comes next"): the search past a prompt's end as whole
characters, continuations beside ``generate``'s, and the token views."""
