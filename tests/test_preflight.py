"""``councilzoo train NAME CONFIG --dry-run`` (``learners/preflight.py``): the preflight of every
shipped GPU config equals what docs/learners.md shows ("Before you spend GPU-hours"), its figures
follow from the config, and each setting the docs call wrong exits 2 with its one line on stderr.
Everything here runs without a GPU, a download or a model load."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
import yaml
from transformers import AutoModelForCausalLM

from councilzoo.cli import main
from councilzoo.learners.preflight import model_facts

ROOT = Path(__file__).resolve().parents[1]
GPU_CONFIGS = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "configs").glob("*gpu*.yaml"))
COHORT = "configs/corl_gpu_qwen_llama.yaml"


def learner_of(config: str) -> str:
    return "tracer" if "tracer" in Path(config).name else "corl"


def dry_run(capsys, config: str, *sets: str, learner: str | None = None) -> tuple[int, str, list[str]]:
    """Exit status, stdout and stderr lines of ``councilzoo train LEARNER CONFIG --dry-run --set ...``."""
    argv = ["train", learner or learner_of(config), config, "--dry-run"]
    code = main([*argv, *(a for s in sets for a in ("--set", s))])
    out = capsys.readouterr()
    return code, out.out, out.err.splitlines()


def documented(command: str) -> tuple[str, int]:
    """The output docs/learners.md shows for ``command`` (the indented block after its ``$`` line),
    and the exit status it states."""
    text = (ROOT / "docs" / "learners.md").read_text()
    section = text[text.index("## Before you spend GPU-hours") :]
    marker = f"    $ {command}\n"
    assert marker in section, f"docs/learners.md shows no preflight of {command!r}"
    block = re.match(r"((?:    .*\n)+)", section[section.index(marker) + len(marker) :]).group(1)
    lines = [line[4:] for line in block.splitlines()]
    status = re.fullmatch(r"\(exit status (\d)\)", lines.pop())
    assert status, f"the block of {command!r} must end with its exit status"
    return "\n".join(lines) + "\n", int(status.group(1))


@pytest.mark.parametrize("config", GPU_CONFIGS)
def test_each_shipped_gpu_config_has_its_preflight_in_the_docs(capsys, monkeypatch, config):
    """The docs show exactly what the command prints today (rerun the command and paste its output
    when a config or a check changes), and each error is also one stderr line."""
    monkeypatch.chdir(ROOT)
    code, out, err = dry_run(capsys, config)
    out = out.split("placement on ")[0]  # the plan on this machine's GPUs (tests/test_cohort_placement.py)
    shown, status = documented(f"councilzoo train {learner_of(config)} {config} --dry-run")
    assert out == shown
    assert code == status
    errors = [line.split("error: ", 1)[1] for line in out.splitlines() if line.startswith("  error: ")]
    assert len(err) == len(errors) and all(e.endswith(x) for e, x in zip(err, errors, strict=True))
    assert code == (2 if errors else 0)


def test_every_member_gets_every_figure(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    _, out, _ = dry_run(capsys, COHORT)
    members = yaml.safe_load((ROOT / COHORT).read_text())["members"]
    for i, member in enumerate(members):
        block = out.split(f"members.{i} ({member['name']}): ")[1]
        for label in ("world size", "sharding", "effective batch", "round", "epoch", "memory a GPU", "vLLM",
                      "held-out set"):  # fmt: skip
            assert f"\n  {label} " in block.split("\nmembers.")[0], (member["name"], label)


def test_figures_follow_from_the_settings(capsys, monkeypatch):
    """Eight processes of 4 completions, ZeRO-2, rounds of 16 items x 8: the printed figures are the
    settings' arithmetic."""
    monkeypatch.chdir(ROOT)
    code, out, err = dry_run(
        capsys, COHORT, "members.0.num_processes=8", "trainer.gradient_accumulation_steps=1",
        "trainer.per_device_train_batch_size=4", "prompts_per_step=16", "members.1.view=0",
        "members.0.accelerate_config=configs/accelerate/zero2.yaml", "eval.eval_steps=50",
    )  # fmt: skip
    qwen = out.split("members.1 (llama)")[0]
    assert "  world size       8 process(es) on 1 machine(s)\n" in qwen
    assert "  sharding         ZeRO-2\n" in qwen
    assert "  effective batch  32 completions an optimizer step (4 a process x 8 x accumulation 1)\n" in qwen
    assert "  round            128 completions (16 items x 8), 4 optimizer step(s)\n" in qwen
    # 2,000 steps / 4 a round = 500 rounds of 16 GSM8K train items (7,473)
    epoch = "467.1 rounds (7,473 items / 16 a round); the run: 500 rounds = 1.07 epochs"
    assert f"  epoch            {epoch}\n" in qwen
    assert "  held-out set     gsm8k test (1,319 items), every 50 steps\n" in qwen
    # ZeRO-2 (recipe_checks.training_gib): bf16 weights whole (2 bytes), the rest (14) over 8 processes
    training = 1.54e9 * (2 + 14 / 8) / 2**30
    assert f"training state {training:.1f} GiB (2 whole + 14 / 8 bytes a parameter)" in qwen
    assert "ZeRO-3 for a" not in qwen and "no held-out evaluation" not in qwen
    assert code == 0 and err == []


