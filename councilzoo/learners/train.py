"""``councilzoo train NAME CONFIG [--set key.sub=value ...]``: any registered learner.

The config is read, overridden and validated, and the output folder checked, before any model
loads. ``--set`` takes dotted paths into the YAML (list items by index:
``members.1.trainer.learning_rate=1e-6``); values are parsed as YAML scalars (``1e-6`` as a float).

Cohort learners start one world per member on this node; ``--members 1,2`` starts only those
(multi-node: each node starts its own members, member 0's node hosting the label store).
"""

from __future__ import annotations

import argparse
import inspect
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from councilzoo.config import ConfigError, check_output_dir, load_config

__all__ = ["apply_overrides", "main", "print_summary"]


def apply_overrides(data: dict[str, Any], assignments: Sequence[str]) -> dict[str, Any]:
    """``data`` with each ``dotted.path=value`` applied (``ConfigError`` naming a bad one)."""
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


def read_config(path: str | Path, cls: type, assignments: Sequence[str] = ()) -> Any:
    """The validated ``cls`` config from a YAML file with ``--set`` overrides applied."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file {str(path)!r} does not exist")
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        raise ConfigError(f"{path}{where}: not valid YAML: {getattr(exc, 'problem', exc)}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of settings at the top level")
    try:
        return load_config(apply_overrides(data, assignments), cls)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from exc


def _members(value: str | None) -> list[int] | None:
    if value is None:
        return None
    try:
        return [int(v) for v in value.split(",")]
    except ValueError as exc:
        raise ConfigError(f"--members: expected member indices like 0,2, got {value!r}") from exc


def main(args: argparse.Namespace) -> int:
    """Entry point of ``councilzoo train`` (see the module docstring)."""
    from councilzoo.learners.base import get_learner

    learner_class = get_learner(args.learner)
    if args.members is not None and "members" not in inspect.signature(learner_class.train).parameters:
        raise ConfigError(f"--members: learner {args.learner!r} trains no cohort; drop --members")
    sets = list(args.set or [])
    if args.out:
        sets.append(f"output_dir={args.out}")
    if args.max_steps is not None:
        sets.append(f"max_steps={args.max_steps}")
    cfg = read_config(args.config, learner_class.config_class, sets)
    check_output_dir(cfg.output_dir, "--out" if args.out else f"{args.config}: output_dir")
    learner = learner_class(cfg)
    members = _members(args.members)
    # here, not above: they import torch, which a mistake in the input need not wait for
    from councilzoo.learners.cohort.distributed import PeerFailure
    from councilzoo.learners.cohort.launch import CohortFailed

    kwargs = {"members": members} if members is not None else {}
    try:
        rows = learner.train(resume=args.resume, overwrite=args.overwrite, **kwargs)
    except (CohortFailed, PeerFailure) as exc:
        print(f"councilzoo train: cohort stopped: {exc}", file=sys.stderr)
        return 3
    print_summary(args.learner, cfg, rows, members)
    return 0


def print_summary(learner: str, cfg: Any, rows: Sequence[dict], members: Sequence[int] | None = None) -> None:
    """The final table: one line per trained model (``members``: the indices of a cohort's
    members that ``rows`` belong to; default all)."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{learner}: {cfg.max_steps} steps in {cfg.output_dir}")
    keys = [
        k
        for k in ("reward", "label_accuracy", "oracle_reward", "agreement", "accuracy")
        if any(k in r for r in rows)
    ]
    cohort = getattr(cfg, "members", [])
    names = [cohort[i].name for i in (range(len(cohort)) if members is None else members)] or [learner]
    table.add_column("model")
    for key in keys:
        table.add_column(key, justify="right")
    for name, row in zip(names, rows, strict=False):
        table.add_row(name, *[f"{row[k]:.3f}" if isinstance(row.get(k), float) else "-" for k in keys])
    Console().print(table)
