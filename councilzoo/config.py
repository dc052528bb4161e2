"""Experiment configs: plain dataclasses loaded from YAML, checked before any work starts.

Every config in councilzoo is a dataclass whose fields carry ``metadata={"help": ...}`` (as TRL's
configs do). ``load_config`` builds one from a YAML file or a mapping and rejects, with the
dotted path of the offending key, unknown keys, missing required keys, values of the wrong
type and numbers below a field's ``metadata["minimum"]``; a dataclass may add its own checks in
``__post_init__`` (raise ``ValueError``).
``dump_config`` writes the resolved config back, and ``run_metadata`` records what produced a run
(seed, package version, git revision), so results can always be traced to their inputs.
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import subprocess
import sys
import types
import typing
from collections.abc import Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypeVar

import yaml

__all__ = [
    "ConfigError", "load_config", "config_to_dict", "dump_config", "run_metadata", "write_run_files",
    "check_output_dir", "cache_home",
]

T = TypeVar("T")


class ConfigError(ValueError):
    """A config that cannot be used; the message names the key and what was expected."""


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


def _convert(value: Any, tp: Any, where: str) -> Any:
    """``value`` checked against (and, for containers and dataclasses, built as) type ``tp``."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if tp is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        options = [a for a in args if a is not type(None)]
        if len(options) == 1:  # Optional[X]: X's own, more precise error
            return _convert(value, options[0], where)
        for arg in options:
            try:
                return _convert(value, arg, where)
            except ConfigError:
                continue
        raise ConfigError(f"{where}: expected {' or '.join(_type_name(a) for a in args)}, got {value!r}")
    if origin is typing.Literal:
        if value not in args:
            raise ConfigError(f"{where}: expected one of {list(args)}, got {value!r}")
        return value
    if dataclasses.is_dataclass(tp):
        return _build(value, tp, where)
    if origin in (list, tuple) or tp in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{where}: expected a list, got {value!r}")
        item_tp = args[0] if args else Any
        items = [_convert(v, item_tp, f"{where}[{i}]") for i, v in enumerate(value)]
        return tuple(items) if (origin or tp) is tuple else items
    if origin is dict or tp is dict:
        if not isinstance(value, Mapping):
            raise ConfigError(f"{where}: expected a mapping, got {value!r}")
        val_tp = args[1] if args else Any
        return {str(k): _convert(v, val_tp, f"{where}.{k}") for k, v in value.items()}
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if tp is Path and isinstance(value, str):
        return Path(value)
    if isinstance(tp, type) and isinstance(value, tp) and not (tp is int and isinstance(value, bool)):
        return value
    raise ConfigError(f"{where}: expected {_type_name(tp)}, got {type(value).__name__} {value!r}")


def _build(data: Any, cls: type[T], where: str) -> T:
    if isinstance(data, cls):
        return data
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where}: expected a mapping for {cls.__name__}, got {data!r}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ConfigError(
            f"{where + ': ' if where else ''}unknown key(s) {unknown} for {cls.__name__}; "
            f"expected some of {sorted(fields)}"
        )
    kwargs = {}
    for name, f in fields.items():
        key = f"{where}.{name}" if where else name
        if name in data:
            kwargs[name] = _convert(data[name], hints[name], key)
            minimum = f.metadata.get("minimum")
            if minimum is not None and kwargs[name] is not None and kwargs[name] < minimum:
                raise ConfigError(
                    f"{key}: must be >= {minimum} (leave it out for its default), got {kwargs[name]}"
                )
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise ConfigError(
                f"{key}: missing required key ({f.metadata.get('help', _type_name(hints[name]))})"
            )
    try:
        return cls(**kwargs)
    except (ValueError, TypeError) as exc:
        if isinstance(exc, ConfigError):
            raise
        raise ConfigError(f"{where or cls.__name__}: {exc}") from exc


def load_config(source: str | Path | Mapping[str, Any], cls: type[T]) -> T:
    """Build a ``cls`` dataclass from a YAML file path or a mapping; raise ``ConfigError`` if invalid."""
    if isinstance(source, (str, Path)):
        path = Path(source)
        if not path.is_file():
            raise ConfigError(f"config file {str(path)!r} does not exist")
        data = yaml.safe_load(path.read_text()) or {}
    else:
        data = source
    return _build(data, cls, "")


def config_to_dict(cfg: Any) -> dict[str, Any]:
    """A dataclass config as plain YAML/JSON-safe data (paths as strings, tuples as lists)."""

    def plain(value: Any) -> Any:
        if isinstance(value, Path):
            return str(value)
        if isinstance(value, (list, tuple)):
            return [plain(v) for v in value]
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items()}
        return value

    return plain(dataclasses.asdict(cfg))


def dump_config(cfg: Any, path: str | Path) -> Path:
    """Write a dataclass config as YAML; ``load_config`` reads it back to an equal config."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config_to_dict(cfg), sort_keys=False))
    return path


def _git_revision() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=Path(__file__).parent, capture_output=True, text=True, timeout=5
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def run_metadata(seed: int | None = None, **extra: Any) -> dict[str, Any]:
    """What produced a run: seed, councilzoo version, git revision, Python and key library versions."""
    import councilzoo

    versions = {}
    for name in ("torch", "transformers", "trl", "peft", "vllm"):
        module = sys.modules.get(name)
        if module is not None:
            versions[name] = getattr(module, "__version__", None)
    return {
        "seed": seed,
        "councilzoo_version": councilzoo.__version__,
        "git_revision": _git_revision(),
        "python": platform.python_version(),
        "libraries": versions,
        "started_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        **extra,
    }


def write_run_files(out_dir: str | Path, cfg: Any, seed: int | None = None, **extra: Any) -> None:
    """Write ``config.yaml`` (resolved config) and ``run.json`` (``run_metadata``) into ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    dump_config(cfg, out / "config.yaml")
    (out / "run.json").write_text(json.dumps(run_metadata(seed, **extra), indent=2))


def check_output_dir(path: str | Path, flag: str = "--out") -> Path:
    """``path`` as an output folder that can be created and written, checked before any work: not
    a file, not under a file, on a writable filesystem. A probe folder is made and removed in its
    nearest existing ancestor, so nothing is left behind (and root's unchecked modes still count)."""
    import tempfile

    out = Path(path)
    if out.exists() and not out.is_dir():
        raise ConfigError(f"{flag} {out}: a file is there, not a folder; choose another folder")
    existing = out.absolute()
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise ConfigError(f"{flag} {out}: {existing} is a file, so no folder can be made under it")
    try:
        Path(tempfile.mkdtemp(prefix=".councilzoo-probe-", dir=existing)).rmdir()
    except OSError as err:
        raise ConfigError(f"{flag} {out}: {existing} is not writable ({err.strerror})") from None
    return out


def cache_home() -> Path:
    """Where councilzoo keeps what it builds offline (tiny models, trained tiny LMs):
    ``$COUNCILZOO_CACHE``, else ``$XDG_CACHE_HOME/councilzoo``, else ``~/.cache/councilzoo``."""
    base = os.environ.get("COUNCILZOO_CACHE")
    if base:
        return Path(base)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "councilzoo"
