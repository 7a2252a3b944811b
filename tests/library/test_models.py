"""The model registry and loaders, on the two real embedded models (no mocks).

Timings measured here are printed (run with -s to see them) and attached to the test report.
"""

from __future__ import annotations

import gc
import json
import math
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedTokenizerFast

from marginal_core.ground.errors import MarginalError, UnknownModelError
from marginal_core.lm.adapter import LM
from marginal_core.models import (
    DEFAULT_MODEL,
    gguf_path,
    known_models,
    load_model,
    load_tokenizer,
    model_cache_dir,
    resolve_device,
    resolve_dtype,
)

GEMMA = "gemma3-270m"
SMOL = "smollm2-135m"
ROOT = Path(__file__).resolve().parents[2]

SAMPLE_TEXTS = [
    "Hello world",
    " leading space and  two   spaces",
    "trailing space ",
    "line one\nline two\n\n\tindented\r\nwindows",
    "emoji 🙂👍🏽 and a family 👨‍👩‍👧",
    "日本語のテキストと中文字符",
    "Ünïcödé ﬁ ligature, combining e\u0301, NBSP\u00a0here",
    "code: def f(x):\n    return x**2  # comment",
    "<bos> <eos> <|im_start|> <|endoftext|> look like special tokens",
    "The capital of France is Paris.",
    " ",
    "",
]


def _run_python(code: str, env: dict[str, str] | None = None, timeout: int = 300) -> str:
    """Run a snippet in a fresh interpreter (same venv) and return its stdout."""
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        timeout=timeout,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


# --------------------------------------------------------------------------------------------
# Registry and devices


def test_registry_lists_both_embedded_models_default_first():
    names = known_models()
    assert names[0] == DEFAULT_MODEL == GEMMA
    assert set(names) == {GEMMA, SMOL}
    for name in names:
        path = gguf_path(name)
        assert path is not None and path.is_file() and path.suffix == ".gguf"
    assert gguf_path(" Gemma3-270M ") == gguf_path(GEMMA)


def test_device_and_dtype_resolution():
    assert resolve_device("cpu") == "cpu"
    assert resolve_device(None) in {"cuda", "mps", "cpu"}
    assert resolve_dtype("float32", "cuda") == torch.float32  # auto's choice: tests/library/test_precision.py
    if not torch.cuda.is_available():
        with pytest.raises(MarginalError):
            resolve_device("cuda")


# --------------------------------------------------------------------------------------------
# Tokenizers


@pytest.mark.parametrize("name,size", [(GEMMA, 262_144), (SMOL, 49_152)])
def test_embedded_tokenizers_load(name, size):
    tok = load_tokenizer(name)
    assert isinstance(tok, PreTrainedTokenizerFast)
    assert len(tok) == size
    assert load_tokenizer(name) is tok  # memoized in-process
    assert load_tokenizer(name.upper()) is tok
    text = "Hello world 🙂 日本語"
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert tok.decode(ids) == text


def test_gemma_and_smollm_special_tokens(gemma_tokenizer, smollm_tokenizer):
    # Gemma adds <bos> (id 2) in front; SmolLM2 adds nothing.
    assert gemma_tokenizer.bos_token == "<bos>" and gemma_tokenizer.bos_token_id == 2
    assert gemma_tokenizer("a")["input_ids"][0] == 2
    assert smollm_tokenizer("a")["input_ids"] == smollm_tokenizer("a", add_special_tokens=False)["input_ids"]
    # SmolLM2-Instruct's GGUF names <|im_start|> as BOS and <|im_end|> as EOS (as its HF repo does).
    assert smollm_tokenizer.bos_token == "<|im_start|>"
    assert smollm_tokenizer.eos_token == "<|im_end|>"


