"""One Co-RL learner update vs a plain TRL ``GRPOTrainer`` update: time, peak memory, bf16.

Subject: a cohort member's trainer exactly as ``councilzoo train grpo`` builds it
(``corl.run_member``: ``CoRLConfig.member_args`` -> ``GRPOConfig``, ``problem_rows``, ``build_trainer`` with
the baseline's ``CohortReward`` playing cohort-v0 against the gold answer, our metric and progress
callbacks), one member, in-process (no cohort link). Baseline: ``GRPOTrainer`` with the identical
``GRPOConfig``, the same prompts and a trivial reward function. Both train the same ~32k-vocabulary
tiny random model (``build_tiny_model(vocab_size=32000)``, taught to state a letter as
``\\boxed{X}`` so rewards, hence advantages, are not all zero).

Default shape (a Co-RL round scaled to CPU): 8 prompts x 8 completions x 64 completion tokens,
fp32, one optimizer step per round, about 12 minutes on 2 busy cores; ``--tokens 512`` is the
recipe's length (about 150 s per step here, too long for a default). Completions are forced to
exactly ``max_completion_length`` tokens (``generation_kwargs={"min_new_tokens": T}``), so every
update does the same work; the
step time is the wall clock between successive optimizer steps (generation, reward, loss,
backward, optimizer, logging), the first step excluded as warm-up. Every configuration runs in
its own subprocess; its peak host RSS (resident memory of the process, not GPU memory) comes
from ``os.wait4``, and on a GPU its peak GPU memory from ``torch.cuda.max_memory_allocated``
(``gpu_peak_memory_ratio``). Also measured: our learner's peak host RSS at 1x, 2x and 4x the
global batch with a fixed micro-batch (accumulation scaled, one optimizer step per round; target:
flat), and the fraction of non-embedding weights a few bf16 steps at lr 1e-6 change (on CPU bf16
is autocast over fp32 master weights, so it should be ~1).

``--model-size 0.5b`` trains a ~0.48B-parameter random Qwen3 (hidden 1280, 24 layers, 32k
vocabulary) instead of the toy, so the ratio is measured at a real step size (a GPU's job).
``--model-size smollm2`` trains the real SmolLM2-135M-Instruct (``smollm2-135m-instruct``,
``councilzoo.real_models``; no warm-up: it states numbers already) on ``synthetic:word_problems``
and writes ``benchmarks/results/learner_step_smollm2.json``.
``--profile DIR`` records one timed step of each trainer with ``torch.profiler`` (a Chrome trace
per trainer in DIR) and lists the operators whose self time differs most between the two
(CUDA self time on a GPU, CPU self time otherwise): where an extra cost comes from.
``--host-profile`` instead runs each trainer once under ``cProfile`` for one whole optimizer step
(step 2: generation, reward, loss, backward, optimizer, callbacks, logging) and attributes the
host time to councilzoo: the inclusive time of every call from TRL, transformers or torch into a
councilzoo function (our reward, callbacks, progress line, metrics file), by entry point, against
the step's total; written to ``benchmarks/results/learner_step_host.json``.

    python benchmarks/learner_step.py [--quick] [--model-size toy|0.5b] [--profile DIR] [--ratio-only]
    python benchmarks/learner_step.py --host-profile [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from itertools import pairwise
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULT = ROOT / "benchmarks" / "results" / "learner_step.json"
HOST_RESULT = ROOT / "benchmarks" / "results" / "learner_step_host.json"
PACKAGE = str(ROOT / "councilzoo")
VOCAB, TARGET = 32000, 1.1
SHAPES = {  # prompts, completions per prompt, completion tokens, micro-batch of the memory sweep
    "default": (8, 8, 64, 16),
    "quick": (2, 4, 32, 4),
}
BF16_SHAPE, BF16_STEPS = (2, 4, 32), 3
MODEL_SIZES = {  # build_tiny_model arguments
    "toy": dict(vocab_size=VOCAB),
    "0.5b": dict(hidden_size=1280, num_layers=24, num_heads=20, head_dim=64, vocab_size=VOCAB),
    "smollm2": {},  # the real model by name
}
REAL_MODEL = "smollm2-135m-instruct"
DEFAULT_DATA = "synthetic:multiple_choice"
TOP_OPS = 12
HOST_FUNCTIONS = 300  # functions kept per host profile, by self time


# --- one measured configuration (the child process) --------------------------------------------


def _cohort_config(spec: dict):
    from councilzoo.learners.baselines import BaselineConfig
    from councilzoo.learners.corl.config import MemberConfig
    from councilzoo.learners.data import DataConfig

    trainer = {
        "generation_kwargs": {"min_new_tokens": spec["tokens"]},
        "learning_rate": spec["lr"],
        "bf16": spec["bf16"],
        "temperature": 1.0,
    }
    if spec.get("micro_batch"):
        trainer["per_device_train_batch_size"] = spec["micro_batch"]
        trainer["gradient_accumulation_steps"] = spec["prompts"] * spec["generations"] // spec["micro_batch"]
    return BaselineConfig(
        members=[MemberConfig(name="m", model=spec["model"])],
        reward_rule="ground_truth",
        num_generations=spec["generations"],
        prompts_per_step=spec["prompts"],
        max_steps=spec["steps"],
        max_completion_length=spec["tokens"],
        output_dir=spec["out"],
        data=DataConfig(dataset=spec.get("dataset", DEFAULT_DATA), num_problems=64, difficulty=0.2),
        trainer=trainer,
    )


def _step_clock(profile_to: str | None, host_profile: bool = False):
    """Wall clock and CPU time at the end of every optimizer step; with ``profile_to``, a
    ``torch.profiler`` record of step 2 (the first timed one) written there as a Chrome trace; with
    ``host_profile``, a ``cProfile`` record of step 2, from its start to step 3's start (or the end
    of training), so that the step's callbacks and logging are in it (``host_times``)."""
    import cProfile

    import torch
    from transformers import TrainerCallback

    class StepClock(TrainerCallback):
        def __init__(self) -> None:
            self.ends: list[tuple[float, float]] = []
            self.profiler = None
            self.self_times: dict[str, float] = {}
            self.host: cProfile.Profile | None = None
            self.host_times: dict = {}

        def _stop_host(self) -> None:
            if self.host is not None:
                self.host.disable()
                wall, cpu = time.perf_counter() - self.host_start, time.process_time() - self.host_cpu
                self.host_times = {**host_attribution(self.host, wall), "step_cpu_s": cpu}
                self.host = None

        def on_train_end(self, args, state, control, **kwargs):
            self._stop_host()

        def on_step_begin(self, args, state, control, **kwargs):
            if host_profile and state.global_step == 2:
                self._stop_host()
            if host_profile and state.global_step == 1:
                self.host_start, self.host_cpu = time.perf_counter(), time.process_time()
                self.host = cProfile.Profile()
                self.host.enable()
            if profile_to and state.global_step == 1:
                activities = [torch.profiler.ProfilerActivity.CPU]
                if torch.cuda.is_available():
                    activities.append(torch.profiler.ProfilerActivity.CUDA)
                self.profiler = torch.profiler.profile(activities=activities)
                self.profiler.__enter__()

        def on_step_end(self, args, state, control, **kwargs):
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            self.ends.append((time.perf_counter(), time.process_time()))
            if self.profiler is not None:
                self.profiler.__exit__(None, None, None)
                self.profiler.export_chrome_trace(profile_to)
                # microseconds of self time per operator (torch >= 2.4 names GPU time "device" time)
                field = "self_device_time_total" if torch.cuda.is_available() else "self_cpu_time_total"
                events = self.profiler.key_averages()
                self.self_times = {e.key: float(getattr(e, field)) for e in events}
                self.profiler = None

    return StepClock()


