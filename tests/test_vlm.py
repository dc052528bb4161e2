"""Vision-language models end to end on CPU: generation with images, agents, Co-RL / TTRL /
supervised GRPO members that train on images, a mixed text + VLM cohort, COMED with a VLM
anchor, and what bad image input does."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from councilzoo.agents.base import Sampling
from councilzoo.agents.generators.transformers_backend import TransformersGenerator
from councilzoo.agents.llm import LLMAgent
from councilzoo.agents.prompts import member_prompt, render_messages, unseen_images_note
from councilzoo.cli import main
from councilzoo.config import dump_config, load_config
from councilzoo.envs.types import Mode, TurnContext
from councilzoo.learners.baselines import GRPO, TTRL, BaselineConfig
from councilzoo.learners.corl import CoRLConfig
from councilzoo.learners.corl.member import member_model_path, run_member
from councilzoo.learners.corl.rounds import problem_rows
from councilzoo.learners.data import load_items
from councilzoo.tasks import Problem, load_problems
from councilzoo.tasks.images import ImageError
from councilzoo.tiny_members import build_tiny_models

pytestmark = pytest.mark.slow
CONFIGS = Path(__file__).resolve().parents[1] / "configs"
GREEDY = Sampling(max_new_tokens=6, temperature=0.0)


def ctx(problem: Problem) -> TurnContext:
    return TurnContext(0, "anchor", "anchor", 0, problem, (), (Mode.ANSWER,), np.zeros(0, np.float32))


def visual(n: int = 3) -> list[Problem]:
    return load_problems("synthetic:visual", "test", size=n, difficulty=0.3)


def test_transformers_backend_reads_the_images(tiny_vlm_family_dir):
    generator = TransformersGenerator(tiny_vlm_family_dir, batch_size=4)
    assert generator.accepts_images
    image_token = generator.model.config.image_token_id
    problems = visual(3)
    prompts = [render_messages(ctx(p)) for p in problems] + [[{"role": "user", "content": "text only"}]]
    batch = generator.generate(prompts, n=1, sampling=GREEDY)
    singles = [generator.generate([p], n=1, sampling=GREEDY)[0] for p in prompts]
    assert [c[0].token_ids for c in batch] == [c[0].token_ids for c in singles]  # mixed batch, left padded
    assert all(image_token in c[0].prompt_token_ids for c in batch[:3])  # the expanded image tokens
    assert image_token not in batch[3][0].prompt_token_ids
    # the same text with another image gives another next-token distribution: the pixels are read
    other = Problem("x", problems[0].question, "1", kind="numeric", images=problems[1].images)
    swapped = render_messages(ctx(other))
    lp_a = generator.generate([prompts[0]], sampling=GREEDY)[0][0].logprobs
    lp_b = generator.generate([swapped], sampling=GREEDY)[0][0].logprobs
    assert lp_a != lp_b
    seeded = Sampling(max_new_tokens=6, temperature=1.0, seed=7)
    once, again = (generator.generate(prompts[:2], n=2, sampling=seeded) for _ in range(2))
    assert [[c.token_ids for c in g] for g in once] == [[c.token_ids for c in g] for g in again]


def test_agents_send_images_to_vlms_and_a_note_to_text_models(tiny_vlm_dir, tiny_model_dir):
    problem = visual(1)[0]
    vlm = LLMAgent(TransformersGenerator(tiny_vlm_dir), sampling=GREEDY, samples_per_turn={"anchor": 1})
    text = LLMAgent(TransformersGenerator(tiny_model_dir), sampling=GREEDY, samples_per_turn={"anchor": 1})
    [to_vlm], [to_text] = vlm.plan([ctx(problem)]), text.plan([ctx(problem)])
    assert [p["type"] for p in to_vlm.messages[1]["content"]] == ["image", "text"]
    assert to_text.messages[1]["content"].startswith(unseen_images_note(1))
    for agent in (vlm, text):  # both play the turn; bad output is "no answer", never a crash
        [action] = agent.act([ctx(problem)])
        assert action.mode is Mode.ANSWER and action.calls == 1


def test_bad_image_input_is_a_clear_error_before_work(tiny_model_dir, tiny_vlm_dir, tmp_path):
    problem = visual(1)[0]
    with pytest.raises(ValueError, match="text-only"):
        TransformersGenerator(tiny_model_dir).generate([render_messages(ctx(problem))], sampling=GREEDY)
    huge = Problem("h", "How many?", "1", kind="numeric", images=(Image.new("RGB", (5000, 4000)),))
    with pytest.raises(ImageError, match="over the limit"):
        TransformersGenerator(tiny_vlm_dir).generate([render_messages(ctx(huge))], sampling=GREEDY)
    rows = [{**Problem("m", "How many?", "2", kind="numeric").to_dict(), "images": ["gone.png"]}]
    path = tmp_path / "items.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(ImageError, match="gone.png"):
        load_problems("jsonl", path=str(path))


def _cohort(tmp_path, members, rule="ring", cls=CoRLConfig, **overrides):
    data = {
        "members": members,
        "reward_rule": rule,
        "num_generations": 4,
        "prompts_per_step": 2,
        "max_completion_length": 8,
        "max_steps": 2,
        "output_dir": str(tmp_path / "run"),
        "tiny_models_dir": str(tmp_path / "models"),
        "report_to": ["none"],
        "data": {"dataset": "synthetic:visual", "num_problems": 12, "difficulty": 0.2},
        "trainer": {"learning_rate": 1e-3},
        **overrides,
    }
    return load_config(data, cls)


def _vision_weights(path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    weights = load_file(Path(path) / "model.safetensors")
    return {k: v for k, v in weights.items() if "vision" in k or "visual" in k}


def test_vlm_cohort_of_two_families_trains_on_the_images(tmp_path):
    """``councilzoo train corl`` on two tiny VLM families: both train two steps, their vision
    towers move (only images reach them), and the saved models load as image-text-to-text. The
    first round mixes image sizes, so its prompts hold different numbers of image tokens (left
    padding and Qwen's M-RoPE positions must line up)."""
    from transformers import AutoModelForImageTextToText, AutoProcessor

    cfg = _cohort(tmp_path, [
        {"name": "qwen_vl", "tiny_family": "qwen2_5_vl", "view": 0},
        {"name": "idefics", "tiny_family": "idefics3", "view": 1},
    ], prompts_per_step=4)
    rows = problem_rows(load_items(cfg.data, cfg.seed), cfg.seed, 1, 4, lambda p: member_prompt(p, 0, True))
    assert len({r["images"][0].size for r in rows}) > 1
    config = tmp_path / "vlm.yaml"
    dump_config(cfg, config)
    assert main(["train", "corl", str(config), "--overwrite"]) == 0
    for index, member in enumerate(cfg.members):
        final = cfg.member_dir(index) / "final"
        AutoModelForImageTextToText.from_pretrained(final), AutoProcessor.from_pretrained(final)
        before, after = _vision_weights(member_model_path(cfg, index)), _vision_weights(final)
        assert before and any(not torch.equal(before[k], after[k]) for k in before), member.name
        lines = (cfg.member_dir(index) / "metrics.jsonl").read_text().splitlines()
        rows = [json.loads(line) for line in lines]
        assert [r["step"] for r in rows if "reward" in r] == [1, 2]


@pytest.mark.parametrize("learner, rule", [(GRPO, "ground_truth"), (TTRL, "self_majority")])
def test_supervised_grpo_and_ttrl_train_a_vlm_on_image_problems(tmp_path, learner, rule):
    held_out = {"dataset": "synthetic:visual", "split": "dev", "num_problems": 6, "eval_steps": 1}
    cfg = _cohort(tmp_path, [{"name": "vl", "tiny_family": "idefics3"}],
                  rule=rule, cls=BaselineConfig, prompts_per_step=4, eval=held_out)
    build_tiny_models(cfg, load_items(cfg.data, cfg.seed))
    row = run_member(cfg, 0, learner.reward_functions)
    assert row["reward"] == row["reward"]
    evals = [json.loads(line) for line in (cfg.member_dir(0) / "eval.jsonl").read_text().splitlines()]
    assert [e["step"] for e in evals] == [0, 1, 2]  # greedy accuracy on held-out image problems
    before, after = _vision_weights(member_model_path(cfg, 0)), _vision_weights(cfg.member_dir(0) / "final")
    assert any(not torch.equal(before[k], after[k]) for k in before)


def test_intrinsic_rewards_refuse_a_vlm_member_before_training(tmp_path):
    from councilzoo.learners.baselines import RENT

    cfg = _cohort(tmp_path, [{"name": "vl", "tiny_family": "idefics3", "tiny_warmup_steps": 0}],
                  rule="entropy", cls=BaselineConfig)
    build_tiny_models(cfg, load_items(cfg.data, cfg.seed))
    with pytest.raises(ValueError, match="text-only members"):
        run_member(cfg, 0, RENT.reward_functions)
    assert not list(cfg.member_dir(0).glob("checkpoint-*"))


def test_a_text_model_and_a_vlm_share_a_cohort(tmp_path):
    """The VLM member's rows carry the images; the text member's carry none and tell it so."""
    cfg = _cohort(tmp_path, [
        {"name": "text", "tiny_family": "qwen3", "view": 0},
        {"name": "vl", "tiny_family": "idefics3", "view": 1},
    ])
    problems = load_items(cfg.data, cfg.seed)
    text_rows = problem_rows(problems, 0, 1, 2, lambda p: member_prompt(p, 0, with_images=False))
    vlm_rows = problem_rows(problems, 0, 1, 2, lambda p: member_prompt(p, 1, with_images=True))
    assert all("images" not in r and unseen_images_note(1) in r["prompt"][1]["content"] for r in text_rows)
    assert all(len(r["images"]) == 1 for r in vlm_rows)
    config = tmp_path / "mixed.yaml"
    dump_config(cfg, config)
    assert main(["train", "corl", str(config), "--overwrite"]) == 0
    assert all((cfg.member_dir(i) / "final" / "model.safetensors").is_file() for i in range(2))


def test_every_protocol_evaluates_image_problems_with_a_tiny_vlm_anchor(tmp_path, monkeypatch):
    """README's VLM command (all protocols) on a fresh cache: every model is built offline on
    first use; COMED's anchor and probe are VLMs, one peer is text-only."""
    monkeypatch.setenv("COUNCILZOO_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "eval"
    argv = ["eval", "--protocol", "all", "--agents", str(CONFIGS / "demo_vlm_agents.yaml"),
            "--dataset", "synthetic:visual", "--limit", "20", "--out", str(out)]
    assert main(argv) == 0
    protocols = json.loads((out / "report.json").read_text())["protocols"]
    assert {"single", "self_consistency", "routing", "always_verify", "debate", "comed"} <= set(protocols)
    assert all(row["n"] == 20 and row["calls"] >= 1 for row in protocols.values())
