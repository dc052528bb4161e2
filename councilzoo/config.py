"""Experiment configs: plain dataclasses loaded from YAML, checked before any work starts.

Every config in councilzoo is a dataclass whose fields carry ``metadata={"help": ...}`` (as TRL's
configs do). ``load_config`` builds one from a mapping, or from a YAML file with ``--set``
overrides applied (``apply_overrides``), and rejects, with the dotted path of the offending key
(its line in the file, or the flag that set it), unknown keys, missing required keys, values of
the wrong type, and numbers out of range: every number anywhere in a config must be finite (no
NaN, no infinity), a field's within its ``metadata`` ``minimum`` / ``above`` / ``maximum``, and a
library's keyword given through a mapping (``trainer:``, a model's ``kwargs:`` and ``agent:``)
within ``KEYWORD_RANGES``: one place, which ``--dry-run`` and training both go through, before
any model loads. A dataclass may add its own checks in ``__post_init__`` (raise ``ValueError``).

A YAML file is read with its aliases bounded (``MAX_YAML_NODES``: a 600-byte "billion laughs"
file would expand to gigabytes) and only if it is text (a NUL byte is refused in one line); an
error quotes a value only up to ``MAX_QUOTED`` characters.
``dump_config`` writes the resolved config back, and ``run_metadata`` records what produced a run
(seed, package version, git revision), so results can always be traced to their inputs. A run's
output folder is checked before any work (``check_output_dir``) and locked while the run writes
(``run_lock``); ``hold_run_folder`` does both for a training run, with a resume's check of the
settings it changes.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
import math
import os
import platform
import re
import reprlib
import subprocess
import sys
import types
import typing
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypeVar

import yaml

__all__ = [
    "ConfigError", "load_config", "apply_overrides", "config_to_dict", "dump_config", "run_metadata",
    "write_run_files", "check_output_dir", "check_output_file", "hold_run_folder", "check_number",
    "cache_home", "spec_dir", "cached_build", "MissingExtraError",
]

T = TypeVar("T")
MAX_QUOTED = 80  # characters of a value an error quotes: a value may be huge
MAX_YAML_NODES = 100_000  # nodes a YAML file may expand to through its aliases (the configs: < 1,000)


def quoted(value: Any) -> str:
    """``repr(value)`` cut to about ``MAX_QUOTED`` characters, for error messages."""
    short = reprlib.Repr()  # its keyword arguments need Python 3.12
    short.maxstring = short.maxother = MAX_QUOTED
    short.maxlist = short.maxtuple = short.maxdict = 6
    short.maxlevel = 2
    return short.repr(value)


# Ranges of a library's keywords, by name, wherever a config passes them on through a mapping: a
# learner's ``trainer:`` (TRL's GRPOConfig), a model's ``kwargs:`` and ``agent: {sampling: ...}``.
# The library takes these values and then divides by zero, samples nothing or never moves.
KEYWORD_RANGES: dict[str, dict[str, float]] = {
    "learning_rate": {"above": 0},
    "temperature": {"minimum": 0},  # 0: greedy (a trainer's temperature must be above 0: _LIBRARY_RANGES)
    "top_p": {"above": 0, "maximum": 1},
    "max_new_tokens": {"minimum": 1},
    "max_completion_length": {"minimum": 1},
    "max_prompt_length": {"minimum": 1},
    "num_generations": {"minimum": 2},
    "per_device_train_batch_size": {"minimum": 1},
    "gradient_accumulation_steps": {"minimum": 1},
    "num_iterations": {"minimum": 1},
    "num_train_epochs": {"above": 0},
    "beta": {"minimum": 0},
    "epsilon": {"minimum": 0},
    "epsilon_high": {"minimum": 0},
    "max_grad_norm": {"minimum": 0},
    "weight_decay": {"minimum": 0},
    "warmup_ratio": {"minimum": 0, "maximum": 1},
    "adam_epsilon": {"above": 0},
    "vllm_gpu_memory_utilization": {"above": 0, "maximum": 1},
    "gpu_memory_utilization": {"above": 0, "maximum": 1},
}
_LIBRARY_RANGES = {"GRPOConfig": {"temperature": {"above": 0}}}  # TRL divides the logits by it


def check_number(value: Any, where: str, minimum: float | None = None, above: float | None = None,
                 maximum: float | None = None) -> None:
    """The one check of a numeric setting: a ``ConfigError`` naming ``where`` unless ``value`` is
    finite and within the bounds given (``above``: strictly)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return
    if not math.isfinite(value):
        raise ConfigError(f"{where}: must be a finite number, got {value}")
    if minimum is not None and value < minimum:
        raise ConfigError(f"{where}: must be >= {minimum} (leave it out for its default), got {value}")
    if above is not None and value <= above:
        raise ConfigError(f"{where}: must be > {above} (leave it out for its default), got {value}")
    if maximum is not None and value > maximum:
        raise ConfigError(f"{where}: must be <= {maximum} (leave it out for its default), got {value}")