def _fingerprint(tok: PreTrainedTokenizerFast) -> dict:
    """Everything about a tokenizer that tokenization and detokenization depend on."""
    return {
        "backend": json.loads(tok.backend_tokenizer.to_str()),
        "vocab": tok.get_vocab(),
        "special": tok.special_tokens_map,
        "special_ids": sorted(tok.all_special_ids),
        "added": {i: (t.content, t.special) for i, t in tok.added_tokens_decoder.items()},
        "len": len(tok),
    }


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("name", [GEMMA, SMOL])
def test_cached_tokenizer_matches_fresh_gguf_conversion(name):
    cached = load_tokenizer(name)
    path = gguf_path(name)
    t0 = time.perf_counter()
    fresh = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    print(f"\n{name}: fresh GGUF tokenizer conversion {time.perf_counter() - t0:.1f} s")
    for text in SAMPLE_TEXTS:
        for special in (False, True):
            a = fresh(text, add_special_tokens=special)["input_ids"]
            b = cached(text, add_special_tokens=special)["input_ids"]
            assert a == b, (text, special)
            assert fresh.decode(a) == cached.decode(b)
            assert fresh.decode(a, skip_special_tokens=True) == cached.decode(b, skip_special_tokens=True)
        ids = fresh(text, add_special_tokens=False)["input_ids"]
        assert fresh.convert_ids_to_tokens(ids) == cached.convert_ids_to_tokens(ids)
    assert _fingerprint(fresh) == _fingerprint(cached)


_TIMED_LOAD = """
import json, time
import torch, transformers
from transformers import AutoModelForCausalLM, AutoTokenizer
from transformers.tokenization_utils_tokenizers import TokenizersBackend
from transformers.conversion_mapping import get_checkpoint_conversion_mapping
from marginal_core import models
# Not part of the load: imports, locating the GGUF, and the table of checkpoint renamings that
# transformers compiles once per process (1,100 regexes, about 0.5 s) before its first model.
get_checkpoint_conversion_mapping("llama")
models.gguf_path({name!r})
w, c = time.perf_counter(), time.process_time()
models.load_tokenizer({name!r})
tok_wall, tok_cpu = time.perf_counter() - w, time.process_time() - c
w, c = time.perf_counter(), time.process_time()
models.load_model({name!r}, device="cpu")
model_wall, model_cpu = time.perf_counter() - w, time.process_time() - c
print(json.dumps(dict(tok_wall=tok_wall, tok_cpu=tok_cpu, model_wall=model_wall, model_cpu=model_cpu)))
"""


@pytest.mark.models
@pytest.mark.parametrize("name", [GEMMA, SMOL])
def test_second_load_in_a_new_process_is_fast(name, record_property):
    load_model(name, device="cpu")  # make sure both caches exist
    # The machine may be busy with other work: keep the best of up to three fresh processes.
    best: dict[str, float] = {}
    for _ in range(3):
        t = json.loads(_run_python(_TIMED_LOAD.format(name=name)).strip().splitlines()[-1])
        best = {k: min(v, best.get(k, v)) for k, v in t.items()}
        if best["tok_cpu"] < 2.0 and best["model_cpu"] < 2.0 and best["tok_wall"] < 2.0:
            break  # the figure; the assertion below only separates cached from converting
    print(f"\n{name}: cached load in a new process: " + ", ".join(f"{k} {v:.2f} s" for k, v in best.items()))
    for key, value in best.items():
        record_property(key, round(value, 3))
    # CPU time is what the load costs; wall time also counts whatever else the machine runs.
    # Converting takes 15 to 50 s; a cached load 0.2 to 2.2 s (a timing bound, not a benchmark:
    # the figure itself is printed above and recorded).
    fast = best["tok_cpu"] < 5.0 and best["model_cpu"] < 5.0
    fast = fast and best["tok_wall"] < 10.0 and best["model_wall"] < 10.0
    load = os.getloadavg()[0]
    if not fast and load > (os.cpu_count() or 1):
        pytest.skip(f"machine too busy to time loads (load average {load:.1f}): {best}")
    assert fast, best


def _cache_with_smollm_tokenizer(root: Path, snapshot: bool) -> dict[str, str]:
    """The environment of a MARGINAL_CACHE at root that holds SmolLM2's converted tokenizer, copied
    from the warm cache (a test pays only the conversion it tests), with its lattice snapshot or not."""
    import shutil

    from marginal_core.ground.cache_home import cache_root

    load_tokenizer(SMOL)  # the warm cache has it
    folder = model_cache_dir(SMOL) / "tokenizer"
    ignore = None if snapshot else shutil.ignore_patterns("lattice-snapshot.pkl")
    shutil.copytree(folder, root / folder.relative_to(cache_root()), ignore=ignore)
    return {"MARGINAL_CACHE": str(root)}


