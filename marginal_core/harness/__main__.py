"""`python -m marginal_core.harness ARGS` = `marginal lm-eval ARGS` (for `accelerate launch -m`)."""

import sys

from marginal_core.cli.lm_eval_command import lm_eval_main
from marginal_core.ground.errors import run_cli

sys.exit(run_cli(lambda: lm_eval_main(sys.argv[1:]), "marginal lm-eval"))