def host_attribution(profile, wall_s: float) -> dict:
    """Host seconds of one profiled step: its wall clock, and the inclusive time of every call from
    outside councilzoo into a councilzoo function (one entry per such function, largest first)."""
    import pstats

    stats = pstats.Stats(profile).stats
    entries: dict[str, float] = {}
    for (file, line, name), (_, _, _, _, callers) in stats.items():
        if not file.startswith(PACKAGE):
            continue
        for caller, (_, _, _, cumulative) in callers.items():
            if not caller[0].startswith(PACKAGE):
                key = f"{Path(file).relative_to(ROOT)}:{line} {name}"
                entries[key] = entries.get(key, 0.0) + cumulative
    own = {f"{Path(file).name}:{line} {name}": row[2] for (file, line, name), row in stats.items()}
    return {
        "step_wall_s": wall_s,
        "councilzoo_s": sum(entries.values()),
        "councilzoo_entries_s": dict(sorted(entries.items(), key=lambda kv: -kv[1])[:TOP_OPS]),
        "self_s_by_function": dict(sorted(own.items(), key=lambda kv: -kv[1])[:HOST_FUNCTIONS]),
    }


def _plain_trl(cfg, clock) -> list[dict]:
    """The baseline: TRL's trainer on the same GRPOConfig and prompts, a trivial reward."""
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import GRPOTrainer

    from councilzoo.agents.prompts import member_prompt
    from councilzoo.learners import engine
    from councilzoo.learners.corl.rounds import problem_rows
    from councilzoo.learners.data import load_items

    args = cfg.member_args(0)
    problems = load_items(cfg.data, cfg.seed)
    rows = problem_rows(
        problems, cfg.seed, engine.rounds_needed(args), cfg.prompts_per_step, lambda p: member_prompt(p, 0)
    )
    model = cfg.members[0].model
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=lambda completions, **_: [float(len(str(c)) % 2) for c in completions],
        args=args,
        train_dataset=Dataset.from_list([{"prompt": r["prompt"]} for r in rows]),
        processing_class=AutoTokenizer.from_pretrained(model),
        callbacks=[clock],
    )
    trainer.train()
    return [r for r in trainer.state.log_history if "step_time" in r]


