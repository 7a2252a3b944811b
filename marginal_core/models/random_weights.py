"""Architectures with random weights, for timing at sizes whose weights cannot be had here (speed
does not depend on the weights): a folder with a config.json, a tokenizer and the RANDOM_WEIGHTS
marker, which ``load_model`` turns into a model made directly on the device, when allowed."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from transformers import PreTrainedModel

RANDOM_WEIGHTS = "marginal-random-weights.json"  # the marker; its "seed" seeds the weights


def random_weights_folder(name: str) -> Path | None:
    """The folder of a model name when it holds an architecture without weights."""
    path = Path(name).expanduser()
    return path if (path / RANDOM_WEIGHTS).is_file() else None


def random_model(folder: Path, device: str, kwargs: Mapping[str, object]) -> PreTrainedModel:
    """The folder's architecture with random weights, made directly on the device (no CPU round
    trip), seeded from the marker so that two loads make the same model."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    seed = int(json.loads((folder / RANDOM_WEIGHTS).read_text(encoding="utf-8")).get("seed", 0))
    torch.manual_seed(seed)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(str(folder)), **kwargs)
    return model.eval()


def write_random_weights_folder(folder: Path, config: Mapping[str, Any], tokenizer: Any, sizes: Mapping[str, Any],
                                seed: int = 0) -> Path:
    """A folder with a model's configuration (``config``, e.g. an embedded model's, whose family
    it keeps: vocabulary, attention kinds) resized by ``sizes``, its tokenizer, and the marker.
    Gemma 3's layer pattern (five sliding-window layers, then a global one) follows the new depth."""
    config = {**config, **sizes}
    if "layer_types" in config:
        config["layer_types"] = ["full_attention" if (i + 1) % 6 == 0 else "sliding_attention"
                                 for i in range(config["num_hidden_layers"])]
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer.save_pretrained(str(folder))
    (folder / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    (folder / RANDOM_WEIGHTS).write_text(json.dumps({"seed": seed, "sizes": dict(sizes)}), encoding="utf-8")
    return folder
