"""Code only the Streamlit app needs, by what it serves: ``runtime/`` (the server: its start, policy,
turns, caches and live runs) and ``ui/`` (what every page shares: inputs, widgets, the live-page
skeleton, words, errors, links, the lesson). A helper one page alone uses sits beside that page
(``pages/views/surprisal_search.py``, ``region_links.py``, ``table1.py``).

The library (``marginal_core``) holds what a script or notebook needs and never imports
Streamlit; this package is the app's side of that line.
"""

import os
import sys

from pages._app.runtime import _malloc

# The server's torch threads share the cores with the browser and the server's own threads;
# OpenMP's default (spin while waiting) then stalls each parallel region whenever another
# process (the browser drawing the page) holds a core. Sleeping instead makes live runs faster
# (bench/app.py). It takes effect only before torch is first imported, which no page does before this.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

# The server's memory: glibc gives every thread that allocates an arena of its own (up to 8 per
# core) and keeps what is freed there, so each session's script thread would keep its share of
# the working set after its run. Two arenas, and blocks of 4 MiB or more mapped (given back when
# freed), bound that (bench/classroom/); other C libraries are left as they are.
_malloc.tune()

# Exact path counts of long texts pass Python's 4,300-digit limit on int-to-str conversion (a
# 20,000-character text has about 4,700 digits); the CLI lifts it in errors.run_cli, the app here,
# before any page formats a count.
sys.set_int_max_str_digits(0)
