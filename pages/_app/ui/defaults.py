"""The app's defaults: the text and context a first visit shows (the first example), sample
sizes, and how many tokenizations exact enumeration is offered for."""

from __future__ import annotations

from pages._app.ui.presets import DEFAULT

DEFAULT_CONTEXT = DEFAULT.context
DEFAULT_TEXT = DEFAULT.text
DEFAULT_SAMPLES = 100
# The largest k and number of proxy samples the pages take (a server may set less: server.py).
MAX_SAMPLES = 100_000
# The home page's one-click estimate takes at most this many samples (minutes on a CPU; more
# go on the running-estimates page).
HOME_MAX_SAMPLES = 1_000
# Exact enumeration is offered in the app up to this many paths (each path is scored).
APP_EXACT_BUDGET = 2_000
# The Surprisal page's search scores at most this many prefixes (a run's time and memory stay
# bounded on a shared server; the intervals say what is left).
APP_SEARCH_BUDGET = 20_000
# The What comes next page's continuation stops after this many seconds, keeping what it found (its
# search ends by the default stop): a class's prompts cost each student a bounded share of the machine.
APP_NEXT_SECONDS = 15.0
# The most next characters the page lists (the library takes up to 256).
APP_NEXT_MAX_K = 20
# What the page's search keeps of its prefixes' keys and values across rounds: a class's searches
# each hold up to this while they run (about 1,400 SmolLM2 prefixes in float32; past it, a round
# feeds its ancestors again).
APP_KV_BYTES = 64 << 20


def exact_feasible(count: int, budget: int = APP_EXACT_BUDGET) -> bool:
    """Whether exact enumeration of a lattice with count paths is offered (canonical excluded)."""
    return count - 1 <= budget
