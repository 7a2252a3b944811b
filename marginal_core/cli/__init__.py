"""The `marginal` command line: ``commands`` (the parser, ``main`` and the lattice, sample,
estimate and compare commands), ``surprisal_command`` and ``text_input`` (a text argument or
standard input). The tasks, models and harness stages add their own subcommands."""
