"""Problems with images through prompts, games, agents and episode logs (no model needed here;
tests/test_vlm.py runs the tiny vision-language models)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image

from councilzoo.agents import SimulatedAgent
from councilzoo.agents.base import accepts_images
from councilzoo.agents.generators.chat_template import render_prompt
from councilzoo.agents.generators.checks import check_request
from councilzoo.agents.generators.images import message_images
from councilzoo.agents.prompts import render_messages, unseen_images_note
from councilzoo.envs import make
from councilzoo.envs.types import Mode, TurnContext
from councilzoo.learners.corl.rounds import problem_rows, split_images
from councilzoo.rollout import EpisodeLog, RolloutEngine
from councilzoo.tasks import Problem
from councilzoo.tasks.images import ImageError, image_digest, load_image


def picture(seed: int, size: int = 24) -> Image.Image:
    pixels = np.random.default_rng(seed).integers(0, 255, (size, size, 3), dtype=np.uint8)
    return Image.fromarray(pixels, "RGB")


def visual_problems(n: int = 4) -> list[Problem]:
    return [
        Problem(f"v{i}", f"How many dots are in the image? ({i})", str(i % 3), kind="numeric",
                images=(picture(i), picture(100 + i)))
        for i in range(n)
    ]


def context(problem: Problem, role: str = "anchor") -> TurnContext:
    return TurnContext(0, role, role, 0, problem, (), (Mode.ANSWER,), np.zeros(0, np.float32))


def test_prompt_puts_images_ahead_of_the_question_and_a_note_for_text_models():
    problem = visual_problems(1)[0]
    with_images = render_messages(context(problem))
    parts = with_images[1]["content"]
    assert [p["type"] for p in parts] == ["image", "image", "text"]
    assert parts[0]["image"] is problem.images[0] and problem.question in parts[2]["text"]
    assert [image_digest(i) for i in message_images(with_images)] == [image_digest(i) for i in problem.images]
    text_only = render_messages(context(problem), with_images=False)
    assert isinstance(text_only[1]["content"], str)
    assert text_only[1]["content"].startswith(unseen_images_note(2))
    text_problem = Problem("t", "1+1?", "2", kind="numeric")
    assert isinstance(render_messages(context(text_problem))[1]["content"], str)


def test_request_checks_accept_image_parts_and_name_bad_ones():
    problem = visual_problems(1)[0]
    check_request([render_messages(context(problem))], 1, None)
    bad = [{"role": "user", "content": [{"type": "image", "image": 3}]}]
    with pytest.raises(TypeError, match="content parts"):
        check_request([bad], 1, None)


def test_text_tokenizer_refuses_image_parts_but_reads_text_parts(tiny_model_dir):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    problem = visual_problems(1)[0]
    with pytest.raises(ValueError, match="text-only"):
        render_prompt(tokenizer, render_messages(context(problem)))
    parts = [{"role": "user", "content": [{"type": "text", "text": "hello"}]}]
    assert render_prompt(tokenizer, parts) == render_prompt(tokenizer, [{"role": "user", "content": "hello"}])


def test_trl_rows_hold_text_prompts_and_an_images_column():
    problems = visual_problems(3)
    rows = problem_rows(problems, 0, 1, 3, lambda p: render_messages(context(p)))
    for row in rows:
        assert all(isinstance(m["content"], str) for m in row["prompt"])
        assert len(row["images"]) == 2 and all(isinstance(i, Image.Image) for i in row["images"])
    messages, images = split_images(render_messages(context(problems[0])))
    assert [image_digest(i) for i in images] == [image_digest(i) for i in problems[0].images]


def test_games_show_image_placeholders_and_turn_contexts_carry_the_images():
    problems = visual_problems(2)
    for env_id in ("councilzoo/debate-v0", "councilzoo/review-v0", "councilzoo/escalation-v0"):
        env = make(env_id, problems=problems)
        env.reset(seed=0)
        agent = env.agent_selection
        obs = env.observe(agent)
        assert "Images: <image 1> <image 2>" in obs["transcript"]
        assert env.observation_space(agent)["transcript"].contains(obs["transcript"])
        assert env.unwrapped.turn_context(agent).images == env.unwrapped.problem.images


def test_simulated_council_plays_image_problems_and_the_log_round_trips(tmp_path):
    problems = visual_problems(4)
    agents = {f"peer_{i}": SimulatedAgent(f"peer_{i}", skill=0.7, seed=i) for i in range(3)}
    engine = RolloutEngine("councilzoo/debate-v0", agents, num_envs=2, progress=False)
    records = engine.run(problems, episodes_per_problem=1)
    assert len(records) == 4 and all(len(r.images) == 2 for r in records)
    log_path = tmp_path / "episodes.jsonl"
    with EpisodeLog(log_path) as log:
        for k, record in enumerate(records):
            log.append((record.problem_id, k), record)
    line = json.loads(log_path.read_text().splitlines()[0])
    assert all(ref.endswith(".png") for ref in line["images"])  # paths, never pickled pixels
    loaded = EpisodeLog(log_path).load()
    for k, record in enumerate(records):
        again = loaded[(record.problem_id, k)]
        assert [image_digest(i) for i in again.images] == [image_digest(i) for i in record.images]
        assert again.final_answer == record.final_answer and again.turns == record.turns


def test_problem_dict_round_trip_and_bad_images(tmp_path):
    problem = visual_problems(1)[0]
    data = Problem.to_dict(problem, image_dir=tmp_path)
    json.dumps(data)
    again = Problem.from_dict(data)
    assert [image_digest(i) for i in again.images] == [image_digest(i) for i in problem.images]
    assert Problem.to_dict(problem)["images"][0].startswith("sha256:")
    with pytest.raises(ImageError, match="content hash only"):
        load_image(Problem.to_dict(problem)["images"][0])
    with pytest.raises(ImageError, match="does not exist"):
        load_image(tmp_path / "missing.png")
    (tmp_path / "broken.png").write_bytes(b"not a png")
    with pytest.raises(ImageError, match="not a readable image"):
        load_image(tmp_path / "broken.png")
    with pytest.raises(ImageError, match="over the limit"):
        load_image(Image.new("RGB", (300, 300)), max_pixels=10_000)
    with pytest.raises(TypeError, match="PIL image or a file path"):
        Problem("x", "q", "1", images=(42,))


def test_generators_without_the_attribute_are_text_only():
    class Plain:
        def generate(self, prompts, n=1, sampling=None):
            return []

    assert not accepts_images(Plain())
