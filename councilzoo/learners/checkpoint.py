"""Atomic, pickle-free training checkpoints for every learner.

Layout of one checkpoint (``ROOT/step-000012/``)::

    state.json               step, data position, numpy Generator states, anything JSON
    arrays.safetensors       optional numpy arrays (e.g. TRACER's regret and strategy sums)
    <name>/model.safetensors full weights, or <name>/adapter.safetensors for a peft model
    <name>/<key>.pt          optimizer / scheduler state dicts (torch.save, read weights_only=True)
    rng.pt                   torch RNG states (global CPU/CUDA and named torch.Generators)

A checkpoint is written into a hidden temporary folder, every file fsynced, then renamed into
place, so a crash mid-write leaves the previous checkpoint intact and never a half one under a
``step-*`` name. Nothing is unpickled: tensors come from safetensors and ``torch.load`` always
runs with ``weights_only=True``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.numpy import load_file as load_numpy
from safetensors.numpy import save_file as save_numpy
from safetensors.torch import load_file, save_file, save_model
from safetensors.torch import load_model as load_full_model
from torch import nn

_STEP_RE = re.compile(r"^step-(\d+)$")


@dataclass
class Checkpoint:
    """What ``load_checkpoint`` returns besides restoring modules and optimizers in place."""

    path: Path
    step: int
    state: dict[str, Any] = field(default_factory=dict)
    arrays: dict[str, np.ndarray] = field(default_factory=dict)


def _is_peft(model: nn.Module) -> bool:
    return hasattr(model, "peft_config")


def _fsync_tree(root: Path) -> None:
    for path in sorted(root.rglob("*")):
        if path.is_file():
            with open(path, "rb") as f:
                os.fsync(f.fileno())
    fd = os.open(root, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def save_model_weights(model: nn.Module, folder: Path) -> None:
    """Weights of ``model`` as safetensors: the adapters only for a peft model, else everything."""
    folder.mkdir(parents=True, exist_ok=True)
    if _is_peft(model):
        from peft import get_peft_model_state_dict

        state = {k: v.detach().contiguous().cpu() for k, v in get_peft_model_state_dict(model).items()}
        save_file(state, folder / "adapter.safetensors")
    else:
        save_model(model, str(folder / "model.safetensors"))  # handles tied (shared) tensors


def load_model_weights(model: nn.Module, folder: Path) -> None:
    """Restore weights written by ``save_model_weights`` into ``model`` (strict)."""
    if _is_peft(model):
        from peft import set_peft_model_state_dict

        device = next(model.parameters()).device
        result = set_peft_model_state_dict(
            model, load_file(folder / "adapter.safetensors", device=str(device))
        )
        if result.unexpected_keys:
            raise ValueError(f"{folder}: unexpected adapter keys {result.unexpected_keys[:5]}")
    else:
        device = next(model.parameters()).device
        load_full_model(model, str(folder / "model.safetensors"), strict=True, device=str(device))


def rng_state(generators: dict[str, torch.Generator] | None = None) -> dict[str, Any]:
    """Global torch RNG states plus the states of named ``torch.Generator`` objects."""
    state: dict[str, Any] = {"torch": torch.get_rng_state(), "generators": {}}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    for name, gen in (generators or {}).items():
        state["generators"][name] = gen.get_state()
    return state


def set_rng_state(state: dict[str, Any], generators: dict[str, torch.Generator] | None = None) -> None:
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
    for name, gen in (generators or {}).items():
        if name not in state["generators"]:
            raise KeyError(f"checkpoint has no state for torch.Generator {name!r}")
        gen.set_state(state["generators"][name])


def save_checkpoint(
    root: str | Path,
    step: int,
    *,
    models: dict[str, nn.Module] | None = None,
    states: dict[str, dict[str, Any]] | None = None,
    state: dict[str, Any] | None = None,
    arrays: dict[str, np.ndarray] | None = None,
    generators: dict[str, torch.Generator] | None = None,
    keep_last: int | None = None,
) -> Path:
    """Write checkpoint ``root/step-{step:06d}`` atomically and return its path.

    ``models``: name -> module (weights); ``states``: name -> {key: object with ``state_dict``}
    (optimizers, schedulers); ``state``: JSON-serialisable data (step is added); ``arrays``:
    numpy arrays; ``generators``: named torch Generators. ``keep_last`` prunes older ones.
    """
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"step-{step:06d}"
    tmp = root / f".tmp-step-{step:06d}-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    for name, model in (models or {}).items():
        save_model_weights(model, tmp / name)
    for name, objects in (states or {}).items():
        (tmp / name).mkdir(exist_ok=True)
        for key, obj in objects.items():
            torch.save(obj.state_dict(), tmp / name / f"{key}.pt")
    torch.save(rng_state(generators), tmp / "rng.pt")
    if arrays:
        contiguous = {k: np.require(v, requirements="C") for k, v in arrays.items()}  # 0-d stays 0-d
        save_numpy(contiguous, str(tmp / "arrays.safetensors"))
    (tmp / "state.json").write_text(json.dumps({**(state or {}), "step": step}, indent=1))
    _fsync_tree(tmp)
    if final.exists():  # re-saving a step: move the old one aside first, then drop it
        old = root / f".old-step-{step:06d}-{os.getpid()}"
        os.replace(final, old)
        os.replace(tmp, final)
        shutil.rmtree(old)
    else:
        os.replace(tmp, final)
    fd = os.open(root, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    if keep_last is not None:
        for path in list_checkpoints(root)[:-keep_last]:
            shutil.rmtree(path)
    return final


def list_checkpoints(root: str | Path) -> list[Path]:
    """Complete checkpoints under ``root``, oldest first (temporary folders are ignored)."""
    root = Path(root)
    if not root.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in root.iterdir() if p.is_dir() and (m := _STEP_RE.match(p.name))]
    return [p for _, p in sorted(found)]


def latest_checkpoint(root: str | Path) -> Path | None:
    """The newest complete checkpoint under ``root``, or None."""
    found = list_checkpoints(root)
    return found[-1] if found else None


def load_checkpoint(
    path: str | Path,
    *,
    models: dict[str, nn.Module] | None = None,
    states: dict[str, dict[str, Any]] | None = None,
    generators: dict[str, torch.Generator] | None = None,
    restore_rng: bool = True,
) -> Checkpoint:
    """Restore what ``save_checkpoint`` wrote, in place, and return step, state and arrays."""
    path = Path(path)
    if not (path / "state.json").is_file():
        raise FileNotFoundError(f"{path} is not a councilzoo checkpoint (no state.json)")
    for name, model in (models or {}).items():
        load_model_weights(model, path / name)
    for name, objects in (states or {}).items():
        for key, obj in objects.items():
            obj.load_state_dict(torch.load(path / name / f"{key}.pt", weights_only=True, map_location="cpu"))
    if restore_rng:
        set_rng_state(torch.load(path / "rng.pt", weights_only=True), generators)
    state = json.loads((path / "state.json").read_text())
    arrays = load_numpy(str(path / "arrays.safetensors")) if (path / "arrays.safetensors").is_file() else {}
    return Checkpoint(path=path, step=int(state["step"]), state=state, arrays=arrays)
