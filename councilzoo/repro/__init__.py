"""``councilzoo repro CLAIM``: each paper's central claim, reproduced at toy scale.

Claims: ``corl`` (councilzoo.repro.corl), ``comed`` (councilzoo.repro.comed), ``tracer``
(councilzoo.repro.tracer), or ``all`` of these three; and five experiments run by name only, each
with its own time budget: ``corl-dose`` (councilzoo.repro.corl_dose: Co-RL's dose-response,
Experiment B, an extension), ``corl-cotrain`` (councilzoo.repro.corl_cotrain: Co-RL decided by
co-training against TTRL), ``real`` (councilzoo.repro.real: the pre-registered experiment on
SmolLM2-135M-Instruct; it needs the real model) and ``tracer-label-free``
(councilzoo.repro.tracer_label_free: TRACER's utterance layer with its label-free arms and its
single-agent GRPO control, 8 seeds)
and ``cross-family`` (councilzoo.repro.cross_family: Co-RL with SmolLM2 and Gemma-3-270M in one
cohort; it needs both real models).
Each module exposes ``run(out_dir, seeds, quick) -> dict``
(the result format of ``councilzoo.repro.report``; ``cross_family``'s also takes the ``sizes`` that
``--gpu`` and ``--model`` ask for); ``main`` imports it lazily, runs it into
``OUT/<module>/`` (``OUT/corl_dose/`` for ``corl-dose``) and writes ``report.md`` + ``report.json``
there. ``seeds=None`` lets each claim use its own default number of seeds; a number given must be
at least ``MIN_SEEDS``. ``all`` runs the claims in ``--jobs`` processes (default: one per CPU
core, at most one per claim; each on one torch thread; longest first). Every claim runs the tiny
LMs shipped with the package (``councilzoo.repro.tiny_lms``), so its numbers are the same on any
machine.
"""

from __future__ import annotations

import argparse
import importlib
import multiprocessing
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from councilzoo.config import check_output_dir
from councilzoo.repro.report import status_of, utc_now, write_report

__all__ = ["MIN_SEEDS", "claim_folder", "run_claim", "map_in_processes", "apply", "main"]

CLAIMS = ("corl", "comed", "tracer")
# ``all`` starts the claims longest first (measured CPU on 2 cores, 2026-12-06: tracer, corl,
# comed), so the shortest fills the cores last and no core idles at the end
LONGEST_FIRST = ("tracer", "corl", "comed")
# not in ``all``: each has its own time budget
OWN_COMMANDS = ("corl-dose", "corl-cotrain", "real", "tracer-label-free", "cross-family")
MIN_SEEDS = 2  # every claim's checks are intervals over seeds: one seed gives a zero-width interval


def claim_folder(claim: str) -> str:
    """The claim's module, which names its folder under ``--out`` (``corl-dose`` -> ``corl_dose``)."""
    return claim.replace("-", "_")


def check_seed_args(parser, args) -> None:
    """The seed flags of an experiment's own entry point (``--seeds``, ``--first-seed``), checked
    before any run: the checks are intervals over seeds, so one seed is refused."""
    if args.seeds is not None and args.seeds < MIN_SEEDS:
        parser.error(f"--seeds must be >= {MIN_SEEDS} (the checks are intervals over seeds), "
                     f"got {args.seeds}")
    if args.first_seed < 0:
        parser.error(f"--first-seed must be >= 0, got {args.first_seed}")


def run_claim(
    claim: str, out: str | Path, seeds: int | None = None, quick: bool = False, sizes: dict | None = None
) -> dict:
    """Run one claim into ``out/<its module>/``, write its report, and return its result dict.
    ``sizes``: the claim's own size preset, for a claim whose ``run`` takes one (``cross-family``:
    ``cross_family.preset``); None: its default sizes."""
    if claim not in CLAIMS + OWN_COMMANDS:
        raise ValueError(f"unknown claim {claim!r}; expected one of {list(CLAIMS + OWN_COMMANDS)} or 'all'")
    if seeds is not None and seeds < MIN_SEEDS:
        raise ValueError(f"seeds must be >= {MIN_SEEDS} (the checks are intervals over seeds) or None, "
                         f"got {seeds!r}")
    out_dir = Path(out) / claim_folder(claim)
    out_dir.mkdir(parents=True, exist_ok=True)
    started_at = utc_now()
    run = importlib.import_module(f"councilzoo.repro.{claim_folder(claim)}").run
    result = run(out_dir, seeds, quick) if sizes is None else run(out_dir, seeds, quick, sizes=sizes)
    write_report(out_dir, result, started_at=started_at)
    return result


def map_in_processes(fn: Callable, items: Sequence, workers: int) -> list:
    """``[fn(item) for item in items]``, in up to ``workers`` spawned processes when more than one
    (spawned, so no forked torch or matplotlib state); ``fn`` must be importable (a module-level
    function) and each item independent of the others, so the results do not depend on the order."""
    workers = min(workers, len(items))
    if workers <= 1:
        return [fn(item) for item in items]
    with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        return list(pool.map(fn, items))


def apply(call: tuple[Callable, object]):
    """``fn(item)`` for ``(fn, item)``: lets one ``map_in_processes`` pool run jobs of several kinds."""
    fn, item = call
    return fn(item)


def _run_claim_args(run: tuple) -> dict:
    return run_claim(*run)


def _sizes(args: argparse.Namespace) -> dict | None:
    """The sizes that ``--gpu`` and ``--model`` ask for (cross-family's alone), checked before any run."""
    gpu, models = getattr(args, "gpu", False), getattr(args, "model", None)
    if not (gpu or models):
        return None
    if args.claim != "cross-family":
        raise ValueError(f"--gpu and --model are for cross-family only, not {args.claim!r}")
    from councilzoo.repro.cross_family import preset

    return preset(quick=args.quick, gpu=gpu, models=dict(models or []))


def main(args: argparse.Namespace) -> int:
    """Entry point of ``councilzoo repro``; exit status 0 when every claim ran (whatever its verdict)."""
    if getattr(args, "jobs", None) is not None and args.claim != "all":
        raise ValueError(f"--jobs: only 'repro all' runs claims in parallel, not {args.claim!r}; drop --jobs")
    sizes = _sizes(args)
    check_output_dir(args.out)  # a file or a read-only place: one line now, not after the claim ran
    claims = CLAIMS if args.claim == "all" else (args.claim,)
    jobs = getattr(args, "jobs", None) or os.cpu_count() or 1
    if jobs < 1:
        raise ValueError(f"jobs must be a positive int, got {jobs!r}")
    order = sorted(claims, key=LONGEST_FIRST.index) if args.claim == "all" else claims
    runs = [(claim, args.out, args.seeds, args.quick, sizes) for claim in order]
    results = dict(zip(order, map_in_processes(_run_claim_args, runs, jobs), strict=True))
    for claim in claims:
        result, report = results[claim], Path(args.out) / claim_folder(claim) / "report.md"
        print(f"[{claim}] {status_of(result['verdict'])}: {result['verdict']['reason']}  -> {report}")
    return 0
