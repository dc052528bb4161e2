"""TRACER with the offline tiny LLM on TRL's GRPOTrainer: controllers and utterances train
together and adapters load with peft (resuming: tests/test_checkpoint_faults.py)."""

from __future__ import annotations

import json

import pytest
import torch

from councilzoo.config import load_config
from councilzoo.learners.tracer.config import TracerConfig
from councilzoo.learners.tracer.learner import Tracer, TracerLearner

pytestmark = pytest.mark.slow


def tiny_config(model_dir, out_dir, **overrides) -> TracerConfig:
    data = {
        "max_steps": 2, "problems_per_step": 2, "output_dir": str(out_dir), "env": {"lam": 0.01, "rounds": 3},
        # Stop strings make candidate lengths differ, so the cost penalty gives GSPO a signal even
        # though a random model never states a right answer or a verdict.
        "agents": {"kind": "llm", "model": str(model_dir), "max_new_tokens": 12, "stop": ["e", "a"]},
        # one update a round, so the trainer's global step counts TRACER steps (the default of 2
        # updates a round: test_gspo_takes_several_updates_a_round_and_its_sequence_clip_acts)
        "generation": {"enabled": True, "num_candidates": 3, "cost_penalty": 1.0, "turns_per_step": 2,
                       "minibatches": 1, "trainer": {"learning_rate": 1e-2},
                       "peft": {"r": 4, "lora_alpha": 8, "target_modules": ["q_proj", "v_proj"]}},
        "data": {"synthetic_size": 6, "eval_limit": 2}, "baselines": ["never_review"], **overrides,
    }
    return load_config(data, TracerConfig)


def _adapters(tracer: Tracer) -> dict[str, torch.Tensor]:
    model = tracer.generation.trainer.model
    return {k: v.detach().clone() for k, v in model.named_parameters() if v.requires_grad}


@pytest.mark.parametrize("share_model", [True, False])
def test_a_tracer_step_plays_episodes_inside_the_trainer_and_trains_the_adapters(
    tiny_model_dir, tmp_path, share_model
):
    agents = {"kind": "llm", "model": str(tiny_model_dir), "max_new_tokens": 12, "stop": ["e", "a"],
              "share_model": share_model}
    tracer = Tracer(tiny_config(tiny_model_dir, tmp_path / "run", agents=agents))
    before = _adapters(tracer)
    history = tracer.train()
    after = _adapters(tracer)
    assert any(not torch.equal(before[k], after[k]) for k in before), "GSPO left the adapters unchanged"
    assert [m["step"] for m in history] == [1, 2] and all(m["states_over_bound"] == [] for m in history)
    assert tracer.generation.trained_roles == (("proposer", "reviewer") if share_model else ("proposer",))
    state = json.loads((tmp_path / "run" / "checkpoint-2" / "trainer_state.json").read_text())
    assert state["global_step"] == 2
    final = tmp_path / "run" / "final"
    assert (final / "adapter_config.json").is_file()  # peft, vLLM and lm-eval can load it


def test_gspo_takes_several_updates_a_round_and_its_sequence_clip_acts(tiny_model_dir, tmp_path):
    """By default a TRACER step's candidates are split into 2 minibatches: the first update is on-policy
    (every sequence ratio 1, nothing clipped), the second sees the policy the first made, so with the
    paper's clip range GSPO clips sequences there (with one update a round it would be GRPO)."""
    generation = {"enabled": True, "num_candidates": 3, "cost_penalty": 1.0, "turns_per_step": 2,
                  "trainer": {"learning_rate": 1e-2, "epsilon": 3e-4, "epsilon_high": 4e-4},  # the paper's
                  "peft": {"r": 4, "lora_alpha": 8, "target_modules": ["q_proj", "v_proj"]}}
    cfg = tiny_config(tiny_model_dir, tmp_path / "run", generation=generation)
    assert cfg.generation.minibatches == 2  # the default
    tracer = Tracer(cfg)
    tracer.train()
    trainer = tracer.generation.trainer
    assert tracer.step_count == cfg.max_steps and trainer.state.global_step == 2 * cfg.max_steps
    clipped = [row["clip_ratio/region_mean"] for row in trainer.state.log_history
               if "clip_ratio/region_mean" in row]
    assert len(clipped) == 2 * cfg.max_steps  # one row per update
    assert clipped[0::2] == [0.0] * cfg.max_steps  # each round's first update is on-policy
    assert max(clipped[1::2]) > 0  # the off-policy updates clip
    with pytest.raises(ValueError, match="minibatches"):  # 2 turns x 3 candidates do not split in 4
        tiny_config(tiny_model_dir, tmp_path / "bad", generation={**generation, "minibatches": 4})


