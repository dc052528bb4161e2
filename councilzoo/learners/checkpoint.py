"""Atomic, pickle-free checkpoints of what TRL's checkpoints do not hold: TRACER's controllers.

Model weights, adapters, optimizer, scheduler and RNG states of every trained model are TRL's
``checkpoint-N`` folders; this module stores the regret-matching state beside them (inside
``checkpoint-N/tracer/`` with the utterance layer, under ``OUTPUT/checkpoints/`` without).
Layout of one checkpoint (``ROOT/step-000012/``)::

    state.json               step, numpy Generator states, anything JSON
    arrays.safetensors       numpy arrays (TRACER's regret and strategy sums, visits)
    rng.pt                   the global torch RNG state (read with weights_only=True)
    manifest.json            every other file's size and sha256, written last

A checkpoint is written into a hidden temporary folder, every file fsynced, then renamed into
place, so a crash mid-write leaves the previous checkpoint intact and never a half one under a
``step-*`` name. Nothing is unpickled: tensors come from safetensors and ``torch.load`` always
runs with ``weights_only=True``.

Manifests: a crash, a full disk or a later copy can still leave a checkpoint folder incomplete or
damaged, here or in TRL's ``checkpoint-N`` folders (``engine.CheckpointManifest`` writes theirs).
``verified`` keeps the folders whose files all match their manifest and names every other one in
a ``DamagedCheckpointWarning``, so a resume starts from the newest good checkpoint.

Before the first step, ``check_checkpoint_folder`` makes sure checkpoints can be written (the
folder is not a file, nor read-only) and, on ``--resume``, that a checkpoint the folder seems to
hold can be resumed from: a run never trains for hours to die at its first save, nor starts
again from step 0 over the work of a run whose checkpoints were replaced or damaged.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.numpy import load_file as load_numpy
from safetensors.numpy import save_file as save_numpy

from councilzoo.config import ConfigError, check_output_dir

__all__ = [
    "MANIFEST", "DamagedCheckpointWarning", "write_manifest", "checkpoint_problem", "verified",
    "check_checkpoint_folder", "Checkpoint", "save_checkpoint", "list_checkpoints", "latest_checkpoint",
    "load_checkpoint",
]

_STEP_RE = re.compile(r"^step-(\d+)$")
TRAINER_CHECKPOINT_RE = re.compile(r"^checkpoint-(\d+)$")  # TRL's
MANIFEST = "manifest.json"


class DamagedCheckpointWarning(UserWarning):
    """A checkpoint folder failed verification against its manifest and is not resumed from."""


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def write_manifest(folder: str | Path) -> Path:
    """Record every file under ``folder`` (size, sha256) in ``folder/manifest.json``.

    Call it once the checkpoint is complete: the manifest is written last (through a temporary
    file and a rename), so its presence says every file before it was written in full.
    """
    folder = Path(folder)
    files = {
        path.relative_to(folder).as_posix(): {"size": path.stat().st_size, "sha256": _sha256(path)}
        for path in sorted(folder.rglob("*"))
        if path.is_file() and path.name != MANIFEST and not path.name.startswith(".manifest")
    }
    tmp = folder / f".manifest-{os.getpid()}.json"
    with open(tmp, "w") as f:
        json.dump({"files": files}, f, indent=1)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, folder / MANIFEST)
    return folder / MANIFEST


def checkpoint_problem(folder: str | Path) -> str | None:
    """Why ``folder`` cannot be resumed from, or None when every file matches its manifest."""
    folder = Path(folder)
    try:
        files = json.loads((folder / MANIFEST).read_text())["files"]
    except FileNotFoundError:
        return f"no {MANIFEST} (the save did not finish)"
    except (ValueError, KeyError, TypeError):
        return f"{MANIFEST} is unreadable"
    for name, entry in files.items():
        path = folder / name
        if not path.is_file():
            return f"{name} is missing"
        if path.stat().st_size != entry["size"]:
            return f"{name} has {path.stat().st_size} bytes, the manifest says {entry['size']}"
        if _sha256(path) != entry["sha256"]:
            return f"{name} does not match its sha256 in the manifest"
    return None


def verified(folders: Iterable[Path]) -> list[Path]:
    """The ``folders`` that pass ``checkpoint_problem``, in order; each other one is named in a
    ``DamagedCheckpointWarning`` (a resume then starts from an older one)."""
    good = []
    for folder in folders:
        problem = checkpoint_problem(folder)
        if problem is None:
            good.append(folder)
        else:
            message = f"checkpoint {folder} is damaged and skipped: {problem}"
            warnings.warn(message, DamagedCheckpointWarning, stacklevel=2)
    return good


def check_checkpoint_folder(root: str | Path, resume: bool, names: re.Pattern = _STEP_RE) -> None:
    """Before the first step: a ``ConfigError`` in one line unless checkpoints can be written
    into ``root`` and, with ``resume``, the entries of ``root`` named like checkpoints (``names``)
    are either none (a fresh start) or include one intact checkpoint (damaged newer ones are
    skipped, with a warning, when the run resumes)."""
    root = Path(root)
    if root.exists() and not root.is_dir():
        raise ConfigError(f"{root}: a file, where this run writes its checkpoints; move it away (the run's "
                          "checkpoints are not in it), then rerun")
    check_output_dir(root, "checkpoints folder")
    if not resume or not root.is_dir():
        return
    entries = sorted((int(m.group(1)), p) for p in root.iterdir() if (m := names.match(p.name)))
    problems = []
    for _, path in reversed(entries):  # newest first, up to the first intact one
        problem = checkpoint_problem(path) if path.is_dir() else "not a folder"
        if problem is None:
            return
        problems.append(f"{path.name}: {problem}")
    if problems:
        raise ConfigError(
            f"--resume: no intact checkpoint in {root} ({'; '.join(problems[:3])}); nothing was changed: "
            "restore the checkpoint, or pass --overwrite to start again"
        )


@dataclass
class Checkpoint:
    """What ``load_checkpoint`` returns besides restoring modules and optimizers in place."""

    path: Path
    step: int
    state: dict[str, Any] = field(default_factory=dict)
    arrays: dict[str, np.ndarray] = field(default_factory=dict)


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


def save_checkpoint(
    root: str | Path,
    step: int,
    *,
    state: dict[str, Any] | None = None,
    arrays: dict[str, np.ndarray] | None = None,
    keep_last: int | None = None,
) -> Path:
    """Write checkpoint ``root/step-{step:06d}`` atomically and return its path.

    ``state``: JSON-serialisable data (step is added); ``arrays``: numpy arrays. ``keep_last``
    prunes older ones.
    """
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"step-{step:06d}"
    tmp = root / f".tmp-step-{step:06d}-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    torch.save({"torch": torch.get_rng_state()}, tmp / "rng.pt")
    if arrays:
        contiguous = {k: np.require(v, requirements="C") for k, v in arrays.items()}  # 0-d stays 0-d
        save_numpy(contiguous, str(tmp / "arrays.safetensors"))
    (tmp / "state.json").write_text(json.dumps({**(state or {}), "step": step}, indent=1))
    write_manifest(tmp)
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
    """The newest checkpoint under ``root`` that matches its manifest, or None (damaged newer ones
    are named in a warning)."""
    for path in reversed(list_checkpoints(root)):
        if verified([path]):
            return path
    return None


def load_checkpoint(
    path: str | Path,
    *,
    restore_rng: bool = True,
) -> Checkpoint:
    """Read what ``save_checkpoint`` wrote (restoring the torch RNG) and return step, state, arrays."""
    path = Path(path)
    if not (path / "state.json").is_file():
        raise FileNotFoundError(f"{path} is not a councilzoo checkpoint (no state.json)")
    if restore_rng:
        torch.set_rng_state(torch.load(path / "rng.pt", weights_only=True)["torch"])
    state = json.loads((path / "state.json").read_text())
    arrays = load_numpy(str(path / "arrays.safetensors")) if (path / "arrays.safetensors").is_file() else {}
    return Checkpoint(path=path, step=int(state["step"]), state=state, arrays=arrays)
