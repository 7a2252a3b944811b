"""`python -m marginal_core.harness ARGS` = `marginal lm-eval ARGS` (for `accelerate launch -m`)."""

import sys

from marginal_core.errors import run_cli
from marginal_core.harness.lm_eval_command import lm_eval_main

sys.exit(run_cli(lambda: lm_eval_main(sys.argv[1:]), "marginal lm-eval"))
