"""The one adapter between marginal's algorithms and a causal LM (``marginal_core.lm.adapter``)
and the one out-of-memory policy (``marginal_core.lm.oom``, importable without torch)."""
