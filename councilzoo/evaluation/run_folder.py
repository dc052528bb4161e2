"""The output folder of ``eval`` and ``demo``: one set of settings per folder.

A rerun into the same ``--out`` reuses the finished episodes under ``OUT/episodes/`` (so an
interrupted run resumes where it stopped). That is right only when the rerun would play the same
episodes, so the settings that decide them (the command, the resolved agents config with every
protocol setting, the dataset, split, the data files' contents, limit and seed) are recorded in
``OUT/settings.json``, and a rerun compares its own against them before any model is built:

- equal settings: the run resumes;
- other settings: refused, one line naming the first difference, unless ``overwrite``;
- ``overwrite``: the old episodes, their problems and settings are deleted (nothing else in the
  folder) first;
- episodes without a settings record (a folder written by hand or by an older councilzoo):
  refused unless ``overwrite``.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

from councilzoo.config import ConfigError

__all__ = ["EPISODES", "PROBLEMS", "file_digest", "check_rerun", "start_run"]

SETTINGS_FILE = "settings.json"
EPISODES = "episodes"
PROBLEMS = "problems.jsonl"  # the problems the episodes were played on (harness), read by the viewer


def file_digest(path: str | Path | None) -> str | None:
    """SHA-256 of a data file's bytes, so an edited file counts as other settings."""
    return None if path is None else hashlib.sha256(Path(path).read_bytes()).hexdigest()


def first_difference(old: Any, new: Any, key: str = "") -> str | None:
    """``"key.path: old -> new"`` for the first value that differs, or None when equal."""
    if isinstance(old, dict) and isinstance(new, dict):
        if set(old) != set(new) and key:  # e.g. other models: name them, not their settings
            return f"{key}: {_short(sorted(old))} -> {_short(sorted(new))}"
        for name in [*old, *(k for k in new if k not in old)]:
            found = first_difference(old.get(name), new.get(name), f"{key}.{name}" if key else name)
            if found:
                return found
        return None
    if old == new:
        return None
    return f"{key or 'settings'}: {_short(old)} -> {_short(new)}"


def _short(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."


def check_rerun(out: str | Path, settings: dict[str, Any], overwrite: bool) -> None:
    """Refuse to run into ``out`` when its episodes were played with other settings (see the module
    docstring); reads only, so it runs before any model is built."""
    out = Path(out)
    if overwrite or not (out / EPISODES).exists():
        return
    record = out / SETTINGS_FILE
    if not record.is_file():
        raise ConfigError(
            f"--out {out} holds episodes whose settings were not recorded; pass --overwrite to "
            "discard them, or choose another --out"
        )
    try:
        old = json.loads(record.read_text())
    except ValueError as err:
        raise ConfigError(f"{record} is not valid JSON ({err}); pass --overwrite to start afresh") from None
    difference = first_difference(old, settings)
    if difference:
        raise ConfigError(
            f"--out {out} holds episodes played with other settings ({difference}); pass --overwrite "
            "to discard them, or choose another --out"
        )


def start_run(out: str | Path, settings: dict[str, Any], overwrite: bool) -> None:
    """Just before the first episode: with ``overwrite``, delete the old episodes and the problems
    they were played on; record ``settings``."""
    out = Path(out)
    if overwrite:
        shutil.rmtree(out / EPISODES, ignore_errors=True)
        (out / PROBLEMS).unlink(missing_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    (out / SETTINGS_FILE).write_text(json.dumps(settings, indent=2))
