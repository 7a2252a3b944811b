"""`marginal scan` on torch.distributed: two processes under torchrun (a gloo group on this CPU)
score their shares of a file into one folder, resuming a folder that holds some texts already,
and rank 0's tables equal a one-process scan's; the group is joined only under a launcher."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from marginal_core.cli.commands import build_parser
from marginal_core.corpus.scan import model_folder
from marginal_core.corpus.scan_ranks import join, launched
from marginal_core.tasks.report import load_rows
from tests.conftest import SMOL

ROOT = Path(__file__).resolve().parents[2]
TEXTS = ["Entschuldigung", "unbelievably", "the lighthouse", "Photosynthesis", "mitochondria", "Tokyo"]
ARGS = ["--models", SMOL, "--methods", "canonical,lattice", "--samples", "4", "--device", "cpu", "--dtype", "float32"]
KEY = ["id", "method"]


def run(argv: list[str]) -> dict:
    """A `marginal` command run in this process (the session's model stays loaded)."""
    args = build_parser().parse_args(argv)
    return args.run(args)


def test_a_plain_process_joins_no_group(monkeypatch):
    for name in ("RANK", "WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    assert not launched() and join() is None
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "1")  # torchrun --nproc_per_node 1: a scan on its own
    assert not launched() and join() is None


@pytest.mark.models
@pytest.mark.slow
def test_two_ranks_resume_a_folder_and_equal_one_process(smollm_model, tmp_path):
    """The reference scan runs here; a second folder gets the file's first two texts here too, then
    torchrun's two ranks score the four left (two each, none again) and rank 0 writes the tables:
    the same rows as the reference's, up to float32 sums in another order (each rank on one thread)."""
    texts = tmp_path / "texts.txt"
    texts.write_text("\n".join(TEXTS) + "\n")
    one, two = tmp_path / "one", tmp_path / "two"
    run(["scan", str(texts), "--out", str(one), *ARGS])
    run(["scan", str(texts), "--out", str(two), "--limit", "2", *ARGS])
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    logs = tmp_path / "logs"  # each rank's stdout in a file of its own: lines on one pipe may interleave
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
           "--log-dir", str(logs), "--redirects", "1",
           "-m", "marginal_core", "scan", str(texts), "--out", str(two), *ARGS, "--json"]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    said = {r["rank"]: r for out in logs.rglob("stdout.log") for r in map(json.loads, out.read_text().splitlines())}
    assert set(said) == {0, 1} and {r["ranks"] for r in said.values()} == {2}
    assert said[0]["texts"] == len(TEXTS) and said[0]["rows"] == 2 * len(TEXTS) and said[1]["texts"] == 3

    folder = model_folder(two, SMOL)
    sessions = [json.loads(line) for line in (folder / "sessions.jsonl").read_text().splitlines()]
    assert [s["items_done"] for s in sessions] == [2, 2, 2]  # the first two texts were not scored again
    assert len(load_rows(folder)) == len((folder / "rows.csv").read_text().splitlines()) - 1 == 2 * len(TEXTS)
    assert json.loads((folder / "report.json").read_text())["texts"] == len(TEXTS)  # rank 0's, over every text

    a, b = (pd.read_csv(f / "scan.csv").sort_values(KEY).reset_index(drop=True) for f in (one, two))
    assert len(a) == len(b) == 2 * len(TEXTS)
    exact = ["id", "text", "method", "dtype", "paths_scored", "num_paths", "samples", "seed", "top_tokenization"]
    pd.testing.assert_frame_equal(a[exact], b[exact])
    for column in ("log_p_canonical", "log_marginal", "gain_nats", "top_share"):
        assert (a[column] - b[column]).abs().max() < 1e-4, column
    paths = [pd.read_csv(f / "paths.csv").sort_values([*KEY, "tokenization"]).reset_index(drop=True) for f in (one, two)]
    assert list(paths[0]["tokenization"]) == list(paths[1]["tokenization"])
