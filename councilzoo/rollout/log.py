"""The episode log: finished episodes as append-only JSONL, safe against crashes.

One line per finished episode (``{"episode": k, **EpisodeRecord.to_dict()}``), appended, flushed
and fsynced before the engine moves on, keyed by (problem id, episode index). ``load`` returns
the finished episodes by key; a last line cut off by a crash is dropped from the file. Problem
images held in memory are saved once as PNG files under ``image_dir`` (default: the folder
``<log name>_images`` beside the log) and logged by path, so a loaded record opens the same pixels.
"""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Any

from councilzoo.envs.types import EpisodeRecord

__all__ = ["Key", "EpisodeLog"]

Key = tuple[str, int]  # (problem id, episode index)


class EpisodeLog:
    """Append-only JSONL of finished episodes, safe against crashes (see the module docstring)."""

    def __init__(self, path: str | os.PathLike, image_dir: str | os.PathLike | None = None) -> None:
        self.path = Path(path)
        self.image_dir = Path(image_dir) if image_dir else self.path.with_name(f"{self.path.stem}_images")
        self._file = None

    def load(self) -> dict[Key, EpisodeRecord]:
        """Finished episodes by key. A partial last line (a crash mid-write) is cut from the file;
        any other unreadable line is an error naming the line."""
        done: dict[Key, EpisodeRecord] = {}
        if not self.path.exists():
            return done
        raw = self.path.read_bytes()
        keep = 0
        for number, line in enumerate(io.BytesIO(raw), start=1):
            if line.strip():
                try:
                    data = json.loads(line)
                    key = (str(data["problem_id"]), int(data["episode"]))
                    record = EpisodeRecord.from_dict(data)
                except (ValueError, KeyError, TypeError) as err:
                    if not line.endswith(b"\n"):
                        break
                    raise ValueError(f"{self.path}: line {number} is not an episode record ({err})") from err
                done.setdefault(key, record)
            keep += len(line)
        with self.path.open("r+b") as f:
            f.truncate(keep)
            if keep and not raw[:keep].endswith(b"\n"):
                f.seek(keep)
                f.write(b"\n")
        return done

    def __enter__(self) -> EpisodeLog:
        self._file = self.path.open("a", encoding="utf-8")
        return self

    def __exit__(self, *exc: object) -> None:
        self._file.close()
        self._file = None

    def append(self, key: Key, record: EpisodeRecord) -> None:
        """Write one finished episode durably (flush + fsync) before returning."""
        line = {"episode": key[1], **record.to_dict(self.image_dir)}
        self._file.write(json.dumps(line, default=_jsonable) + "\n")
        self._file.flush()
        os.fsync(self._file.fileno())


def _jsonable(value: Any) -> Any:
    if hasattr(value, "tolist"):  # numpy scalars and arrays in infos
        return value.tolist()
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    raise TypeError(f"episode record holds a {type(value).__name__}, which JSON cannot store")