def _check_numbers(value: Any, where: str) -> None:
    """Every number inside ``value`` (a mapping passed on to a library) finite, and a keyword of
    ``KEYWORD_RANGES`` within its range; one ``ConfigError`` line per number that is not."""
    problems: list[str] = []
    if isinstance(value, Mapping):
        for key, item in value.items():
            gather(problems, check_number, item, f"{where}.{key}", **KEYWORD_RANGES.get(str(key), {}))
            if isinstance(item, (Mapping, list, tuple)):
                gather(problems, _check_numbers, item, f"{where}.{key}")
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            gather(problems, _check_numbers if isinstance(item, (Mapping, list, tuple)) else check_number,
                   item, f"{where}[{i}]")
    else:
        gather(problems, check_number, value, where)
    if problems:
        raise ConfigError("\n".join(problems))


class MissingExtraError(ImportError):
    """A backend needs an optional dependency; the message names the extra that installs it."""


class ConfigError(ValueError):
    """A config that cannot be used; the message names the key and what was expected, one line
    per mistake when there are several."""

    @property
    def problems(self) -> list[str]:
        return str(self).splitlines()


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the choice closest to a mistyped ``name``, else ``""``."""
    close = difflib.get_close_matches(str(name), [str(c) for c in choices], n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _each(items: Iterable[Any], convert: Callable[[Any], Any]) -> list[Any]:
    """``convert`` applied to every item; one ``ConfigError`` with every item's problems."""
    done, problems = [], []
    for item in items:
        try:
            done.append(convert(item))
        except ConfigError as err:
            problems += err.problems
    if problems:
        raise ConfigError("\n".join(problems))
    return done


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


