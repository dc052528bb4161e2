"""The output folder of ``eval`` and ``demo``: one set of settings per folder.

A rerun into the same ``--out`` reuses the finished episodes under ``OUT/episodes/`` (so an
interrupted run resumes where it stopped). That is right only when the rerun would play the same
episodes, so the settings that decide them (the command, the resolved agents config with every
protocol setting, the dataset, split, the data files' contents, limit and seed) are recorded in
``OUT/settings.json``, and a rerun compares its own against them before any model is built:

- no finished episode in the folder (a run that stopped before its first): the run starts;
- equal settings: the run resumes;
- other settings: refused, one line per difference named in words ("the data file (--path)
  changed", "agents.samples: 3 -> 5"), unless ``overwrite``;
- ``overwrite``: the old episodes, their problems and settings are deleted (nothing else in the
  folder) first;
- episodes without a settings record (a folder written by hand or by an older councilzoo):
  refused unless ``overwrite``.

While a run plays, it holds the folder's lock (``config.run_lock``): a second run into the same
folder is refused at once instead of writing the same episodes twice.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

from councilzoo.config import ConfigError, differences

__all__ = ["EPISODES", "PROBLEMS", "file_digest", "check_rerun", "start_run"]

SETTINGS_FILE = "settings.json"
EPISODES = "episodes"
PROBLEMS = "problems.jsonl"  # the problems the episodes were played on (harness), read by the viewer


def file_digest(path: str | Path | None) -> str | None:
    """SHA-256 of a data file's bytes, so an edited file counts as other settings."""
    return None if path is None else hashlib.sha256(Path(path).read_bytes()).hexdigest()


# Settings recorded as a digest, named in words when they differ.
IN_WORDS = {
    "path_sha256": "the data file (--path) changed",
    "dev_path_sha256": "the dev file (--dev-path) changed",
}


def _has_episodes(out: Path) -> bool:
    """Whether ``out`` holds a finished episode (a run may stop before its first)."""
    return any(path.stat().st_size for path in (out / EPISODES).glob("*.jsonl"))


def check_rerun(out: str | Path, settings: dict[str, Any], overwrite: bool) -> None:
    """Refuse to run into ``out`` when its episodes were played with other settings (see the module
    docstring); reads only, so it runs before any model is built."""
    out = Path(out)
    if overwrite or not _has_episodes(out):
        return  # nothing finished yet, so nothing to resume or to mix with
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
    changed = differences(old, settings, in_words=IN_WORDS)
    if changed:
        raise ConfigError("\n".join(
            f"--out {out} holds episodes played with other settings: {difference}; pass --overwrite "
            "to discard them, or choose another --out"
            for difference in changed
        ))


def start_run(out: str | Path, settings: dict[str, Any], overwrite: bool) -> None:
    """Just before the first episode: with ``overwrite`` or no finished episode, delete the old
    episodes and the problems they were played on; record ``settings``."""
    out = Path(out)
    if overwrite or not _has_episodes(out):
        shutil.rmtree(out / EPISODES, ignore_errors=True)
        (out / PROBLEMS).unlink(missing_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / f".{SETTINGS_FILE}.tmp"  # renamed into place: a full disk never leaves half a record
    tmp.write_text(json.dumps(settings, indent=2))
    os.replace(tmp, out / SETTINGS_FILE)