@pytest.mark.slow
def test_damaged_tokenizer_cache_is_rebuilt(tmp_path):
    out = _run_python(
        f"""
        from marginal_core import models
        tok = models.load_tokenizer({SMOL!r})
        folder = models.model_cache_dir({SMOL!r}) / "tokenizer"
        assert str(folder).startswith({str(tmp_path)!r}), folder
        expected = tok("Hello world")["input_ids"]
        (folder / "tokenizer.json").write_text("{{ not json")
        models.loading._load_tokenizer_memo.cache_clear()
        again = models.load_tokenizer({SMOL!r})
        assert again is not tok and again("Hello world")["input_ids"] == expected
        print("rebuilt")
        """,
        env=_cache_with_smollm_tokenizer(tmp_path, snapshot=True),
    )
    assert "rebuilt" in out


_SNAPSHOT = """
import sys
from marginal_core import models
snapshot = models.load_text_tokenizer({name!r})
assert type(snapshot).__name__ == "TokenizerSnapshot", type(snapshot)
print(snapshot.fingerprint, "transformers" in sys.modules, snapshot.encode("Hello world 🙂"))
"""


@pytest.mark.slow
def test_light_tokenizer_snapshot_is_taken_once_and_again_when_its_tokenizer_changes(tmp_path):
    env = _cache_with_smollm_tokenizer(tmp_path, snapshot=False)
    expected = load_tokenizer(SMOL)("Hello world 🙂", add_special_tokens=False)["input_ids"]
    taken = _run_python(_SNAPSHOT.format(name=SMOL), env=env).split(maxsplit=2)
    assert taken[1] == "True" and taken[2].strip() == str(expected)  # taken through transformers
    reused = _run_python(_SNAPSHOT.format(name=SMOL), env=env).split(maxsplit=2)
    assert reused == taken[:1] + ["False"] + taken[2:]  # read back without transformers
    (tokenizer_json,) = tmp_path.glob("models/*/tokenizer/tokenizer.json")
    stat = tokenizer_json.stat()
    os.utime(tokenizer_json, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    retaken = _run_python(_SNAPSHOT.format(name=SMOL), env=env).split(maxsplit=2)
    assert retaken[0] != taken[0] and retaken[1] == "True" and retaken[2] == taken[2]


# --------------------------------------------------------------------------------------------
# Unknown names


@pytest.mark.parametrize(
    "name", ["no-such-model-xyz", "not a/valid//name", "/no/such/file.gguf", str(ROOT / "tests"), ""]
)
def test_unknown_model_raises_listing_known_names(name):
    t0 = time.perf_counter()
    with pytest.raises(UnknownModelError) as info:
        load_tokenizer(name)
    message = str(info.value)
    assert GEMMA in message and SMOL in message
    assert "\n" not in message
    assert time.perf_counter() - t0 < 30  # no minute of hub retries on an offline machine
    with pytest.raises(UnknownModelError):
        load_model(name, device="cpu")


def test_a_missing_local_folder_is_named_as_missing_not_as_an_unreachable_hub(tmp_path):
    """Issue 13 item 5f: a model folder that does not exist was reported as "the hub is not
    reachable", its nested message cut in the middle of a URL."""
    from marginal_core.models.registry import unknown_model

    for name in (str(tmp_path / "no-such-model"), "./no-such-model", "~/no-such-model-xyz", "models/org/no-such"):
        with pytest.raises(UnknownModelError, match="it does not exist") as info:
            load_tokenizer(name)
        assert "hub" not in str(info.value), info.value
    with pytest.raises(UnknownModelError, match="has no config.json"):  # a folder, but no model in it
        load_tokenizer(str(tmp_path))
    url = "https://huggingface.co/docs/transformers/installation#offline-mode"
    for filler in range(250, 300, 7):  # wherever the limit falls, the URL is whole or left out
        message = str(unknown_model("m", "x" * filler + f" see {url} for more"))
        assert "https://" not in message or url in message, message
        assert "\n" not in message


# --------------------------------------------------------------------------------------------
# Models


def _compare_with_gguf(loaded: LM, name: str, ids: list[int]) -> float:
    """Max |logit difference| between the cached model and one loaded straight from the GGUF."""
    path = gguf_path(name)
    t0 = time.perf_counter()
    reference = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name).eval()
    print(f"\n{name}: model loaded straight from the GGUF in {time.perf_counter() - t0:.1f} s")
    x = torch.tensor([ids])
    with torch.inference_mode():
        a = reference(x).logits
        b = loaded.model(x).logits
    del reference
    gc.collect()
    assert a.shape == b.shape == (1, len(ids), len(loaded.tokenizer))
    return (a - b).abs().max().item()