def _changed_fraction(before: Path, after: Path) -> dict:
    """Fraction of non-embedding weight elements that differ between two safetensors files."""
    from safetensors.torch import load_file

    a, b = load_file(before), load_file(after)
    changed = total = 0
    for name, tensor in a.items():
        if "embed_tokens" in name:
            continue
        changed += int((tensor != b[name].to(tensor.dtype)).sum())
        total += tensor.numel()
    return {"changed_fraction": changed / total, "dtype_after": str(next(iter(b.values())).dtype)}


def child(spec: dict) -> dict:
    """Train one configuration; per-step wall times, TRL's logged rows, optionally weight change."""
    import torch

    from councilzoo.learners.baselines import GRPO
    from councilzoo.learners.corl.member import run_member
    from councilzoo.learners.logging import read_metrics

    cfg = _cohort_config(spec)
    clock = _step_clock(spec.get("profile_to"), spec.get("host_profile", False))
    start = time.perf_counter()
    if spec["kind"] == "ours":
        run_member(cfg, 0, GRPO.reward_functions, callbacks=[clock])
        logged = [r for r in read_metrics(cfg.member_dir(0) / "metrics.jsonl") if "step_time" in r]
    else:
        logged = _plain_trl(cfg, clock)
    out = {"seconds_total": time.perf_counter() - start, "step_ends": clock.ends, "logged": logged,
           "profile_self_us": clock.self_times, "host_times": clock.host_times}
    if torch.cuda.is_available():
        out["gpu_peak_mib"] = torch.cuda.max_memory_allocated() / 2**20
    if spec.get("weights_changed"):
        final = cfg.member_dir(0) / "final" / "model.safetensors"
        out.update(_changed_fraction(Path(spec["model"]) / "model.safetensors", final))
    return out


# --- the parent: model, subprocesses, table ------------------------------------------------------


