"""Co-RL's vision-language and code halves at toy scale: parts ``vlm`` and ``code`` of
``councilzoo repro corl`` (docs/reproductions.md, "Every half of Co-RL learns", plan 2026-12-04).

Each part is a cohort of three tiny random models of two families (``councilzoo.tiny_models``),
each on its own paraphrase view: ``vlm`` Qwen2.5-VL / Idefics3 / Qwen2.5-VL on ``synthetic:visual``
(the answer is only in the image), ``code`` Qwen3 / Llama / Qwen3 on ``synthetic:code`` (a
member's answer is the output signature of its program, so the votes are over what programs
output, never over their text).

A random tiny model solves none of these items, so each member is warmed up into the regime where
peer labels carry signal (``regime_targets``, SFT by ``tiny_members.teach_answer_format``): it
*knows* its own random share ``KNOWN`` of the items (SFT target the right answer 80% of the time,
else one fixed wrong answer) and is mostly wrong on the rest (right 30% of the time, else its
fixed wrong answer). Members draw their known items independently, so their errors are
complementary, as different models' are, and a member's sampled majority is right on about
``KNOWN`` of the items (measured before training: the precondition check). The warm-up shows
every view's wording of an item with the same targets, so a member's answers do not depend on
the wording: it trains on its own view and is evaluated in the original one.

Three arms at equal steps, each training the same three members on the same items: ``grpo``
(gold labels, the ceiling reference), ``ttrl`` (each member's own majority) and ``corl``
(``peer_majority``: the plurality of the other two members' majorities). Like TTRL's own
protocol the runs are test-time: each cohort trains without labels on the items and its greedy
accuracy is measured on those same items (gold read only to report), because a 0.25M-parameter
model that memorised answers has no skill that carries to unseen images or programs.

Checks per part (``councilzoo.repro.verdicts``): the precondition, every member's majority-of-G
accuracy in ``cohort_runs.MAJORITY_BAND`` (failed: the part is INCONCLUSIVE); the paper's checks,
Co-RL ends above its start (95% bootstrap CI of the gain above 0) and above TTRL (CI of the
seed-paired difference above 0); an interval that spans 0 is INCONCLUSIVE.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from councilzoo.agents.prompts import member_prompt
from councilzoo.config import cache_home
from councilzoo.learners.corl.config import EvalConfig
from councilzoo.learners.data import DataConfig
from councilzoo.repro import cohort_runs
from councilzoo.repro.tiny_lms import checked, deterministic, digest, torch_threads
from councilzoo.repro.verdicts import THRESHOLDS, check, describe, flag_status, interval_status
from councilzoo.tasks import Problem, format_answer, synthetic_problems

__all__ = [
    "Cohort", "COHORTS", "ARMS", "KNOWN_V2", "VIEWS", "FULL", "QUICK", "SHIPPED_DIR", "SHA256",
    "answer_forms", "regime_targets", "known_items", "member_name", "build_member", "measure", "run_job",
    "summarise", "tagged", "part_items", "plan_part", "finish_part", "main",
]


@dataclass(frozen=True)
class Cohort:
    """One part: its task, the members' tiny families (member i reads view i), warm-up SFT steps,
    the completion length its answers need and its plan's version: 1 (plan 2026-12-04) or 2 (plan
    2026-12-05: items tagged so their prompts differ, an exact known share, members built
    deterministically and shipped in ``SHIPPED_DIR``)."""

    task: str
    families: tuple[str, ...]
    warmup_steps: int
    max_completion_length: int
    version: int = 1


COHORTS = {
    "vlm": Cohort("visual", ("qwen2_5_vl", "idefics3", "qwen2_5_vl"), 300, 16),
    "code": Cohort("code", ("qwen3", "llama", "qwen3"), 400, 96),
    "vlm_v2": Cohort("visual", ("qwen2_5_vl", "idefics3", "qwen2_5_vl"), 300, 16, version=2),
    "code_v2": Cohort("code", ("qwen3", "llama", "qwen3"), 400, 96, version=2),
}
ARMS = {"grpo": ("grpo", "ground_truth"), "ttrl": ("ttrl", "self_majority"),
        "corl": ("corl", "peer_majority")}
BASE_GAIN = THRESHOLDS["corl_over_base"].value  # the paper's smallest average gain over the base
TTRL_EDGE = THRESHOLDS["corl_over_ttrl"].value  # the paper's edge over TTRL
KNOWN = 0.6  # share of the items a member knows (its own random draw; v1: each item independently)
KNOWN_V2 = 0.625  # v2: exactly this share of the items (15 of 24), a random subset per member
KNOWN_RIGHT, UNKNOWN_RIGHT = 0.8, 0.3  # how often its SFT target is the right answer there
ITEMS_SEED, DIFFICULTY = 2026, 0.2
VIEWS = (0, 1, 2)  # the wordings a member is warmed up on (it trains on view = its index)
LEARNING_RATE, TEMPERATURE = 1e-3, 1.0  # the tiny random members' CPU configs' (configs/corl_*_cpu.yaml)
TRAINER = {"learning_rate": LEARNING_RATE, "temperature": TEMPERATURE}
FULL = {"items": 24, "steps": 8, "prompts": 6, "generations": 8, "eval_every": 4, "warmup": None}
QUICK = {"items": 6, "steps": 2, "prompts": 2, "generations": 4, "eval_every": 2, "warmup": 20}
SHIPPED_DIR = Path(__file__).resolve().parent.parent / "data" / "corl_cohorts"  # every full-size member
# sha256 (``tiny_lms.digest``) of each shipped member, as ``build_member`` built it: v2's
# deterministically, v1's as a full run first built them on the reference machine (v1 builds are not
# deterministic across machines, so shipping them gives every machine the same v1 numbers, and spares
# a fresh clone's full run their 300- and 400-step warm-ups)
SHA256: dict[str, str] = {
    "vlm-m0-qwen2_5_vl-63570964fbd4": "ea1c6b7527575bdf4ecf6854f636c3306b87b5a9af5959d124cbda96d6e63779",
    "vlm-m1-idefics3-0374b82e7397": "44f9e393066264cb8c7ac1eec3f012e77d55e2eaa2af2114b87dc0db76b73420",
    "vlm-m2-qwen2_5_vl-69b58b010510": "ed1a0b8d75511c61f345b389b421a04be937b6f3184b91810d5b0217f89ca551",
    "code-m0-qwen3-a40c856de095": "c788dd9213d45a179ab2b492b08646215c2e1e03f0ac142350958b0ea0bfe54a",
    "code-m1-llama-f2a9a9c20849": "fba1ffa86a1d3ffe02beac92ffe56be57ad40ab6cf34f06244bbf7b3ceb02dad",
    "code-m2-qwen3-3564d8076cfe": "fbbae74943419eccf1988c5f88c3a0180f54a02d5344aba80ad1620ef71c6a02",
    "vlm_v2-m0-qwen2_5_vl-55e550380827": "d41c7d1d6e23e4fa94ba0e6a4c5739d67380ede45dfecb81a8ce302e48ab55f2",
    "vlm_v2-m1-idefics3-ac41ac372a9f": "e31e313b54dd78ade4cfcaac07ff63296ee003871997d0f06d0ab864b649a965",
    "vlm_v2-m2-qwen2_5_vl-e8e78aa4ae81": "38d3087f80d062265fbbd26bd680d816ec1e8cb768f1fb28baab4685f87b0e53",
    "code_v2-m0-qwen3-44a1b3d876c1": "22fc338458b9550f073bb4de3ce52d069ab4cc65339c796a4ee78de8466385ea",
    "code_v2-m1-llama-1883fa3661f7": "eeb900e933e193be17bba5d93de1dd79709ace20b2f402e614baf8b29887aa04",
    "code_v2-m2-qwen3-afb1dc943c60": "0afc5b779c8fd2a0a1d9550e92d38aa87ab828982b8f7e9ecdcf42213a8306e4",
}


def answer_forms(problem: Problem) -> tuple[str, list[str]]:
    """The right answer and the item's wrong ones, each written as a member states it: a fenced
    program for code (the solution, the distractor programs), else ``The answer is \\boxed{X}.``."""
    if problem.kind == "code":
        programs = [problem.metadata["solution"], *problem.metadata["distractors"]]
        forms = [format_answer(p, "code") for p in programs]
    else:
        values = [problem.answer, *problem.metadata["distractors"]]
        forms = [f"The answer is {format_answer(str(v), problem.kind)}." for v in values]
    return forms[0], forms[1:]


def regime_targets(problem: Problem, known: bool, wrong: int) -> list[str]:
    """The SFT targets of one item, drawn uniformly by ``teach_answer_format``: the right answer in
    ``KNOWN_RIGHT`` (known) or ``UNKNOWN_RIGHT`` (not known) of them, else the member's fixed wrong
    answer ``wrong`` (an index into the item's wrong answers)."""
    right, wrongs = answer_forms(problem)
    share = KNOWN_RIGHT if known else UNKNOWN_RIGHT
    n_right = int(round(10 * share))
    return [right] * n_right + [wrongs[wrong % len(wrongs)]] * (10 - n_right)


def known_items(version: int, seed: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Which of ``n`` items a member knows and the index of its fixed wrong answer on each: v1 knows
    each item with probability ``KNOWN``; v2 knows exactly ``round(KNOWN_V2 * n)`` items, a random
    subset, so every member's majority lands near that share instead of a binomial spread."""
    rng = np.random.default_rng([seed, ITEMS_SEED])
    if version == 1:
        known = rng.random(n) < KNOWN
    else:
        known = np.zeros(n, dtype=bool)
        known[rng.permutation(n)[:round(KNOWN_V2 * n)]] = True
    return known, rng.integers(0, 3, size=n)


def member_name(part: str, index: int, problems: list[Problem], warmup_steps: int) -> tuple[str, dict]:
    """A member's folder name (part, index, family and the digest of its build spec) and the spec."""
    cohort = COHORTS[part]
    family, seed = cohort.families[index], index + 1
    spec = {"part": part, "family": family, "seed": seed, "views": VIEWS, "steps": warmup_steps,
            "known": [KNOWN, KNOWN_RIGHT, UNKNOWN_RIGHT], "items": [p.id for p in problems]}
    if cohort.version > 1:  # the v1 spec stays as it was, so are v1's cached folders' names
        spec.update(version=cohort.version, known=[KNOWN_V2, KNOWN_RIGHT, UNKNOWN_RIGHT],
                    questions=[p.question for p in problems])
    key = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:12]
    return f"{part}-m{index}-{family}-{key}", spec


def build_member(part: str, index: int, problems: list[Problem], warmup_steps: int,
                 root: Path | None = None) -> Path:
    """Member ``index`` of ``part``: a tiny random model of its family warmed up into the regime on
    ``problems`` (every view's prompts). A shipped member of this spec (``SHIPPED_DIR``, checked
    against ``SHA256``) is used as is; else it is built into ``root`` (default
    ``$COUNCILZOO_CACHE/corl_cohorts``), where a finished build is reused. v2 builds run
    deterministically (``tiny_lms.deterministic``): on one machine they reproduce their bytes."""
    from transformers import AutoModelForCausalLM, AutoModelForImageTextToText, AutoProcessor, AutoTokenizer

    from councilzoo.tiny_members import teach_answer_format
    from councilzoo.tiny_models import VLM_FAMILIES, tiny_builder

    cohort = COHORTS[part]
    family, seed = cohort.families[index], index + 1
    name, spec = member_name(part, index, problems, warmup_steps)
    if (SHIPPED_DIR / name).is_dir() and root is None:
        return checked(SHIPPED_DIR / name, SHA256.get(name), "corl_vlm_code.SHA256")
    root = root or cache_home() / "corl_cohorts"
    folder = root / name
    marker = folder / "regime.json"
    if marker.is_file():
        return folder
    root.mkdir(parents=True, exist_ok=True)
    vlm = family in VLM_FAMILIES
    known, wrong = known_items(cohort.version, seed, len(problems))
    # every view's wording, as the tiny LMs are taught: a member trains on its own view, and its
    # accuracy is read in the original wording (EvalConfig), so what it knows must not hang on the words
    targets = [regime_targets(p, bool(k), int(w)) for p, k, w in zip(problems, known, wrong, strict=True)]
    prompts = [member_prompt(p, view, with_images=vlm) for view in VIEWS for p in problems]
    targets = targets * len(VIEWS)
    staging = Path(tempfile.mkdtemp(dir=root, prefix=f".{folder.name}-"))  # renamed into place when whole
    with deterministic(seed) if cohort.version > 1 else torch_threads():
        base = tiny_builder(family)(staging / "base", family=family, seed=seed)
        model = (AutoModelForImageTextToText if vlm else AutoModelForCausalLM).from_pretrained(base)
        processing = (AutoProcessor if vlm else AutoTokenizer).from_pretrained(base)
        teach_answer_format(model, processing, prompts, targets, warmup_steps, seed)
    shutil.rmtree(staging / "base")
    model.save_pretrained(staging)
    processing.save_pretrained(staging)
    (staging / marker.name).write_text(json.dumps({**spec, "known_items": int(known.sum())}, sort_keys=True))
    try:
        staging.rename(folder)
    except OSError:  # a concurrent build of the same spec got there first: keep its folder
        shutil.rmtree(staging)
    return folder


def measure(part: str, paths: list[Path], problems: list[Problem], settings: dict) -> dict[str, Any]:
    """Before training: each member's majority-of-G accuracy at the training temperature and the
    labels ``peer_majority`` would give from those samples."""
    cohort = COHORTS[part]
    golds, kinds = [p.answer for p in problems], [p.kind for p in problems]
    answers, rows = [], []
    for index, path in enumerate(paths):
        group = cohort_runs.sample_answers(path, problems, index, settings["generations"], TEMPERATURE,
                                           seed=0, max_new_tokens=cohort.max_completion_length)
        answers.append(group)
        rows.append({"part": part, "member": f"m{index}-{cohort.families[index]}", "view": index,
                     "majority_accuracy": cohort_runs.majority_accuracy(group, golds, kinds)})
    labels = cohort_runs.peer_label_stats(answers, golds, "peer_majority", kinds)
    lo, hi = cohort_runs.MAJORITY_BAND
    return {"members": rows, "label_precision": labels["precision"], "label_coverage": labels["coverage"],
            "in_band": all(lo <= r["majority_accuracy"] <= hi for r in rows)}


def run_job(job: tuple) -> dict[str, list[float]]:
    """One arm and seed of a part (a process-pool task), one thread per member world."""
    part, arm, seed, paths, settings, items, out = job
    os.environ["OMP_NUM_THREADS"] = "1"
    kind, rule = ARMS[arm]
    cohort = COHORTS[part]
    members = [(f"{family}", str(path), index) for index, (family, path) in enumerate(
        zip(cohort.families, paths, strict=True))]
    data = DataConfig(dataset="jsonl", path=str(items))
    same_items = EvalConfig(dataset="jsonl", path=str(items), eval_steps=settings["eval_every"])
    return cohort_runs.train_cohort(kind, rule, members, seed, settings, data, same_items,
                        out / f"{part}-{arm}-seed{seed}", TRAINER,
                        max_completion_length=cohort.max_completion_length)


def summarise(part: str, runs: dict[str, list[dict]], measured: dict) -> tuple[list[dict], dict[str, dict]]:
    """Per-arm rows (start, final, gain with 95% CIs, peer-label precision) and the part's checks."""
    rows, final, gain = [], {}, {}
    for arm, seeds in runs.items():
        start = np.array([s["accuracy"][0] for s in seeds])
        final[arm] = np.array([s["accuracy"][-1] for s in seeds])
        gain[arm] = final[arm] - start
        g, f = cohort_runs.seed_ci(gain[arm]), cohort_runs.seed_ci(final[arm])
        rows.append({"part": part, "arm": arm, "start_accuracy": float(start.mean()), "final_accuracy": f[0],
                     "final_accuracy_ci": (f[1], f[2]), "gain": g[0], "gain_ci": (g[1], g[2]),
                     "label_precision": float(np.nanmean([np.nanmean(s["label_precision"]) for s in seeds]))})
    accs = [m["majority_accuracy"] for m in measured["members"]]
    trained = "corl" in runs  # a full run trains no arm once the precondition failed (plan_part)
    corl_gain = cohort_runs.seed_ci(gain["corl"]) if trained else [None, None, None]
    vs_ttrl = (cohort_runs.seed_ci(final["corl"] - final["ttrl"])  # paired by seed
               if trained else [None, None, None])
    low, high = cohort_runs.MAJORITY_BAND
    band = f"every member's majority-of-G accuracy in [{low:.2f}, {high:.2f}]"
    not_run = "" if trained else " (not run: the precondition failed)"
    checks = {
        "members_majority_in_band": check("precondition", flag_status(measured["in_band"]),
                                          f"{band} (mean, [min, max])",
                                          [float(np.mean(accs)), min(accs), max(accs)]),
        "corl_beats_start": check("paper", interval_status(corl_gain[1], corl_gain[2], refute=BASE_GAIN),
                                  "95% t CI over seeds of Co-RL's (final - start) accuracy above 0 (NOT HELD "
                                  f"below the paper's +{BASE_GAIN:.2f})" + not_run, corl_gain),
        "corl_beats_ttrl": check("paper", interval_status(vs_ttrl[1], vs_ttrl[2], refute=TTRL_EDGE),
                                 "95% t CI over seeds of (Co-RL - TTRL) final accuracy above 0, seed-paired "
                                 f"(NOT HELD below the paper's +{TTRL_EDGE:.2f})" + not_run, vs_ttrl),
    }
    return rows, checks


def tagged(problem: Problem, k: int) -> Problem:
    """``problem`` with "Item k." before its question in every view: v2's items, whose prompts
    differ (of v1's 24 items only 8 question texts were distinct, so a member could not tell most
    items apart and could not know one without the other)."""
    views = (problem.question, *problem.metadata["paraphrases"])
    question, *paraphrases = (f"Item {k}. {q}" for q in views)
    return dataclasses.replace(problem, question=question,
                               metadata={**problem.metadata, "paraphrases": tuple(paraphrases)})


def part_items(part: str, n: int) -> list[Problem]:
    """The part's ``n`` unlabeled items (fixed seed; tagged for v2)."""
    problems = synthetic_problems(COHORTS[part].task, n, seed=ITEMS_SEED, difficulty=DIFFICULTY)
    return [tagged(p, k + 1) for k, p in enumerate(problems)] if COHORTS[part].version > 1 else problems


def write_items(part: str, out: Path, n: int) -> tuple[list[Problem], Path]:
    """The part's unlabeled items (``part_items``), as a JSONL file the learners read (images as PNGs,
    their paths relative to the file's folder, against which the loader resolves them)."""
    problems = part_items(part, n)
    path = out / f"{part}_items.jsonl"
    rows = [p.to_dict(out / f"{part}_images") for p in problems]
    for row in rows:
        row["images"] = [os.path.relpath(image, out) for image in row["images"]]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return problems, path


@dataclass(frozen=True)
class PartPlan:
    """A part's members measured and its training jobs listed (``plan_part``), to run in the
    claim's one process pool with the text part's jobs, then ``finish_part``."""

    part: str
    out: Path
    n_seeds: int
    settings: dict
    warmup_steps: int
    measured: dict
    jobs: list[tuple]
    setup_seconds: float  # building and measuring the members


def plan_part(part: str, out: Path, n_seeds: int, quick: bool) -> PartPlan:
    """Build and measure the part's members and list its arms x seeds as ``run_job`` jobs."""
    started = time.perf_counter()
    settings = QUICK if quick else FULL
    cohort = COHORTS[part]
    problems, items = write_items(part, out, settings["items"])
    steps = settings["warmup"] or cohort.warmup_steps
    # v2's members are shipped at full size, so --quick uses them (on its first items) and builds none
    built_on, steps = ((part_items(part, FULL["items"]), cohort.warmup_steps) if cohort.version > 1
                       else (problems, steps))
    paths = [build_member(part, i, built_on, steps) for i in range(len(cohort.families))]
    measured = measure(part, paths, problems, settings)
    # a part whose precondition failed is INCONCLUSIVE whatever training shows, so it trains no arm;
    # --quick trains the current plan's (v2) arms regardless, to check the pipeline once per modality
    # (its members answer almost nothing; v1's parts run the same code)
    trained = measured["in_band"] or (quick and cohort.version > 1)
    jobs = [(part, arm, seed, paths, settings, items, out / "runs")
            for seed in range(n_seeds) for arm in ARMS if trained]
    setup_seconds = round(time.perf_counter() - started, 1)
    return PartPlan(part, out, n_seeds, settings, steps, measured, jobs, setup_seconds)


def finish_part(plan: PartPlan, curves: list[dict]) -> dict[str, Any]:
    """``report.combine_parts``' part dict from the plan and its jobs' curves (in job order)."""
    part, settings, n_seeds, steps, measured = (plan.part, plan.settings, plan.n_seeds, plan.warmup_steps,
                                                plan.measured)
    cohort = COHORTS[part]
    runs: dict[str, list[dict]] = {arm: [] for arm in ARMS} if plan.jobs else {}
    for (_, arm, *_), curve in zip(plan.jobs, curves, strict=True):
        runs[arm].append(curve)  # seeds in order: jobs are listed seed-major
    rows, checks = summarise(part, runs, measured)
    reason = describe(checks)
    (plan.out / f"{part}_curves.json").write_text(json.dumps(runs))
    return {
        "setup": {
            f"{part}_cohort": f"{cohort.task}: " + ", ".join(
                f"{family} view {i}" for i, family in enumerate(cohort.families)),
            f"{part}_regime": f"each member knows {KNOWN:.0%} of the items (SFT right {KNOWN_RIGHT:.0%} "
                              f"there, {UNKNOWN_RIGHT:.0%} elsewhere), {steps} warm-up steps",
            f"{part}_training": f"{settings['items']} items, {settings['steps']} steps x "
                                f"{settings['prompts']} prompts x {settings['generations']} completions, "
                                f"lr {LEARNING_RATE:g}, T {TEMPERATURE:g}, {n_seeds} seeds; accuracy greedy "
                                "on the training items (test-time, as TTRL)",
        },
        "results": {
            f"{part}_before_training": measured["members"],
            f"{part}_pre_label_precision": measured["label_precision"],
            f"{part}_arms": rows,
            f"{part}_setup_seconds": plan.setup_seconds,
        },
        "checks": checks,
        "reason": reason,
        "figures": [],
    }


def main(argv: list[str] | None = None) -> int:
    """``python -m councilzoo.repro.corl_vlm_code --out DIR``: build the v2 parts' full-size members
    into ``DIR`` (``SHIPPED_DIR``: the shipped set) and say, per member, whether its bytes equal
    the shipped ones."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m councilzoo.repro.corl_vlm_code", description=main.__doc__
    )
    parser.add_argument("--out", required=True, help=f"folder to build into ({SHIPPED_DIR}: the shipped set)")
    parser.add_argument("parts", nargs="*", help="v2 parts to build (default: all)")
    args = parser.parse_args(argv)
    v2 = [name for name, cohort in COHORTS.items() if cohort.version > 1]
    unknown = [p for p in args.parts if p not in v2]
    if unknown:
        raise SystemExit(f"unknown part(s) {unknown}; expected names from {v2}")
    for part in args.parts or v2:
        cohort = COHORTS[part]
        problems = part_items(part, FULL["items"])
        for index in range(len(cohort.families)):
            folder = build_member(part, index, problems, cohort.warmup_steps, root=Path(args.out))
            got = digest(folder)
            same = "equals" if got == SHA256.get(folder.name) else "differs from"
            print(f"{folder.name}: sha256 {got} ({same} the shipped one)", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