def _convert(value: Any, tp: Any, where: str) -> Any:
    """``value`` checked against (and, for containers and dataclasses, built as) type ``tp``."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if tp is Any:
        _check_numbers(value, where)
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
        expected = " or ".join(_type_name(a) for a in args)
        raise ConfigError(f"{where}: expected {expected}, got {quoted(value)}")
    if origin is typing.Literal:
        if value not in args:
            hint = did_you_mean(value, args)
            raise ConfigError(f"{where}: expected one of {list(args)}, got {quoted(value)}{hint}")
        return value
    if dataclasses.is_dataclass(tp):
        return _build(value, tp, where)
    if origin in (list, tuple) or tp in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{where}: expected a list, got {quoted(value)}")
        item_tp = args[0] if args else Any
        items = _each(enumerate(value), lambda iv: _convert(iv[1], item_tp, f"{where}[{iv[0]}]"))
        return tuple(items) if (origin or tp) is tuple else items
    if origin is dict or tp is dict:
        if not isinstance(value, Mapping):
            raise ConfigError(f"{where}: expected a mapping, got {quoted(value)}")
        val_tp = args[1] if args else Any
        if val_tp is Any:  # keywords passed on to a library: checked by name
            _check_numbers(value, where)
            return {str(key): item for key, item in value.items()}
        pairs = _each(value.items(), lambda kv: (str(kv[0]), _convert(kv[1], val_tp, f"{where}.{kv[0]}")))
        return dict(pairs)
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if tp is float and isinstance(value, str) and _YAML11_FLOAT.fullmatch(value.strip()):
        value = float(value)  # YAML 1.1 reads 1e-6 (no dot) as text
    if tp is float and isinstance(value, float):
        check_number(value, where)
        return value
    if tp is Path and isinstance(value, str):
        return Path(value)
    if isinstance(tp, type) and isinstance(value, tp) and not (tp is int and isinstance(value, bool)):
        return value
    raise ConfigError(f"{where}: expected {_type_name(tp)}, got {type(value).__name__} {quoted(value)}")


_YAML11_FLOAT = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+")


def check_fields(data: Mapping[str, Any], cls: type, where: str, what: str | None = None) -> None:
    """Check a mapping of keyword arguments for the dataclass ``cls`` (a library's config, e.g.
    TRL's ``GRPOConfig``) against its fields' own annotations without building it: one
    ``ConfigError`` line per unknown name (with a did-you-mean) and per value of the wrong type."""
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls) if f.init]
    ranges = {**KEYWORD_RANGES, **_LIBRARY_RANGES.get(cls.__name__, {})}
    what = what or cls.__name__
    problems = [
        f"{where}.{key}: not a {what} field{did_you_mean(key, names)} (see {cls.__module__}.{cls.__name__})"
        for key in data
        if key not in names
    ]
    for key, value in data.items():
        if key in names:
            try:
                _convert(value, hints[key], f"{where}.{key}")
                check_number(value, f"{where}.{key}", **ranges.get(key, {}))
            except ConfigError as err:
                problems += err.problems
    if problems:
        raise ConfigError("\n".join(problems))


def _build(data: Any, cls: type[T], where: str) -> T:
    if isinstance(data, cls):
        return data
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where}: expected a mapping for {cls.__name__}, got {quoted(data)}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    # a field's older names (metadata "aliases") still read as the field; errors name the key written
    aliases = {alias: name for name, f in fields.items() for alias in f.metadata.get("aliases", ())}
    written = {aliases.get(key, key): key for key in data}
    problems = [
        f"{where + '.' if where else ''}{name}: unknown key for {cls.__name__}"
        f"{did_you_mean(name, [*fields, *aliases])}; expected some of {sorted(fields)}"
        for name in data
        if name not in fields and name not in aliases
    ]
    problems += [
        f"{where + '.' if where else ''}{alias}: the older name of {name!r}; give one of them"
        for alias, name in aliases.items()
        if alias in data and name in data
    ]
    data = {aliases.get(key, key): value for key, value in data.items()}
    kwargs = {}
    for name, f in fields.items():
        key = f"{where}.{written.get(name, name)}" if where else written.get(name, name)
        if name in data:
            try:
                kwargs[name] = _convert(data[name], hints[name], key)
            except ConfigError as err:
                problems += err.problems
                continue
            bounds = {bound: f.metadata.get(bound) for bound in ("minimum", "above", "maximum")}
            gather(problems, check_number, kwargs[name], key, **bounds)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            what = f.metadata.get("help", _type_name(hints[name]))
            problems.append(f"{key}: missing required key ({what})")
    if problems:  # the class's own checks need every field, so they wait for these
        raise ConfigError("\n".join(problems))
    try:
        return cls(**kwargs)
    except (ValueError, TypeError) as exc:
        if isinstance(exc, ConfigError):
            raise
        lines = str(exc).splitlines()
        raise ConfigError("\n".join(f"{where or cls.__name__}: {line}" for line in lines)) from exc


def load_config(source: str | Path | Mapping[str, Any], cls: type[T], overrides: Sequence[str] = ()) -> T:
    """Build a ``cls`` dataclass from a mapping, or from a YAML file path with ``overrides``
    (``--set`` assignments, ``apply_overrides``) applied; raise a ``ConfigError`` naming every
    mistake at once, each placed at its line in the file or at the flag that set its key."""
    if not isinstance(source, (str, Path)):
        return _build(source, cls, "")
    problems: list[str] = []
    data = read_yaml(source, "config file", problems) or {}
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping of settings at the top level")
    data = apply_overrides(data, overrides)
    flags = {a.partition("=")[0]: f"--set {a}" for a in overrides}
    with in_file(source, flags):
        try:
            cfg = _build(data, cls, "")
        except ConfigError as exc:
            problems += exc.problems
        if problems:
            raise ConfigError("\n".join(problems))
    return cfg


def apply_overrides(data: dict[str, Any], assignments: Sequence[str]) -> dict[str, Any]:
    """``data`` with each ``dotted.path=value`` applied (list items by index:
    ``members.1.trainer.learning_rate=1e-6``; values parsed as YAML scalars); a ``ConfigError``
    naming a bad one."""
    for assignment in assignments:
        path, sep, raw = assignment.partition("=")
        if not sep or not path:
            raise ConfigError(f"--set {assignment!r}: expected key.sub=value")
        keys = path.split(".")
        node: Any = data
        for i, key in enumerate(keys):
            last = i == len(keys) - 1
            if isinstance(node, list):
                if not key.isdigit() or int(key) >= len(node):
                    raise ConfigError(
                        f"--set {assignment!r}: {'.'.join(keys[:i]) or 'config'} has "
                        f"{len(node)} items; {key!r} is not an index of one"
                    )
                key = int(key)
            elif not isinstance(node, dict):
                raise ConfigError(f"--set {assignment!r}: {'.'.join(keys[:i])} is not a mapping")
            if last:
                node[key] = _scalar(raw)
            else:
                if isinstance(node, dict) and key not in node:
                    node[key] = {}
                node = node[key]
    return data


def _scalar(raw: str) -> Any:
    """A YAML scalar, with YAML 1.1's gap closed: ``1e-6`` is a float, not a string."""
    value = yaml.safe_load(raw)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return value
    return value


def gather(problems: list[str], check: Callable[..., T], *args: Any, **kwargs: Any) -> T | None:
    """``check(*args, **kwargs)``, or None with its mistake's lines appended to ``problems``: so
    that independent inputs are all checked, and their mistakes reported together."""
    try:
        return check(*args, **kwargs)
    except ValueError as err:  # ConfigError included
        problems += str(err).splitlines()
        return None


def check_file(path: str | Path, what: str = "config file") -> Path:
    """``path`` when it is a file; else a ``ConfigError`` saying it is a folder (naming the YAML
    files in it) or that it does not exist (with the closest name beside it)."""
    path = Path(path)
    if path.is_dir():
        inside = sorted(p.name for p in path.iterdir() if p.suffix in (".yaml", ".yml"))
        hint = f"; it holds {', '.join(inside[:4])}{', ...' if len(inside) > 4 else ''}" if inside else ""
        raise ConfigError(f"{what} {str(path)!r} is a folder, not a file{hint}")
    if not path.is_file():
        siblings = [p.name for p in path.parent.iterdir()] if path.parent.is_dir() else []
        raise ConfigError(f"{what} {str(path)!r} does not exist{did_you_mean(path.name, siblings)}")
    return path


class _UniqueKeyLoader(yaml.SafeLoader):
    """YAML's safe loader noting every key given twice in one mapping (PyYAML keeps the last)."""

    def __init__(self, stream: str):
        super().__init__(stream)
        self.repeated: list[str] = []

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        first: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # "<<: *base": its keys may be overridden
                continue
            key = self.construct_object(key_node, deep=True)
            if not isinstance(key, Hashable):  # SafeLoader's own error follows
                continue
            line = key_node.start_mark.line + 1
            if key in first:
                self.repeated.append(
                    f"line {line}: {key}: key given twice in one mapping (first on line {first[key]}); "
                    "YAML would keep only the last, so remove one"
                )
            first.setdefault(key, line)
        return super().construct_mapping(node, deep)


_UniqueKeyLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _UniqueKeyLoader.construct_mapping
)