def test_the_cli_learner_writes_metrics_summary_and_loadable_adapters(tiny_model_dir, tmp_path):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    cfg = tiny_config(tiny_model_dir, tmp_path / "run", max_steps=1, report_to=["tensorboard"])
    rows = TracerLearner(cfg).train()
    out = tmp_path / "run"
    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1]  # one row a step: controllers and GSPO update together
    assert any(k.endswith("/avg_bound") for k in metrics[0])
    assert {"gspo/loss", "gspo/reward", "gspo/grad_norm"} <= set(metrics[0])
    speak = [k for k in metrics[0] if k.startswith("regret/") and k.endswith("/speak_avg")]
    assert speak  # the controllers' speak probability per information state
    tags = _tensorboard_tags(out / "tensorboard")
    assert {"gspo/loss", "gspo/grad_norm", speak[0]} <= tags
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["eval"]["synthetic:numeric"]) == {"tracer", "never_review"}
    assert rows and "accuracy" in rows[0]
    PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(tiny_model_dir), out / "final")


def _tensorboard_tags(folder) -> set[str]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(folder))
    events.Reload()
    return set(events.Tags()["scalars"])


def question_only(ctx) -> list[dict[str, str]]:
    """A prompt format of a user's own (an agents.render target, by this module's import path)."""
    return [{"role": "user", "content": f"Q: {ctx.problem.question}"}]


def test_trained_agents_speak_in_the_configured_prompt_format(tiny_model_dir, tmp_path):
    """agents.render replaces the role prompts of the trained proposer: its episode turns and the
    GSPO candidates are sampled from exactly the prompt that renderer gives for the turn."""
    from councilzoo.agents.base import Sampling
    from councilzoo.agents.prompts import render_messages

    agents = {"kind": "llm", "model": str(tiny_model_dir), "max_new_tokens": 12, "share_model": False,
              "render": f"{__name__}:question_only"}
    tracer = Tracer(tiny_config(tiny_model_dir, tmp_path / "run", agents=agents))
    layer, g = tracer.generation, tracer.cfg.generation
    batch = layer.rollout([{}] * (g.turns_per_step * g.num_candidates), layer.trainer)
    turns = [ctx for _, ctx, _ in layer.turns if ctx.role == "proposer"]

    def prompt_ids(render) -> set[tuple[int, ...]]:
        replies = layer.generator.generate([render(ctx) for ctx in turns], 1, Sampling(max_new_tokens=1))
        return {tuple(r[0].prompt_token_ids) for r in replies}

    assert {tuple(ids) for ids in batch["prompt_ids"]} <= prompt_ids(question_only)
    assert not prompt_ids(question_only) & prompt_ids(render_messages)  # the renderer made a difference


def test_label_free_samples_train_the_llm_against_leave_one_out_labels(tiny_model_dir, tmp_path, monkeypatch):
    """A random tiny model states no answer, so no step has a consensus label; its proposer turns still
    train, each candidate against its group's other candidates (a step without them would be replayed)."""
    from councilzoo.learners.tracer import utterance_layer

    seen, real = [], utterance_layer.leave_one_out_labels

    def spy(answers, kind):
        seen.append(answers)
        return real(answers, kind)

    monkeypatch.setattr(utterance_layer, "leave_one_out_labels", spy)
    cfg = tiny_config(tiny_model_dir, tmp_path / "run", max_steps=1, label_free=True,
                      consensus_votes="samples", consensus_samples=3)
    tracer = Tracer(cfg)
    tracer.train()
    assert tracer.step_count == 1 and len(seen) == cfg.generation.turns_per_step  # every proposer group
    assert all(len(group) == cfg.generation.num_candidates for group in seen)
