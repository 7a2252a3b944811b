"""The Surprisal page's live search: a model's prefix search under a progress bar that says each
round (live.follow: in the server's turns, with Stop, each finished search shared by every page
and session per inputs), and the session's last stopped search, kept in one slot (a session never
holds more than one)."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING

from marginal_core import MAX_BEAM_WIDTH
from pages._app.runtime import live, server, shared_results
from pages._app.ui.defaults import APP_EXACT_BUDGET, APP_KV_BYTES, APP_SEARCH_BUDGET

if TYPE_CHECKING:
    from marginal_core import Marginalizer, Surprisal

_KEPT = live.Kept("_surprisal_stopped")  # the session's last stopped search


def search(key: Hashable, m: Marginalizer, method: str, label: str, on_update: Callable[[Surprisal], None]
         ) -> Surprisal:
    """The text's surprisal under m (the search, up to APP_SEARCH_BUDGET prefixes, its rounds
    capped by the server's beam-width cap; or exact, up to APP_EXACT_BUDGET prefixes), ending by
    itself (the default stop: a share of time for the certificate once the values settled), each
    round passed to on_update and said on the bar (both measures of progress); a finished search is
    cached."""
    from marginal_core import surprisal_stream

    done = shared_results.cached(key)
    if done is not None:
        return done
    bar = live.Bar(label, "rounds")
    rows = server.policy().cap_beam_width(MAX_BEAM_WIDTH)  # the most prefixes a round scores, on this server
    budget = APP_EXACT_BUDGET if method == "exact" else APP_SEARCH_BUDGET
    stream = surprisal_stream(m, method=method, max_rows=rows, budget=budget, should_stop=bar.should_stop,
                              time_budget="auto", kv_bytes=APP_KV_BYTES)

    def show(s: Surprisal) -> None:
        bar.update(s.fraction, f"{label}: {s.progress} (round {s.rounds}, widest interval {s.widest:.2g} nats, "
                               f"{s.scored:,} prefixes in {s.seconds:.1f} s)")
        on_update(s)

    return live.follow(key, stream, bar, show, lambda s: _KEPT.keep(key, s), lambda s: s.cancelled)


def stopped(key: Hashable) -> Surprisal | None:
    """This session's stopped search of key (its last round), or None."""
    return _KEPT.get(key)  # type: ignore[no-any-return]
