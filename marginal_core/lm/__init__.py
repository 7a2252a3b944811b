"""The one adapter between marginal's algorithms and a causal LM (see docs/design.md)."""
