"""The corpus scan (``marginal scan FILE``, ``mc.scan``): a file of texts, each scored by the chosen
methods under one or more models, into one resumable folder, and what is read from it.

* ``scan``: reading the texts (.txt, .jsonl, .csv), the scan task, shards and their merge, the run.
* ``scan_ranks``: the run as the ranks of a torch.distributed job (torchrun, accelerate launch).
* ``scan_report``: per model, the texts ranked by gain; across models, the tidy exports.
* ``gains``: a row's gain over the canonical tokenization, and the best bound per text.
* ``scan_surprisal``: surprisal by region (``--surprisal word``): surprisal.csv.
* ``scan_compare``: two models text by text (compare.csv), and what counts as a flip or a move.

It runs on the tasks' loop and store (``marginal_core.tasks``); importing it is cheap.
"""