def build_model(folder: Path, size: str) -> Path:
    """The ~32k-vocabulary random model of ``size``, taught the answer format (as cohort tiny
    members are; on the GPU when there is one); for "smollm2" the converted real model."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from councilzoo.tasks import synthetic_problems
    from councilzoo.testing import build_tiny_model
    from councilzoo.tiny_members import warm_up

    if size == "smollm2":
        from councilzoo.agents.generators import resolve_model_path

        return Path(resolve_model_path(REAL_MODEL))
    base = build_tiny_model(folder / "base", **MODEL_SIZES[size])
    model, tokenizer = AutoModelForCausalLM.from_pretrained(base), AutoTokenizer.from_pretrained(base)
    if torch.cuda.is_available():
        model.cuda()
    warm_up(model, tokenizer, synthetic_problems("multiple_choice", 64, 0, 0.2), steps=40, seed=0)
    model.cpu().save_pretrained(folder / "warm")
    tokenizer.save_pretrained(folder / "warm")
    return folder / "warm"


def run_child(spec: dict, log: Path, threads: int) -> dict:
    """``spec`` in a fresh interpreter; its result plus its peak RSS (MiB) from ``wait4``."""
    result = log.with_suffix(".json")
    script = str(Path(__file__).resolve())
    cmd = [sys.executable, script, "--child", json.dumps(spec), "--result", str(result)]
    with log.open("w") as fh:
        proc = subprocess.Popen(
            cmd,
            stdout=fh,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
            env=dict(os.environ, OMP_NUM_THREADS=str(threads)),
        )
        _, status, usage = os.wait4(proc.pid, 0)
    if status != 0:
        tail = "\n".join(log.read_text().splitlines()[-25:])
        raise RuntimeError(f"{spec['name']} failed (wait status {status}):\n{tail}")
    return {**json.loads(result.read_text()), "peak_rss_mib": usage.ru_maxrss / 1024}


def summarise(name: str, spec: dict, runs: list[dict]) -> dict:
    """One table row from every run of a configuration (each run's first step is warm-up)."""
    steps, cpu, step_time, rates = [], [], [], []
    for res in runs:
        logged = res["logged"]
        for ((w0, c0), (w1, c1)), (a, b) in zip(pairwise(res["step_ends"]), pairwise(logged), strict=True):
            steps.append(w1 - w0)
            cpu.append(c1 - c0)
            step_time.append(b["step_time"])
            rates.append((b["num_tokens"] - a["num_tokens"]) / (w1 - w0))
    res = runs[-1]
    row = {
        "run": name,
        "shape": f"{spec['prompts']}x{spec['generations']}x{spec['tokens']}",
        "micro_batch_x_accum": "round x 1" if not spec.get("micro_batch") else
        f"{spec['micro_batch']} x {spec['prompts'] * spec['generations'] // spec['micro_batch']}",
        "bf16": spec["bf16"],
        "runs": len(runs),
        "timed_steps": len(steps),
        "s_per_step": statistics.median(steps) if steps else None,
        "cpu_s_per_step": statistics.median(cpu) if cpu else None,
        "trl_step_time_s": statistics.median(step_time) if step_time else None,
        "tokens_per_s": statistics.median(rates) if rates else None,
        "completion_length": [res["logged"][-1].get(f"completions/{k}_length") for k in ("min", "max")],
        "peak_rss_mib": round(max(r["peak_rss_mib"] for r in runs), 1),
        "gpu_peak_mib": round(max(r["gpu_peak_mib"] for r in runs), 1) if "gpu_peak_mib" in res else None,
    }
    if "changed_fraction" in res:
        row["changed_fraction"] = res["changed_fraction"]
        row["dtype_after"] = res["dtype_after"]
    return row


def _fmt(value, spec: str) -> str:
    return format(value, spec) if value is not None else "-".rjust(int(spec.split(".")[0]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a much smaller shape (a smoke run)")
    parser.add_argument("--steps", type=int, default=2, help="optimizer steps per timed run (first: warm-up)")
    parser.add_argument(
        "--repeats", type=int, default=2, help="timed runs of each trainer, in ABBA order (default 2)"
    )
    parser.add_argument("--tokens", type=int, default=None, help="completion tokens (default: the shape's)")
    parser.add_argument(
        "--threads", type=int, default=1,
        help="torch threads per run (default 1: on a shared machine more threads spin against other load)",
    )
    parser.add_argument("--model-size", choices=sorted(MODEL_SIZES), default="toy",
                        help="toy (default) or 0.5b: a ~0.48B-parameter random Qwen3, for a GPU")
    parser.add_argument("--profile", metavar="DIR", help="torch.profiler traces of one step of each trainer")
    parser.add_argument("--ratio-only", action="store_true",
                        help="time ours against plain TRL only (no memory sweep, no bf16 weight check)")
    parser.add_argument("--host-profile", action="store_true",
                        help="cProfile one step of each trainer: the host time spent in councilzoo's code")
    parser.add_argument("--output", default=None, help="result file (default: the results folder)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        Path(args.result).write_text(json.dumps(child(json.loads(args.child))))
        return 0

    import torch

    torch.set_num_threads(args.threads)  # the model build, too
    if args.host_profile:
        return host_profile(args)
    load_before = os.getloadavg()
    prompts, generations, tokens, micro = SHAPES["quick" if args.quick else "default"]
    tokens = args.tokens or tokens
    profile = Path(args.profile) if args.profile else None
    if profile:
        profile.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        model = str(build_model(tmp / "model", args.model_size))
        dataset = "synthetic:word_problems" if args.model_size == "smollm2" else DEFAULT_DATA
        base = dict(model=model, prompts=prompts, generations=generations, tokens=tokens, lr=1e-6, bf16=False,
                    dataset=dataset)
        configs = {"ours": dict(base, kind="ours", steps=args.steps),
                   "plain TRL": dict(base, kind="trl", steps=args.steps)}
        plan = [name for i in range(args.repeats) for name in (list(configs)[:: 1 if i % 2 == 0 else -1])]
        if not args.ratio_only:
            for k in (1, 2, 4):
                configs[f"ours, {k}x batch"] = dict(
                    base, kind="ours", steps=1, prompts=prompts * k, micro_batch=micro
                )
            bp, bg, bt = BF16_SHAPE
            configs["ours, bf16"] = dict(base, kind="ours", steps=BF16_STEPS, prompts=bp, generations=bg,
                                         tokens=bt, bf16=True, weights_changed=True)
            plan += list(configs)[2:]
        results: dict[str, list[dict]] = {}
        for i, name in enumerate(plan):
            started = time.perf_counter()
            spec = dict(configs[name], name=name, out=str(tmp / f"run{i}"))
            if profile and name in ("ours", "plain TRL") and name not in results:
                spec["profile_to"] = str(profile / f"{name.replace(' ', '_')}.trace.json")
            results.setdefault(name, []).append(run_child(spec, tmp / f"run{i}.log", args.threads))
            print(f"  {name}: {time.perf_counter() - started:.0f} s", file=sys.stderr)
    rows = [summarise(name, configs[name], runs) for name, runs in results.items()]
    by = {r["run"]: r for r in rows}
    ours, plain = by["ours"], by["plain TRL"]
    summary = {
        "time_ratio": round(ours["s_per_step"] / plain["s_per_step"], 4),
        "time_ratio_cpu_seconds": round(ours["cpu_s_per_step"] / plain["cpu_s_per_step"], 4),
        "peak_host_rss_ratio": round(ours["peak_rss_mib"] / plain["peak_rss_mib"], 4),
        "target_ratio": TARGET,
        "model_size": args.model_size,
        "seconds_per_step": {"ours": ours["s_per_step"], "plain_trl": plain["s_per_step"]},
        "cpu_seconds_per_step": {"ours": ours["cpu_s_per_step"], "plain_trl": plain["cpu_s_per_step"]},
        "load_average_1_5_15": {"before": [round(x, 2) for x in load_before],
                                "after": [round(x, 2) for x in os.getloadavg()]},
        "cpus": os.cpu_count(),
    }
    if ours["gpu_peak_mib"] is not None:
        summary["gpu_peak_memory_ratio"] = round(ours["gpu_peak_mib"] / plain["gpu_peak_mib"], 4)
        summary["gpu_peak_mib"] = {"ours": ours["gpu_peak_mib"], "plain_trl": plain["gpu_peak_mib"]}
    if not args.ratio_only:
        sweep = [by[f"ours, {k}x batch"]["peak_rss_mib"] for k in (1, 2, 4)]
        summary["peak_host_rss_mib_1x_2x_4x_fixed_micro_batch"] = sweep
        summary["peak_host_rss_growth_4x_over_1x"] = round(sweep[2] / sweep[0], 4)
        summary["bf16_changed_fraction"] = by["ours, bf16"]["changed_fraction"]
    if profile:
        summary["profile"] = profile_difference(results["ours"][0], results["plain TRL"][0], profile)
    print_table(rows, summary)
    config = {"quick": args.quick, "model_size": args.model_size, "model": MODEL_SIZES[args.model_size],
              "steps": args.steps, "repeats": args.repeats, "torch_threads": args.threads,
              "reward_rule": "ground_truth", "data": base["dataset"], "bf16_shape": BF16_SHAPE,
              "bf16_steps": BF16_STEPS, "device": "cuda" if torch.cuda.is_available() else "cpu"}
    default = RESULT.with_name("learner_step_smollm2.json") if args.model_size == "smollm2" else RESULT
    output = Path(args.output or default)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps({"config": config, "table": rows, "summary": summary}, indent=2) + "\n")
    return 0


def host_profile(args) -> int:
    """``--host-profile``: one cProfiled step of ours and of plain TRL (3 optimizer steps a run, step
    2 profiled), a table of the host time in councilzoo's code against the step."""
    load_before = os.getloadavg()
    prompts, generations, tokens, _ = SHAPES["quick" if args.quick else "default"]
    tokens = args.tokens or tokens
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        model = str(build_model(tmp / "model", args.model_size))
        base = dict(model=model, prompts=prompts, generations=generations, tokens=tokens, lr=1e-6, bf16=False,
                    steps=max(args.steps, 3), host_profile=True)  # fmt: skip
        for name, kind in (("ours", "ours"), ("plain TRL", "trl")):
            spec = dict(base, kind=kind, name=name, out=str(tmp / kind))
            results[name] = run_child(spec, tmp / f"{kind}.log", args.threads)["host_times"]
    ours, plain = results["ours"], results["plain TRL"]
    summary = {
        "step_wall_s_under_cprofile": {"ours": ours["step_wall_s"], "plain_trl": plain["step_wall_s"]},
        "step_cpu_s_under_cprofile": {"ours": ours["step_cpu_s"], "plain_trl": plain["step_cpu_s"]},
        "councilzoo_s_per_step": ours["councilzoo_s"],
        "councilzoo_share_of_step": round(ours["councilzoo_s"] / ours["step_wall_s"], 6),
        "plain_trl_councilzoo_s": plain["councilzoo_s"],
        "top_self_time_difference_s": self_time_difference(ours, plain),
        "load_average_1_5_15": {"before": [round(x, 2) for x in load_before],
                                "after": [round(x, 2) for x in os.getloadavg()]},
        "cpus": os.cpu_count(),
    }
    print(f"one cProfiled optimizer step ({prompts}x{generations}x{tokens}, {args.model_size} model): "
          f"ours {ours['step_wall_s']:.2f} s ({ours['step_cpu_s']:.2f} CPU s), "
          f"plain TRL {plain['step_wall_s']:.2f} s ({plain['step_cpu_s']:.2f} CPU s); in councilzoo's code "
          f"{ours['councilzoo_s']:.3f} s = {100 * summary['councilzoo_share_of_step']:.4f}% of our step")
    for entry, seconds in ours["councilzoo_entries_s"].items():
        print(f"  {seconds:8.3f} s  {entry}")
    print("functions whose self time differs most (s, ours - plain TRL):")
    for row in summary["top_self_time_difference_s"]:
        mine, theirs = row["ours"], row["plain_trl"]
        print(f"  {row['difference']:+8.3f}  {row['function']}  ({mine:.3f} vs {theirs:.3f})")
    config = {"quick": args.quick, "model_size": args.model_size, "shape": [prompts, generations, tokens],
              "steps": base["steps"], "profiled_step": 2, "torch_threads": args.threads,
              "device": "cuda" if __import__("torch").cuda.is_available() else "cpu"}  # fmt: skip
    output = Path(args.output or HOST_RESULT)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps({"config": config, "runs": results, "summary": summary}, indent=2) + "\n")
    return 0


def self_time_difference(ours: dict, plain: dict) -> list[dict]:
    """The functions whose self time in the cProfiled step differs most (ours minus plain TRL)."""
    a, b = ours["self_s_by_function"], plain["self_s_by_function"]
    diff = {f: a.get(f, 0.0) - b.get(f, 0.0) for f in set(a) | set(b)}
    top = sorted(diff, key=lambda f: -abs(diff[f]))[:TOP_OPS]
    return [
        {"function": f, "ours": a.get(f, 0.0), "plain_trl": b.get(f, 0.0), "difference": diff[f]} for f in top
    ]


def profile_difference(ours: dict, plain: dict, folder: Path) -> dict:
    """The operators whose self time in the profiled step differs most (ours minus plain TRL)."""
    a, b = ours["profile_self_us"], plain["profile_self_us"]
    diff = {op: a.get(op, 0.0) - b.get(op, 0.0) for op in set(a) | set(b)}
    top = sorted(diff, key=lambda op: -abs(diff[op]))[:TOP_OPS]
    return {
        "self_time_total_ms": {"ours": sum(a.values()) / 1e3, "plain_trl": sum(b.values()) / 1e3},
        "top_ops_by_self_time_difference_ms": [
            {"op": op, "ours": a.get(op, 0.0) / 1e3, "plain_trl": b.get(op, 0.0) / 1e3,
             "difference": diff[op] / 1e3}
            for op in top
        ],
        "traces": sorted(str(p) for p in folder.glob("*.trace.json")),
    }


def print_table(rows: list[dict], summary: dict) -> None:
    header = (f"{'run':<16} {'shape PxGxT':>11} {'micro x acc':>11} {'runs':>4} {'steps':>5} "
              f"{'s/step':>7} {'CPU s/step':>10} {'TRL step_time':>13} {'tokens/s':>8} {'comp len':>8} "
              f"{'host RSS MiB':>12} {'GPU peak MiB':>12}")
    print(header)
    print("-" * len(header))
    for r in rows:
        length = "-".join(str(int(x)) if x is not None else "?" for x in r["completion_length"])
        print(f"{r['run']:<16} {r['shape']:>11} {r['micro_batch_x_accum']:>11} {r['runs']:>4} "
              f"{r['timed_steps']:>5} {_fmt(r['s_per_step'], '7.2f')} {_fmt(r['cpu_s_per_step'], '10.2f')} "
              f"{_fmt(r['trl_step_time_s'], '13.2f')} {_fmt(r['tokens_per_s'], '8.0f')} {length:>8} "
              f"{r['peak_rss_mib']:12.0f} {_fmt(r['gpu_peak_mib'], '12.0f')}")
    line = (f"time ratio (ours / plain TRL) = {summary['time_ratio']:.3f} wall clock, "
            f"{summary['time_ratio_cpu_seconds']:.3f} CPU seconds (target <= {TARGET}); "
            f"peak host RSS ratio = {summary['peak_host_rss_ratio']:.3f}")
    if "gpu_peak_memory_ratio" in summary:
        ratio = summary["gpu_peak_memory_ratio"]
        line += f"; GPU peak memory ratio (torch.cuda.max_memory_allocated) = {ratio:.3f}"
    print(line)
    if "bf16_changed_fraction" in summary:
        sweep = summary["peak_host_rss_mib_1x_2x_4x_fixed_micro_batch"]
        sizes = " / ".join(f"{m:.0f}" for m in sweep)
        print(f"peak host RSS at 1x/2x/4x batch, fixed micro-batch: {sizes} MiB; "
              f"bf16 changed fraction of non-embedding weights after {BF16_STEPS} steps at lr 1e-6 = "
              f"{summary['bf16_changed_fraction']:.4f}")
    if "profile" in summary:
        prof = summary["profile"]
        total = prof["self_time_total_ms"]
        print(f"profiled step, self time in all operators: ours {total['ours']:.1f} ms, plain TRL "
              f"{total['plain_trl']:.1f} ms; largest differences (ms, ours - plain TRL):")
        for row in prof["top_ops_by_self_time_difference_ms"]:
            print(f"  {row['difference']:+9.2f}  {row['op']}  ({row['ours']:.2f} vs {row['plain_trl']:.2f})")
    load = summary["load_average_1_5_15"]
    print(f"load average (1, 5, 15 min) before {load['before']}, after {load['after']} "
          f"on {summary['cpus']} CPUs")


if __name__ == "__main__":
    sys.exit(main())
