"""Learner properties on a tiny model: it trains, it resumes exactly after a kill, it is label-free
when it says so. ``check_learner`` runs a cohort learner's member (``CoRL`` subclasses:
``corl``, ``grpo``, ``ttrl``, ``rent``, ``intuitor`` or your own) for 2 optimizer steps:

1. **trains**: the member's final weights differ from the model it started from;
2. **resumes exactly**: a second run of the same config, started as a real process
   (``python -m councilzoo.learners.corl.member``), is killed with SIGKILL as soon as its first
   checkpoint is complete; resumed, it continues from that checkpoint (not from scratch) and
   ends with bit-identical weights to the uninterrupted run;
3. **label-free** (``label_free=True``): labels reach a cohort learner only through the problems
   handed to its reward functions (``reward_functions(cfg, index, problems, link)``; the dataset
   rows never carry gold). Those problems get poisoned answers (drawn by hypothesis: another
   problem's gold, or a value no answer equals); the update must stay bit-identical.

They run in the order 1, 3, 2, so a learner that reads labels fails before the kill. Every run is
seeded, so any difference is the learner's doing. A check is 4 or 5 tiny-member runs
(a config's ``tiny_family``, built once and cached by ``councilzoo.tiny_members``); measured with
RENT on 2 shared CPU cores at load average ~33: 164 s (docs/testing.md, "Learners").
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from hypothesis import settings as Settings
from hypothesis import strategies as st

from councilzoo.testing.falsify import falsify

__all__ = ["STEPS", "Poison", "poisons", "check_learner"]

STEPS = 2
POISONS = ("another problem's gold", "a value no answer equals")
_NO_ANSWER = "<poisoned label>"
_KILL_TIMEOUT_S = 600


@dataclass(frozen=True)
class Poison:
    """How the gold answers are replaced: ``kind`` is one of ``POISONS``."""

    kind: str

    def apply(self, problems: list) -> list:
        if self.kind == POISONS[1]:
            return [replace(p, answer=_NO_ANSWER) for p in problems]
        rotated = problems[1:] + problems[:1]
        return [replace(p, answer=q.answer) for p, q in zip(problems, rotated, strict=True)]


def poisons() -> st.SearchStrategy[Poison]:
    """The label poisons ``check_learner`` tries."""
    return st.sampled_from(POISONS).map(Poison)


def _weights(folder: Path) -> dict:
    from safetensors.torch import load_file

    files = sorted(Path(folder).glob("*.safetensors"))
    if not files:
        raise AssertionError(f"no *.safetensors weights in {folder}")
    return {k: v for f in files for k, v in load_file(f).items()}


def _diff(a: dict, b: dict) -> list[str]:
    """Names of the tensors that differ (a missing one counts)."""
    import torch

    return sorted(k for k in a.keys() | b.keys() if k not in a or k not in b or not torch.equal(a[k], b[k]))


def _spec(cls: type) -> tuple[str, str]:
    """``module:Class`` for the member process, and the folder to put on its import path."""
    module = sys.modules[cls.__module__]
    root = Path(module.__file__).resolve().parents[cls.__module__.count(".")]
    return f"{cls.__module__}:{cls.__qualname__}", str(root)


def _killed_then_resumed(cls: type, config: dict, out: Path, member: int) -> Path:
    """Start member ``member``'s run as a process, SIGKILL it once ``checkpoint-1`` is complete
    (its manifest is written last), resume it in this process; return its final folder."""
    from councilzoo.config import load_config
    from councilzoo.learners.checkpoint import MANIFEST
    from councilzoo.learners.corl.member import run_member
    from councilzoo.learners.placement import Machines, plan_cohort

    cfg = load_config({**config, "output_dir": str(out)}, cls.config_class)
    spec, root = _spec(cls)
    plan = plan_cohort(cfg, spec, Machines.here())  # the plan the launcher would start it from
    paths = [root, *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    command = [sys.executable, "-m", "councilzoo.learners.corl.member", str(plan.write(out)),
               "--world", str(plan.world_of(member).index)]
    log = out.parent / f"{out.name}.log"  # a file, not a pipe: a full pipe would stall the run
    with log.open("w") as sink:
        proc = subprocess.Popen(command, env=env, start_new_session=True, stdout=sink, stderr=sink)
    first = cfg.member_dir(member) / "checkpoint-1" / MANIFEST
    deadline = time.monotonic() + _KILL_TIMEOUT_S
    try:
        while not first.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    if proc.returncode != -signal.SIGKILL or not first.exists():
        raise AssertionError(f"the run to kill (exit {proc.returncode}) wrote no complete checkpoint-1 "
                             f"within {_KILL_TIMEOUT_S} s: {log.read_text().strip()[-2000:]}")
    saved = first.stat().st_mtime_ns
    run_member(cfg, member, cls.reward_functions, resume=True)
    if first.stat().st_mtime_ns != saved:
        raise AssertionError("killed after its first checkpoint, the run started over on resume "
                             "instead of continuing from checkpoint-1")
    return cfg.member_dir(member) / "final"


def check_learner(
    learner: type | str,
    config: dict[str, Any],
    workdir: str | Path,
    *,
    label_free: bool = False,
    member: int = 0,
    settings: Settings | None = None,
) -> None:
    """Check a cohort learner on member ``member`` of ``config`` (module docstring); raise
    ``AssertionError`` naming what failed.

    ``learner`` is the class (or its registered name / ``module:Class``); ``config`` the dict a
    config file would hold (``output_dir``, ``max_steps`` and ``save_steps`` are set here);
    ``workdir`` an empty folder for the runs. ``settings`` bounds the poisons tried (at most 2
    examples, each a full run, whatever the loaded profile says).
    """
    from councilzoo.config import load_config
    from councilzoo.learners.base import get_learner
    from councilzoo.learners.corl.member import member_model_path, run_member
    from councilzoo.learners.data import load_items
    from councilzoo.tiny_members import build_tiny_models

    cls = get_learner(learner) if isinstance(learner, str) else learner
    workdir = Path(workdir)
    config = {**config, "max_steps": STEPS, "save_steps": 1}

    def configured(name: str):
        return load_config({**config, "output_dir": str(workdir / name)}, cls.config_class)

    straight = configured("straight")
    problems = load_items(straight.data, straight.seed)
    build_tiny_models(straight, problems)
    start = _weights(Path(member_model_path(straight, member)))
    run_member(straight, member, cls.reward_functions)
    trained = _weights(straight.member_dir(member) / "final")
    if not _diff(start, trained):
        raise AssertionError(f"check_learner failed: {cls.__name__} left every weight unchanged "
                             f"after {STEPS} steps")

    if label_free:
        _check_label_free(cls, configured, trained, member, settings)
    changed = _diff(trained, _weights(_killed_then_resumed(cls, config, workdir / "killed", member)))
    if changed:
        raise AssertionError(f"check_learner failed: killed after its first checkpoint and resumed, "
                             f"{cls.__name__} ends with other weights than the run left alone "
                             f"({len(changed)} tensors differ, e.g. {changed[:3]})")


def _check_label_free(cls: type, configured, trained: dict, member: int, settings: Settings | None) -> None:
    """Runs with poisoned labels must end where the run with the true labels ended."""
    from councilzoo.learners.corl.member import run_member

    runs = itertools.count()

    def blind(poison: Poison) -> None:
        run = configured(f"poisoned-{next(runs)}")  # hypothesis may replay an example: a fresh folder

        def rewards(cfg, index, items, link):
            return cls.reward_functions(cfg, index, poison.apply(list(items)), link)

        run_member(run, member, rewards)
        differ = _diff(trained, _weights(run.member_dir(member) / "final"))
        if differ:
            raise AssertionError(f"{cls.__name__} claims to be label-free, but with {poison.kind} as "
                                 f"every label its update changed ({len(differ)} tensors differ, "
                                 f"e.g. {differ[:3]})")

    base = settings if settings is not None else Settings()
    falsify("check_learner (label-free)", poisons(), blind,
            Settings(base, max_examples=min(base.max_examples, len(POISONS))))
