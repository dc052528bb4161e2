"""What a GPU recipe must get right before it spends cluster time (docs/learners.md, "GPU
recipes"): no evaluation data in training, no silent paraphrase views, fp32 master weights, a fixed
chat-template date, held-out evaluation, sized vLLM, sharding by model size, rounds that fill the
GPUs, an explicit importance-sampling mode, and TRL's weight push on CUDA."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import yaml

from councilzoo.config import ConfigError, load_config
from councilzoo.learners.corl.config import CoRLConfig
from councilzoo.learners.data import load_items
from councilzoo.learners.recipe_checks import check_tracer_world, check_views
from councilzoo.learners.tracer.config import TracerConfig
from councilzoo.tasks import Problem, paraphrase
from councilzoo.tasks.rephrase import numbers, paraphrases

ROOT = Path(__file__).resolve().parents[1]
COHORT_RECIPES = ("configs/corl_gpu_qwen_llama.yaml", "configs/corl_gpu_qwen25vl_internvl.yaml")
# Word problems in GSM8K's style (written here; the benchmark is not shipped).
QUESTIONS = [
    "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. "
    "How many clips did Natalia sell altogether in April and May?",
    "Mr. Lee buys 3 boxes of pens. Each box holds 12 pens and costs $4.50. How much does he spend?",
    "If Tom gets 2,400 points a day, how many points does he get in 7 days?",
    "James writes a 3-page letter to 2 different friends twice a week. How many pages does he write a year?",
]


def _cohort(**changes) -> dict:
    data = {"members": [{"name": "a", "tiny_family": "qwen3"}, {"name": "b", "tiny_family": "llama"}]}
    return {**data, **changes}


# -- evaluation data never trains ----------------------------------------------------------------
@pytest.mark.parametrize(
    "data, words",
    [({"dataset": "gsm8k", "split": "test"}, "split 'test' of 'gsm8k' is an evaluation split"),
     ({"dataset": "mathvista", "split": "testmini"}, "is an evaluation split"),
     ({"dataset": "math500", "split": "train"}, "'math500' is an evaluation benchmark"),
     ({"dataset": "gpqa_diamond", "split": "train"}, "'gpqa_diamond' is an evaluation benchmark")],
)  # fmt: skip
def test_training_on_evaluation_data_is_refused_in_one_line(data, words):
    with pytest.raises(ConfigError, match=words) as err:
        load_config(_cohort(data=data), CoRLConfig)
    assert "\n" not in str(err.value)
    with pytest.raises(ConfigError, match=words):
        load_config({"data": {"train": data["dataset"], "train_split": data["split"]}}, TracerConfig)


# -- paraphrase views ----------------------------------------------------------------------------
def test_a_view_without_paraphrases_is_refused_not_silently_the_original():
    item = Problem(id="gsm8k-train-00000", question=QUESTIONS[0], answer="72", kind="numeric")
    assert paraphrase(item, 0) is item
    with pytest.raises(ValueError, match="has no paraphrases for view 1"):
        paraphrase(item, 1)
    with pytest.raises(ConfigError, match="member 'b' has view 2 but item 'gsm8k-train-00000' has 1"):
        one = Problem(id=item.id, question=item.question, answer="72", metadata={"paraphrases": ("x",)})
        check_views([one], {"a": 0, "b": 2}, "data")


def test_paraphrases_keep_every_number_and_change_the_wording():
    for question in QUESTIONS:
        forms = paraphrases(question)
        assert len(forms) == (1 if question.startswith("If Tom") else 2), question  # 1 sentence: reworded
        assert len({question, *forms}) == len(forms) + 1
        assert all(numbers(f) == numbers(question) for f in forms)
    first = paraphrases(QUESTIONS[1])[0]
    assert first.startswith("How much does he spend? Facts: Mr. Lee buys")  # "Mr." ends no sentence
    assert "What number of clips" in paraphrases(QUESTIONS[0])[1]
    assert paraphrases("What is 2 + 3?") == []  # one sentence, no rewording: no paraphrase


def test_the_paraphrase_command_writes_what_a_recipe_trains_on(tmp_path):
    rows = tmp_path / "train.jsonl"
    rows.write_text("".join(json.dumps({"id": f"q{i}", "prompt": q, "answer": "1"}) + "\n"
                            for i, q in enumerate(QUESTIONS)))  # fmt: skip
    out = tmp_path / "paraphrases.jsonl"
    done = subprocess.run(
        [sys.executable, "-m", "councilzoo.cli", "paraphrase", "jsonl", "--path", str(rows),
         "--out", str(out)], capture_output=True, text=True, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "4 items" in done.stdout and "1 with 1 paraphrase(s), 3 with 2 paraphrase(s)" in done.stdout
    members = [{"name": "a", "tiny_family": "qwen3"}, {"name": "b", "tiny_family": "llama", "view": 1}]
    data = {"dataset": "jsonl", "path": str(rows)}
    with pytest.raises(ConfigError, match="member 'b' has view 1 but item 'q0' has 0 paraphrase"):
        cfg = load_config({"members": members, "data": data}, CoRLConfig)
        load_items(cfg.data, cfg.seed, cfg.views)
    cfg = load_config({"members": members, "data": {**data, "paraphrases": str(out)}}, CoRLConfig)
    items = load_items(cfg.data, cfg.seed, cfg.views)
    assert paraphrase(items[0], 1).question == paraphrases(QUESTIONS[0])[0]


# -- master weights -----------------------------------------------------------------------------
@pytest.mark.slow
def test_tracer_trains_fp32_master_weights_of_a_bf16_checkpoint(tiny_model_dir, tmp_path):
    from transformers import AutoModelForCausalLM

    from councilzoo.learners.tracer.learner import Tracer

    bf16 = tmp_path / "bf16"
    AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.bfloat16).save_pretrained(bf16)
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        if (tiny_model_dir / name).is_file():
            (bf16 / name).write_bytes((tiny_model_dir / name).read_bytes())
    assert json.loads((bf16 / "config.json").read_text())["dtype"] == "bfloat16"
    cfg = load_config(
        {"max_steps": 1, "output_dir": str(tmp_path / "run"),
         "agents": {"kind": "llm", "model": str(bf16), "max_new_tokens": 8},
         "generation": {"enabled": True, "num_candidates": 2, "turns_per_step": 2, "peft": None},
         "data": {"synthetic_size": 4, "eval_limit": 2}},
        TracerConfig,
    )  # fmt: skip
    model = Tracer(cfg).generation.trainer.model
    assert {p.dtype for p in model.parameters()} == {torch.float32}


# -- the chat template's date -------------------------------------------------------------------
LLAMA_STYLE = (
    "{%- if not date_string is defined %}{%- set date_string = strftime_now('%d %b %Y') %}{%- endif %}"
    "Today Date: {{ date_string }}|{% for m in messages %}{{ m['content'] }}|{% endfor %}"
)
DIRECT = "Now: {{ strftime_now('%Y-%m-%d') }}|{% for m in messages %}{{ m['content'] }}|{% endfor %}"


def test_every_prompt_renders_the_fixed_date_not_today(tiny_model_dir):
    import datetime

    from transformers import AutoTokenizer
    from trl.data_utils import apply_chat_template as trl_apply_chat_template

    from councilzoo.agents.generators.chat_template import render_prompt
    from councilzoo.learners.engine import Round, RunSettings

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    tokenizer.chat_template = LLAMA_STYLE
    messages = [{"role": "user", "content": "2 + 3?"}]
    text = tokenizer.decode(render_prompt(tokenizer, messages))
    assert text.startswith("Today Date: 26 Jul 2024|")
    assert datetime.date.today().strftime("%d %b %Y") not in text
    # TRL renders the training prompts, with the config's chat_template_kwargs
    run = RunSettings(output_dir="/tmp/x", max_steps=1, seed=0, save_steps=0, report_to=["none"])
    args = run.grpo_config(Round(prompts=1, num_generations=2, max_completion_length=4), run_name="t")
    rendered = trl_apply_chat_template({"prompt": messages}, tokenizer, **args.chat_template_kwargs)
    assert rendered["prompt"].startswith("Today Date: 26 Jul 2024|")
    tokenizer.chat_template = DIRECT  # reads the clock with no way to fix it: refused
    with pytest.raises(ValueError, match="writes the current date"):
        render_prompt(tokenizer, messages)


def test_a_processor_whose_template_reads_no_date_is_given_none_and_renders_without_a_warning(tiny_vlm_dir):
    import logging

    from transformers import AutoProcessor
    from transformers.utils import logging as hf_logging

    from councilzoo.agents.generators.chat_template import (
        apply_chat_template,
        chat_template_kwargs,
        check_template_date,
    )

    processor = AutoProcessor.from_pretrained(tiny_vlm_dir)
    assert "date_string" not in processor.chat_template and chat_template_kwargs(processor) == {}
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append
    library = hf_logging.get_logger("transformers")
    library.addHandler(handler)
    try:  # a processor passes a keyword its template does not read to its tokenizer, warning each time
        message = {"role": "user", "content": [{"type": "text", "text": "2+3?"}]}
        text = apply_chat_template(processor, [message])
    finally:
        library.removeHandler(handler)
    assert "2+3?" in text and not [r for r in records if "processor_kwargs" in r.getMessage()]
    processor.chat_template = LLAMA_STYLE
    assert chat_template_kwargs(processor) == {"date_string": "26 Jul 2024"} == chat_template_kwargs()
    # named templates: the default one is what renders
    processor.chat_template = {"default": "{% for m in messages %}{{ m['content'] }}{% endfor %}",
                               "dated": LLAMA_STYLE}
    assert chat_template_kwargs(processor) == {}
    processor.chat_template = {"default": DIRECT}
    with pytest.raises(ValueError, match="writes the current date"):
        check_template_date(processor)


# -- the shipped GPU recipes --------------------------------------------------------------------
def _settings(path: str) -> list[tuple[dict, dict, dict]]:
    """(whole recipe, member or TRACER generation, merged trainer settings) per trained model."""
    data = yaml.safe_load((ROOT / path).read_text())
    if "members" in data:
        return [(data, m, {**data["trainer"], **m.get("trainer", {})}) for m in data["members"]]
    return [(data, data["generation"], data["generation"]["trainer"])]


@pytest.mark.parametrize("path", [*COHORT_RECIPES, "configs/tracer_gpu.yaml"])
def test_every_gpu_recipe_is_sized_evaluated_and_explicit(path, monkeypatch):
    monkeypatch.chdir(ROOT)
    for data, unit, trainer in _settings(path):
        assert trainer["use_vllm"] and trainer["vllm_mode"] == "colocate"
        assert 1024 <= trainer["vllm_max_model_length"] <= 4096  # not the model's 32k-131k context
        assert 0.1 <= trainer["vllm_gpu_memory_utilization"] <= 0.35
        assert trainer["vllm_importance_sampling_mode"] == "token_truncate"  # no length bias
        assert trainer["bf16"] and not trainer.get("model_init_kwargs")  # autocast over fp32 weights
        if "members" in data:
            assert unit["accelerate_config"].endswith("zero2.yaml")  # 1-3B members: ZeRO-2
            world = unit["num_processes"]
            round_ = data["prompts_per_step"] * data["num_generations"]
            assert round_ // world >= 64  # completions a GPU per round
            held_out = data["eval"]
            assert held_out["eval_steps"] > 0 and held_out["split"] in ("test", "testmini")
        else:
            round_ = unit["turns_per_step"] * unit["num_candidates"]
            world = 1
            assert set(data["data"]["eval"]) >= {"gsm8k", "math500"} and data["eval_every"] > 0
        update = trainer["per_device_train_batch_size"] * world * trainer["gradient_accumulation_steps"]
        assert round_ % update == 0 and round_ // update == 4  # 4 updates a round (GSPO off-policy)
    cls = CoRLConfig if "members" in data else TracerConfig
    load_config(data, cls)  # every check passes as shipped


@pytest.mark.parametrize("path", COHORT_RECIPES)
def test_sleep_mode_with_our_own_generation_paths_is_refused(path, monkeypatch):
    monkeypatch.chdir(ROOT)
    data = yaml.safe_load((ROOT / path).read_text())
    data["trainer"]["vllm_enable_sleep_mode"] = True
    with pytest.raises(ConfigError, match="vllm_enable_sleep_mode is not supported with held-out evaluation"):
        load_config(data, CoRLConfig)
    tracer = yaml.safe_load((ROOT / "configs/tracer_gpu.yaml").read_text())
    tracer["generation"]["trainer"]["vllm_enable_sleep_mode"] = True
    with pytest.raises(ConfigError, match="not supported with TRACER's episodes"):
        load_config(tracer, TracerConfig)


def test_tracer_refuses_a_sharded_world_only():
    check_tracer_world("MULTI_GPU", 4)
    check_tracer_world("DEEPSPEED_ZERO3", 1)
    with pytest.raises(ConfigError, match="TRACER on 2 processes needs replicated weights"):
        check_tracer_world("DEEPSPEED_ZERO3", 2)
    with pytest.raises(ConfigError, match="got FSDP"):
        check_tracer_world("FSDP", 8)


# -- pushes to vLLM and importance sampling -----------------------------------------------------
def test_colocated_pushes_use_trls_sync_weights_on_cuda_and_reload_on_cpu(monkeypatch):
    from councilzoo.learners import live_policy

    colocate = SimpleNamespace(args=SimpleNamespace(use_vllm=True, vllm_mode="colocate"))
    server = SimpleNamespace(args=SimpleNamespace(use_vllm=True, vllm_mode="server"))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert live_policy.weight_push_path(colocate) == "reload_weights"
    assert live_policy.weight_push_path(server) == "trl_sync_weights"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert live_policy.weight_push_path(colocate) == "trl_sync_weights"


def test_the_masked_fraction_counts_completion_tokens_the_mode_dropped_or_bounded():
    from councilzoo.learners.engine import masked_fraction

    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0]])
    per_token = torch.tensor([[1.0, 0.0, 0.9, 0.0], [0.0, 1.2, 5.0, 1.0]])  # padding never counts
    assert masked_fraction(per_token, mask, "token_mask", None, 2.0) == (2.0, 5.0)
    assert masked_fraction(per_token, mask, "token_truncate", 0.5, 2.0) == (2.0, 5.0)
    per_sequence = torch.tensor([[0.0], [1.0]])  # a sequence-level mode drops whole sequences
    assert masked_fraction(per_sequence, mask, "sequence_mask", None, 3.0) == (3.0, 5.0)


def test_the_memory_table_in_the_docs_is_the_arithmetic_of_recipe_checks():
    from councilzoo.learners.recipe_checks import training_gib, vllm_gib

    text = (ROOT / "docs" / "learners.md").read_text()
    models = {"Llama-3.2-1B": (1.24e9, 16 * 8 * 64), "Qwen2.5-1.5B": (1.54e9, 28 * 2 * 128),
              "Qwen2.5-3B": (3.09e9, 36 * 2 * 128), "Qwen2.5-7B": (7.62e9, 28 * 4 * 128),
              "Llama-3.1-8B": (8.03e9, 32 * 8 * 128)}  # fmt: skip
    for name, (params, kv_elements) in models.items():
        cells = [training_gib(params, 1, "ddp"), training_gib(params, 4, "ddp"),
                 *(training_gib(params, n, s) for s in ("zero2", "zero3") for n in (4, 8))]  # fmt: skip
        row = f"| {name} ({params / 1e9:.2f}B) | " + " | ".join(f"{c:.1f}" for c in cells) + " |"
        assert row in text, row
        cache = vllm_gib(params, 2 * kv_elements * 2, 128, 2048)  # key and value, bf16
        assert f"{cache:.1f}" in text, (name, cache)