def top_level_line(config: str, key: str) -> int:
    """The line of ``key:`` at the top of ``config`` (errors name the line of the key they concern)."""
    lines = (ROOT / config).read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if line.startswith(f"{key}:"))


# case: (--set overrides of the GPU config, then how each stderr line starts: one a member it is wrong for)
Q = "members.0 (qwen): "
WRONG = {
    "evaluation split": (
        ["data.split=test"],
        f"{COHORT}, line {top_level_line(COHORT, 'data')}: data: split 'test' of 'gsm8k' is an evaluation "
        "split",
    ),
    "view without paraphrases": (
        ["members.0.view=2", "data.paraphrases=null"],
        Q + "view 2 asks for rephrased items, but gsm8k items carry no paraphrases",
    ),
    "pure bf16 weights": (
        ["members.0.trainer.model_init_kwargs.dtype=bfloat16"],
        Q + "trainer.model_init_kwargs.dtype bfloat16 trains the checkpoint's half-precision weights",
    ),
    "checkpoint dtype": (
        ["members.0.trainer.model_init_kwargs.dtype=auto"],
        Q + "trainer.model_init_kwargs.dtype auto trains the checkpoint's half-precision weights",
    ),
    "sleep mode": (
        ["members.0.trainer.vllm_enable_sleep_mode=true"],
        f"{COHORT}: members[0] (qwen): vllm_enable_sleep_mode is not supported",
    ),
    "8B unsharded": (
        ["members.0.model=meta-llama/Llama-3.1-8B-Instruct", "members.0.accelerate_config=null"],
        Q + "needs ~135 GiB a GPU before activations (training 119.2 + vLLM 16.0) on 80 GiB GPUs",
    ),
    "vLLM too small": (
        ["members.0.trainer.vllm_gpu_memory_utilization=0.03"],
        Q + "vLLM's 2.4 GiB cannot hold the weights and one sequence of 2,048 tokens",
    ),
    "round does not split": (
        ["members.0.num_processes=3"],
        Q + "generation_batch_size 512 (prompts_per_step 64 x num_generations 8) is not divisible",
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(WRONG))
def test_a_wrong_setting_exits_2_with_its_one_line(capsys, monkeypatch, case):
    monkeypatch.chdir(ROOT)
    sets, *lines = WRONG[case]
    code, out, err = dry_run(capsys, COHORT, "members.1.view=0", *sets)  # view 1 reads a file not here
    assert code == 2
    assert len(err) == len(lines), err
    for got, line in zip(err, lines, strict=True):
        assert got.startswith(f"councilzoo train: error: {line}"), got
        if not line.startswith("configs/"):  # the preflight's own finding (else: refused as the config loads)
            assert f"  error: {got.removeprefix('councilzoo train: error: ').split(': ', 1)[1]}\n" in out


def test_a_local_model_is_sized_from_its_config_without_loading_weights(tiny_model_dir):
    """A local folder's parameter count and attention shape come from config.json (meta device)."""
    facts = model_facts(str(tiny_model_dir))
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    assert facts.params == sum(p.numel() for p in model.parameters())
    assert facts.layers == model.config.num_hidden_layers
    kv_heads = model.config.num_key_value_heads
    assert facts.kv_bytes_per_token() == 2 * facts.layers * kv_heads * facts.head_dim * 2
    assert model_facts("someone/Some-Model-7B-Instruct").params == 7e9  # offline: the name's size
    assert model_facts("someone/unnamed") is None


# The Co-RL recipe as it shipped before issue 36's review (the settings that matter here).
REVIEWED_RECIPE = """
members:
  - {name: qwen, model: Qwen/Qwen2.5-1.5B-Instruct, view: 0, num_processes: 4,
     accelerate_config: configs/accelerate/zero3.yaml}
  - {name: llama, model: meta-llama/Llama-3.2-1B-Instruct, view: 1, num_processes: 4,
     accelerate_config: configs/accelerate/zero3.yaml}
num_generations: 8
prompts_per_step: 16
max_steps: 2000
max_completion_length: 1024
data: {dataset: gsm8k, split: train}
trainer: {bf16: true, per_device_train_batch_size: 4, gradient_accumulation_steps: 2, use_vllm: true,
          vllm_mode: colocate, vllm_gpu_memory_utilization: 0.45, vllm_importance_sampling_correction: true}
"""


def test_the_reviewed_recipe_shows_each_finding_of_the_review(capsys, monkeypatch, tmp_path):
    """What the review found by reading the recipe, the preflight finds by itself (the settings it
    refuses as the config loads, an evaluation split or sleep mode, are in WRONG above)."""
    monkeypatch.chdir(ROOT)
    (tmp_path / "recipe.yaml").write_text(REVIEWED_RECIPE)
    code, out, err = dry_run(capsys, str(tmp_path / "recipe.yaml"))
    view = "members.1 (llama): view 1 asks for rephrased items, but gsm8k items carry no paraphrases"
    assert code == 2 and len(err) == 1 and err[0].startswith(f"councilzoo train: error: {view}")
    findings = (
        "no held-out evaluation", "vllm_max_model_length unset: vLLM sizes itself for 131,072 tokens",
        "ZeRO-3 for a 1.2B model", "a round is 32 completions a process",
        "vllm_importance_sampling_mode left at TRL's sequence_mask",
    )  # fmt: skip
    for finding in findings:
        assert f"  warning: {finding}" in out.split("members.1 (llama)")[1], finding


def test_tracer_dry_run_prints_its_one_world_and_refuses_turns_that_do_not_split(capsys, monkeypatch):
    """TRACER's placement plan: num_processes 2 is one torchrun world on this machine, each process
    taking half of the round's 16 candidates; on 3 processes 4 turns do not split into whole turns."""
    monkeypatch.chdir(ROOT)
    code, out, err = dry_run(capsys, "configs/tracer_cpu_tiny.yaml", "num_processes=2")
    assert code == 0, err
    plan = out[out.index("placement on this machine"):]
    assert "world 0 (tracer): 2 process(es), 2 on each of 1 node(s), torchrun" in plan
    assert "batch            4 a process x 2 x accumulation 1 = 8 completions an optimizer step" in plan
    assert "-m councilzoo.learners.tracer.world" in plan and "--nproc-per-node 2" in plan
    code, _, err = dry_run(capsys, "configs/tracer_cpu_tiny.yaml", "num_processes=3")
    assert code == 2
    assert err[0] == ("councilzoo train: error: tracer: generation: turns_per_step 4 does not split into "
                      "whole turns over 3 processes (each samples its turns' groups); choose a multiple of 3")