def read_yaml(path: str | Path, what: str = "config file", problems: list[str] | None = None) -> Any:
    """The data of the YAML file ``path`` (``check_file`` first); a ``ConfigError`` naming the line
    of a syntax error, or one line per key given twice (appended to ``problems`` instead when it
    is given, so that they are reported with the file's other mistakes)."""
    path = check_file(path, what)
    text = _text(path)
    try:
        loader = _UniqueKeyLoader(text)
    except yaml.reader.ReaderError as err:  # a character YAML does not allow (a control character)
        raise ConfigError(f"{path}: not valid YAML: {err.reason} (character {err.character!r} at offset "
                          f"{err.position})") from None
    try:
        node = loader.get_single_node()
        if node is not None and _expanded_size(node, {}) > MAX_YAML_NODES:
            raise ConfigError(
                f"{path}: its aliases (*name) expand to more than {MAX_YAML_NODES:,} values; write the "
                "values out instead of nesting aliases"
            )
        data = None if node is None else loader.construct_document(node)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"{path}, line {mark.line + 1}" if mark is not None else str(path)
        raise ConfigError(f"{where}: not valid YAML: {getattr(err, 'problem', None) or err}") from None
    finally:
        loader.dispose()
    repeated = [f"{path}, {problem}" for problem in loader.repeated]
    if repeated and problems is None:
        raise ConfigError("\n".join(repeated))
    (problems if problems is not None else []).extend(repeated)
    return data


