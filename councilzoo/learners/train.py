"""``councilzoo train NAME CONFIG [--set key.sub=value ...]``: any registered learner.

The config is read, overridden and validated, and the output folder checked, before any model
loads. ``--set`` takes dotted paths into the YAML (list items by index:
``members.1.trainer.learning_rate=1e-6``); values are parsed as YAML scalars (``1e-6`` as a float).

Cohort learners plan one world per member (``learners/placement.py``) on this machine, on
``--hosts`` (each host's launcher starts its own nodes) or on a SLURM job's allocation (``--slurm``)
and start it; ``--members 1,2`` starts only those. TRACER plans its one world (``num_processes`` on
this machine) the same way. ``--dry-run`` trains nothing: it prints the preflight
(``learners/preflight.py``) and the placement plan, and exits 2 on a setting the docs call wrong or
a plan that does not fit the machines.
"""

from __future__ import annotations

import argparse
import inspect
import json
import socket
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from councilzoo.config import (
    LOCK_FILE,
    ConfigError,
    check_output_dir,
    config_to_dict,
    differences,
    in_file,
    load_config,
    read_yaml,
    run_lock,
    run_metadata,
)

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


def _read_config(path: str | Path, cls: type, assignments: Sequence[str] = ()) -> Any:
    """The validated ``cls`` config from a YAML file with ``--set`` overrides applied."""
    problems: list[str] = []
    data = read_yaml(path, "config file", problems) or {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of settings at the top level")
    data = apply_overrides(data, assignments)
    flags = {a.partition("=")[0]: f"--set {a}" for a in assignments}
    with in_file(path, flags):
        try:
            cfg = load_config(data, cls)
        except ConfigError as exc:
            problems += exc.problems
        if problems:
            raise ConfigError("\n".join(problems))
    return cfg


def _members(value: str | None) -> list[int] | None:
    if value is None:
        return None
    try:
        return [int(v) for v in value.split(",")]
    except ValueError as exc:
        raise ConfigError(f"--members: expected member indices like 0,2, got {value!r}") from exc


def _machines(args: argparse.Namespace) -> Any:
    """The machines ``--slurm`` or ``--hosts`` describe (None: this machine)."""
    if not (getattr(args, "slurm", False) or getattr(args, "hosts", None)):
        return None
    from councilzoo.learners.placement import Machines

    if args.slurm and args.hosts:
        raise ConfigError("--slurm and --hosts: give one (the SLURM job names its own hosts)")
    return Machines.slurm() if args.slurm else Machines.listed(args.hosts, args.gpus_per_host)


def main(args: argparse.Namespace) -> int:
    """Entry point of ``councilzoo train`` (see the module docstring)."""
    from councilzoo.learners.base import get_learner

    learner_class = get_learner(args.learner)
    cohort = "members" in inspect.signature(learner_class.train).parameters
    for flag, given in (("--members", args.members is not None), ("--hosts", getattr(args, "hosts", None)),
                        ("--slurm", getattr(args, "slurm", False))):  # fmt: skip
        if given and not cohort:
            raise ConfigError(f"{flag}: learner {args.learner!r} trains no cohort; drop {flag}")
    sets = list(args.set or [])
    if args.out:
        sets.append(f"output_dir={args.out}")
    if args.max_steps is not None:
        sets.append(f"max_steps={args.max_steps}")
    cfg = _read_config(args.config, learner_class.config_class, sets)
    machines = _machines(args)
    if getattr(args, "dry_run", False):
        from councilzoo.learners.placement import Machines
        from councilzoo.learners.preflight import preflight

        plan, unplaced = None, []
        if hasattr(learner_class, "placement"):  # a learner that starts worlds: their placement plan
            try:
                plan = learner_class.placement(cfg, machines or Machines.here(), args.resume)
            except ConfigError as err:
                unplaced.append(f"placement: {err}")
        report, errors = preflight(args.learner, cfg, args.gpu_memory, plan)
        print(report)
        errors = errors or unplaced  # a batch setting the preflight names stops the plan too
        for error in errors:
            print(f"councilzoo train: error: {error}", file=sys.stderr)
        return 2 if errors else 0
    flag = "--out" if args.out else f"{args.config}: output_dir"
    check_output_dir(cfg.output_dir, flag)
    learner = learner_class(cfg)
    members = _members(args.members)
    changed = _changed_settings(cfg) if args.resume else []
    if changed and not args.allow_changed_settings:
        raise ConfigError("\n".join(
            f"--resume: {change} since the run in {cfg.output_dir} started; pass --allow-changed-settings "
            "to continue with the new settings (recorded with the step they start from), or --overwrite "
            "to start again" for change in changed
        ))
    # here, not above: they import torch, which a mistake in the input need not wait for
    from councilzoo.learners.corl.launch import CohortFailed
    from councilzoo.learners.corl.link import PeerFailure

    kwargs = {"members": members} if members is not None else {}
    if machines is not None:
        kwargs.update(machines=machines, host=args.host)
    lock = f".councilzoo-members-{'-'.join(map(str, members))}.lock" if members is not None else LOCK_FILE
    if args.hosts:  # each host's launcher of a run on named hosts (one folder they all share)
        lock = f".councilzoo-host-{args.host or socket.gethostname().split('.')[0]}.lock"
    try:
        with run_lock(cfg.output_dir, flag, lock):
            if changed:
                _record_changed_settings(cfg, changed, learner.resume_step())
            rows = learner.train(resume=args.resume, overwrite=args.overwrite, **kwargs)
    except (CohortFailed, PeerFailure) as exc:
        print(f"councilzoo train: cohort stopped: {exc}", file=sys.stderr)
        return 3
    print_summary(args.learner, cfg, rows, members)
    return 0


# Settings a resume may change without --allow-changed-settings: a longer run, a moved folder.
_RESUME_FREE = ("max_steps", "output_dir")
_SETTINGS_CHANGES = "settings_changes.jsonl"


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


def _record_changed_settings(cfg: Any, changed: Sequence[str], step: int | None) -> None:
    """Append to ``OUTPUT/settings_changes.jsonl`` what a resume changed and the step it continues
    after, since ``config.yaml`` then holds the new settings."""
    row = {"resumed_after_step": step, "changed": list(changed), "at": run_metadata()["started_at"]}
    with open(Path(cfg.output_dir) / _SETTINGS_CHANGES, "a") as file:
        file.write(json.dumps(row) + "\n")


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
