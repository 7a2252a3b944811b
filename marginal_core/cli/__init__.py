"""The `marginal` command line, every command's module here: ``commands`` (the parser, ``main`` and
the lattice, sample, estimate and compare commands), ``surprisal_command``, ``task_commands``
(eval-qa, eval-mt, scan), ``lm_eval_command`` (lm-eval), ``model_commands`` (the --device/--dtype
arguments and ``python -m marginal_core.models``) and ``text_input`` (a text argument or stdin)."""