def _text(path: Path) -> str:
    """The file's text; a ``ConfigError`` naming it when it is not UTF-8 text (a NUL byte, a binary)."""
    data = path.read_bytes()
    nul = data.find(b"\0")
    if nul >= 0:
        raise ConfigError(f"{path}: not a text file (a NUL byte at offset {nul}); give a YAML file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ConfigError(f"{path}: not UTF-8 text (byte {err.start}); save it as UTF-8") from None


def _expanded_size(node: yaml.Node, sizes: dict[int, int]) -> int:
    """How many nodes ``node`` stands for once every alias is expanded (each shared node counted
    once per use, computed once: linear in the file, however large the expansion)."""
    if id(node) not in sizes:
        sizes[id(node)] = 1  # a node that holds itself (``&a [*a]``) counts once
        children = node.value if isinstance(node, yaml.SequenceNode) else (
            [part for pair in node.value for part in pair] if isinstance(node, yaml.MappingNode) else []
        )
        sizes[id(node)] = 1 + sum(_expanded_size(child, sizes) for child in children)
    return sizes[id(node)]


@contextmanager
def in_file(path: str | Path, overrides: Mapping[str, str] = {}) -> Iterator[None]:  # noqa: B006 (read only)
    """Re-raise a ``ConfigError`` from inside with each of its lines prefixed by ``path`` and the
    line of the key it names (``agents.yaml, line 4: models.medium.kwargs.skil: ...``), or by the
    command-line flag that set the key (``overrides``: dotted key -> flag, e.g. ``--set env.lam=-1``)."""
    try:
        yield
    except ConfigError as err:
        placed = []  # (line, message): the flags' first, then the file's in its order, then the rest
        for message in err.problems:
            found = re.match(rf"{re.escape(str(path))}, line (\d+)", message)  # read_yaml's own
            if found:
                placed.append((int(found.group(1)), message))
                continue
            key_path = re.match(r"[\w-]+(?:\.[\w-]+|\[\d+\])*(?=:)", message)
            dotted = re.sub(r"\[(\d+)\]", r".\1", key_path.group(0)) if key_path else None
            if dotted in overrides:
                placed.append((0, f"{overrides[dotted]}: {message}"))
                continue
            line = _key_line(Path(path), key_path.group(0)) if key_path else None
            placed.append((line or math.inf, f"{path}{f', line {line}' if line else ''}: {message}"))
        lines = [message for _, message in sorted(placed, key=lambda lm: lm[0])]
        raise ConfigError("\n".join(lines)) from err


def _key_line(path: Path, key_path: str) -> int | None:
    """The 1-based line of ``key_path`` ("models.medium.kwargs.skil", "peers[1]") in the file."""
    try:
        node = yaml.compose(path.read_text(), Loader=yaml.SafeLoader)
    except (OSError, yaml.YAMLError):
        return None
    line = None
    for key in re.findall(r"[^.\[\]]+", key_path):
        if isinstance(node, yaml.MappingNode):
            entry = next(((k, v) for k, v in node.value if k.value == key), None)
            if entry is None:
                return None
            line, node = entry[0].start_mark.line + 1, entry[1]
        elif isinstance(node, yaml.SequenceNode) and key.isdigit() and int(key) < len(node.value):
            node = node.value[int(key)]
            line = node.start_mark.line + 1
        else:
            return None
    return line


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


def differences(old: Any, new: Any, key: str = "", in_words: Mapping[str, str] = {}) -> list[str]:  # noqa: B006
    """``"key.path: old -> new"`` for every value that differs between two resolved configs (empty
    when equal); ``in_words`` names some keys' differences in words (a digest: "the data file
    changed"). Mappings with other keys (e.g. other models) are named by their keys."""
    if isinstance(old, dict) and isinstance(new, dict):
        if set(old) != set(new) and key:
            return [f"{key}: {_short(sorted(old))} -> {_short(sorted(new))}"]
        found = []
        for name in [*old, *(k for k in new if k not in old)]:
            found += differences(old.get(name), new.get(name), f"{key}.{name}" if key else name, in_words)
        return found
    if old == new:
        return []
    if key in in_words:
        return [in_words[key]]
    return [f"{key or 'settings'}: {_short(old)} -> {_short(new)}"]


def _short(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."


def run_metadata(seed: int | None = None, **extra: Any) -> dict[str, Any]:
    """What produced a run: seed, councilzoo version, git revision, Python and key library versions,
    and whether its code sandbox accepts weaker isolation where the kernel lacks a layer."""
    import councilzoo
    from councilzoo.sandbox.pool import settings as sandbox_settings

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
        "sandbox": sandbox_settings(),
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


def check_output_file(path: str | Path, flag: str = "--out") -> Path:
    """``path`` as a file that can be written, checked before any work: not a folder, and its
    folder one that can be made and written (``check_output_dir``)."""
    out = Path(path)
    if out.is_dir():
        raise ConfigError(f"{flag} {out}: a folder is there, not a file; name a file")
    check_output_dir(out.parent, f"{flag} {out}: its folder")
    return out


LOCK_FILE = ".councilzoo.lock"


@contextmanager
def run_lock(out: str | Path, flag: str = "--out", name: str = LOCK_FILE) -> Iterator[None]:
    """Hold the lock of output folder ``out`` (made if needed) while a run writes into it; a
    second run is refused at once with one line. The lock is the kernel's (``filelock``'s
    ``flock``), so it ends with its process: a run that was killed leaves no lock behind. A
    folder made here that a failed run left holding nothing but the lock is removed again."""
    from filelock import FileLock, Timeout

    out = Path(out)
    made = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    lock = FileLock(out / name, timeout=0)
    try:
        lock.acquire()
    except Timeout:
        raise ConfigError(
            f"{flag} {out}: another councilzoo run is writing into this folder now; wait for it to "
            f"end, or choose another {flag}"
        ) from None
    try:
        yield
    except BaseException:
        if made and [p.name for p in out.iterdir()] == [name]:
            (out / name).unlink()
            out.rmdir()
        raise
    finally:
        lock.release()


# Settings a resume may change without --allow-changed-settings: a longer run, a moved folder.
_RESUME_FREE = ("max_steps", "output_dir")
_SETTINGS_CHANGES = "settings_changes.jsonl"


@contextmanager
def hold_run_folder(
    cfg: Any, flag: str, lock: str = LOCK_FILE, resume_step: Callable[[], int | None] | None = None,
    allow_changed_settings: bool = False,
) -> Iterator[None]:
    """Prepare the output folder of ``cfg``'s run and hold it while the run writes: checked
    (``check_output_dir``); on a resume (``resume_step``: the learner's, the step the run continues
    after) refused if the settings changed since the run started (``config.yaml``), unless
    ``allow_changed_settings``, with which each change is recorded in ``settings_changes.jsonl``
    (``config.yaml`` then holds the new settings); locked (``run_lock``, the lock file ``lock``)."""
    check_output_dir(cfg.output_dir, flag)
    changed = _changed_settings(cfg) if resume_step is not None else []
    if changed and not allow_changed_settings:
        raise ConfigError("\n".join(
            f"--resume: {change} since the run in {cfg.output_dir} started; pass --allow-changed-settings "
            "to continue with the new settings (recorded with the step they start from), or --overwrite "
            "to start again" for change in changed
        ))
    with run_lock(cfg.output_dir, flag, lock):
        if changed:
            row = {"resumed_after_step": resume_step(), "changed": changed,
                   "at": run_metadata()["started_at"]}  # fmt: skip
            with open(Path(cfg.output_dir) / _SETTINGS_CHANGES, "a") as file:
                file.write(json.dumps(row) + "\n")
        yield


def _changed_settings(cfg: Any) -> list[str]:
    """What ``cfg`` changes against the resolved config its output folder's run started with
    (``config.yaml``), besides ``_RESUME_FREE``: one ``"key: old -> new"`` per difference."""
    path = Path(cfg.output_dir) / "config.yaml"
    if not path.is_file():
        return []
    old, new = yaml.safe_load(path.read_text()) or {}, config_to_dict(cfg)
    for key in _RESUME_FREE:
        old.pop(key, None)
        new.pop(key, None)
    return differences(old, new)


def cache_home() -> Path:
    """Where councilzoo keeps what it builds offline (tiny models, trained tiny LMs):
    ``$COUNCILZOO_CACHE``, else ``$XDG_CACHE_HOME/councilzoo``, else ``~/.cache/councilzoo``."""
    base = os.environ.get("COUNCILZOO_CACHE")
    if base:
        return Path(base)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "councilzoo"


BUILD_SPEC_FILE = "councilzoo_member.json"  # what a cached build was built from


def spec_dir(root: str | Path, spec: dict[str, Any]) -> Path:
    """The folder under ``root`` of the model built from ``spec`` (by ``cached_build``):
    ``<family>-<hash of spec>``, so a model built from other settings has a folder of its own."""
    digest = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]
    return Path(root) / f"{spec['family']}-{digest}"


def cached_build(target: Path, spec: dict[str, Any], build: Callable[[Path], None]) -> Path:
    """``target``, built by ``build(tmp)`` unless present: in a temporary folder renamed into place
    once complete, under a lock on ``target`` (a second process waits, then finds it built)."""
    import shutil

    from filelock import FileLock

    target.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(f"{target}.lock"):
        if target.is_dir():
            return target
        tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        build(tmp)
        (tmp / BUILD_SPEC_FILE).write_text(json.dumps(spec, indent=1, sort_keys=True))
        os.rename(tmp, target)
    return target