def _check_loaded(loaded: LM, name: str) -> None:
    """The loaded model's fields and the tie between input and output embeddings."""
    assert loaded.name == name
    assert loaded.loaded.device == "cpu" and loaded.dtype == torch.float32
    assert next(loaded.model.parameters()).dtype == torch.float32
    assert not loaded.model.training
    assert loaded.tokenizer is load_tokenizer(name)
    assert load_model(name, device="cpu") is loaded
    assert loaded.model.config.tie_word_embeddings
    out, inp = loaded.model.get_output_embeddings(), loaded.model.get_input_embeddings()
    assert out.weight.data_ptr() == inp.weight.data_ptr()


# Loading straight from the GGUF takes 15 to 40 s on a quiet 2-core machine, minutes on a busy one.
@pytest.mark.timeout(900)
def test_smollm_model_matches_gguf(smollm_model):
    _check_loaded(smollm_model, SMOL)
    ids = smollm_model.tokenizer("The quick brown fox jumps over the lazy dog.\n日本")["input_ids"]
    assert _compare_with_gguf(smollm_model, SMOL, ids) <= 1e-4


@pytest.mark.timeout(900)
def test_gemma_model_matches_gguf(gemma_model):
    _check_loaded(gemma_model, GEMMA)
    ids = gemma_model.tokenizer("The quick brown fox jumps over the lazy dog.\n日本")["input_ids"]
    assert _compare_with_gguf(gemma_model, GEMMA, ids) <= 1e-4


@pytest.mark.parametrize("fixture", ["gemma_model", "smollm_model"])
def test_models_make_sense(fixture, request):
    """Dequantized weights give sensible predictions (catches e.g. a mishandled norm offset)."""
    loaded: LM = request.getfixturevalue(fixture)
    tok = loaded.tokenizer
    ids = tok("The capital of France is", return_tensors="pt")["input_ids"]
    with torch.inference_mode():
        logp = loaded.model(ids).logits[0, -1].log_softmax(-1)
    top = [tok.decode([i]) for i in logp.topk(5).indices.tolist()]
    assert " Paris" in top, top


def test_warm_command_reports_cached_models():
    proc = subprocess.run(
        [sys.executable, "-m", "marginal_core.models", "--warm", "--list"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"{GEMMA} (default)" in proc.stdout
    assert "tokenizer cached" in proc.stdout and "model cached" in proc.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "marginal_core.models", "--warm", "no-such-model-xyz"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert bad.returncode == 2 and "Traceback" not in bad.stderr and GEMMA in bad.stderr


# --------------------------------------------------------------------------------------------
# Architectures with random weights (bench/scale.py): loaded only when asked for


def test_a_random_weights_folder_loads_only_when_allowed(gemma_model, tmp_path, capsys):
    from marginal_core.cli.commands import main as cli_main
    from marginal_core.estimators.marginalizer import Marginalizer
    from marginal_core.models import load_model
    from marginal_core.models.random_weights import random_model, write_random_weights_folder

    sizes = dict(hidden_size=64, num_hidden_layers=7, num_attention_heads=2, num_key_value_heads=1, head_dim=32,
                 intermediate_size=128)
    folder = write_random_weights_folder(tmp_path / "tiny", gemma_model.model.config.to_dict(),
                                         gemma_model.tokenizer, sizes)
    with pytest.raises(MarginalError, match="random weights"):
        load_model(str(folder), device="cpu", dtype="float32")
    assert cli_main(["estimate", "hi", "--model", str(folder), "--methods", "canonical"]) == 2
    assert "random weights" in capsys.readouterr().err
    tiny = load_model(str(folder), device="cpu", dtype="float32", allow_random_weights=True)
    assert tiny.loaded.random_weights and tiny.model.config.num_hidden_layers == 7
    assert tiny.model.config.layer_types[5] == "full_attention" and tiny.model.config.layer_types[6] == "sliding_attention"
    a, b = (random_model(folder, "cpu", {"dtype": torch.float32}) for _ in range(2))
    assert all(torch.equal(x, y) for x, y in zip(a.parameters(), b.parameters()))  # the marker's seed: one model
    m = Marginalizer(tiny, " Paris", "Question: What is the capital of France?\nAnswer:")
    lattice, exact = m.estimate("lattice", samples=8), m.exact()
    assert math.isfinite(lattice.log_marginal) and lattice.log_marginal <= exact.log_marginal + 1e-4
