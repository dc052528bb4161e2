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
import socket
import sys
from collections.abc import Sequence
from typing import Any

from councilzoo.config import LOCK_FILE, ConfigError, apply_overrides, hold_run_folder, load_config

__all__ = ["apply_overrides", "main", "print_summary"]  # apply_overrides: --set's rule, from config


def main(args: argparse.Namespace) -> int:
    """Entry point of ``councilzoo train`` (see the module docstring). Each job is one call into the
    module that owns it: the config (``config.load_config``, ``--set`` included), the machines
    (``placement.Machines.from_flags``), the preflight (``preflight.dry_run``), the output folder
    (``config.hold_run_folder``), the training (the learner's ``train``)."""
    from councilzoo.learners.base import get_learner
    from councilzoo.learners.placement import Machines

    learner_class = get_learner(args.learner)
    cohort = "members" in inspect.signature(learner_class.train).parameters
    for flag, given in (("--members", args.members is not None), ("--hosts", args.hosts),
                        ("--slurm", args.slurm)):  # fmt: skip
        if given and not cohort:
            raise ConfigError(f"{flag}: learner {args.learner!r} trains no cohort; drop {flag}")
    sets = list(args.set or [])
    if args.out:
        sets.append(f"output_dir={args.out}")
    if args.max_steps is not None:
        sets.append(f"max_steps={args.max_steps}")
    cfg = load_config(args.config, learner_class.config_class, sets)
    machines = Machines.from_flags(args.slurm, args.hosts, args.gpus_per_host)
    if args.dry_run:
        from councilzoo.learners.preflight import dry_run

        return dry_run(args.learner, learner_class, cfg, machines, args.resume, args.gpu_memory)
    try:
        members = None if args.members is None else [int(v) for v in args.members.split(",")]
    except ValueError as exc:
        raise ConfigError(f"--members: expected member indices like 0,2, got {args.members!r}") from exc
    learner = learner_class(cfg)
    kwargs = {"members": members} if members is not None else {}
    if machines is not None:
        kwargs.update(machines=machines, host=args.host)
    lock = f".councilzoo-members-{'-'.join(map(str, members))}.lock" if members is not None else LOCK_FILE
    if args.hosts:  # each host's launcher of a run on named hosts (one folder they all share)
        lock = f".councilzoo-host-{args.host or socket.gethostname().split('.')[0]}.lock"
    flag = "--out" if args.out else f"{args.config}: output_dir"
    resume_step = learner.resume_step if args.resume else None
    # a cohort's failures: not at the top, since their modules import torch (as the learner's do)
    from councilzoo.learners.corl.launch import CohortFailed
    from councilzoo.learners.corl.link import PeerFailure

    try:
        with hold_run_folder(cfg, flag, lock, resume_step, args.allow_changed_settings):
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
