"""Peers of our estimators, run from the bench only (never dependencies of the project)."""
