"""Co-RL and its baselines on TRL's GRPOTrainer: the cohort game as reward, config checks,
mixed precision, intrinsic rewards (in-process, single-member worlds)."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM

from councilzoo.config import ConfigError, load_config
from councilzoo.envs.rewards import compute_rewards
from councilzoo.learners.baselines import GRPO, INTUITOR, RENT, BaselineConfig
from councilzoo.learners.corl import CoRLConfig
from councilzoo.learners.corl.member import member_model_path, run_member
from councilzoo.learners.corl.reward import CohortReward
from councilzoo.learners.corl.rounds import problem_rows
from councilzoo.learners.data import load_items
from councilzoo.learners.train import apply_overrides
from councilzoo.tasks import Problem, extract_answer
from councilzoo.tiny_members import build_tiny_models

pytestmark = pytest.mark.slow
MEMBERS = [
    {"name": "qwen", "tiny_family": "qwen3", "view": 0},
    {"name": "llama", "tiny_family": "llama", "view": 1},
    {"name": "qwen_b", "tiny_family": "qwen3", "view": 2},
]


def make_config(out, n=2, rule="ring", cls=CoRLConfig, **overrides):
    data = {
        "members": MEMBERS[:n],
        "reward_rule": rule,
        "num_generations": 4,
        "prompts_per_step": 4,
        "max_completion_length": 12,
        "max_steps": 3,
        "output_dir": str(out),
        "data": {"dataset": "synthetic:multiple_choice", "num_problems": 32},
        "trainer": {"learning_rate": 1e-3},
    }
    return load_config({**data, **overrides}, cls)


class LocalLink:
    """The peers' side of the label exchange, played in-process: fixed own labels per key."""

    def __init__(self, peers: dict[int, dict[str, str | None]], me: int) -> None:
        self.peers, self.me, self.published = peers, me, {}

    def publish(self, round_index, labels):
        self.published[round_index] = dict(labels)

    def collect(self, round_index, keys):
        mine = self.published[round_index]
        n = 1 + len(self.peers)
        return {k: [mine[k] if j == self.me else self.peers[j][k] for j in range(n)] for k in keys}


class _Acc:
    num_processes, process_index, is_main_process = 1, 0, True


class _Trainer:
    accelerator = _Acc()


@pytest.mark.parametrize("rule, n", [("ring", 2), ("ring", 3), ("peer_majority", 3)])
def test_cohort_reward_is_the_games_rule_against_peer_labels(tmp_path, rule, n):
    cfg = make_config(tmp_path, n=n, rule=rule)
    views = {"paraphrases": ("Which one?", "Pick one.")}  # the members' views 1 and 2
    problems = [
        Problem("p1", "Which?", "B", "multiple_choice", ("w", "x", "y", "z"), metadata=views),
        Problem("p2", "Which?", "C", "multiple_choice", ("w", "x", "y", "z"), metadata=views),
    ]
    texts = {
        "p1": ["\\boxed{A}", "\\boxed{B}", "\\boxed{A}", "none"],
        "p2": ["\\boxed{C}"] * 2 + ["\\boxed{D}"] * 2,
    }
    peers = {j: {"p1": "B", "p2": "D"} for j in range(1, n)}
    link = LocalLink(peers, me=0)
    reward = CohortReward(cfg, 0, problems, link)
    reward.bind(_Trainer())
    keys = [k for k in texts for _ in range(4)]
    completions = [[{"role": "assistant", "content": t}] for k in texts for t in texts[k]]
    logged = {}
    got = reward(None, completions, keys, keys, [0] * 8, log_metric=logged.__setitem__)
    expected = []
    for key in texts:
        answers = [[extract_answer(t, "multiple_choice") for t in texts[key]]] + [
            [peers[j][key]] for j in range(1, n)
        ]
        expected += compute_rewards(rule, answers, "multiple_choice").rewards[0]
    assert got == expected
    assert link.published[0] == {"p1": "A", "p2": "C"}  # own plurality, first seen on ties
    assert all(p.answer is None for p in reward.problems.values())  # the game never sees gold
    assert logged["label_accuracy"] == 0.5  # diagnostics do: labels B (right) and D (wrong)


class _CutTrainer(_Trainer):
    eos_token_ids, processing_class = [2], type("Tokenizer", (), {"pad_token_id": 0})


def test_a_completion_cut_at_the_token_limit_gives_no_answer_from_its_unfinished_end(tmp_path):
    cfg = make_config(tmp_path, n=1, rule="self_majority", cls=BaselineConfig)
    problem = Problem("p1", "What is 2 + 2?", "4", "numeric")
    reward = CohortReward(cfg, 0, [problem], LocalLink({}, me=0))
    reward.bind(_CutTrainer())
    texts = ["The answer is 4.", "So the answer is 4 + 6", "The answer is 5.", "So the answer is 5 + 1"]
    ids = [[7, 8, 2], [7, 8, 9], [7, 8, 2], [7, 8, 9]]  # the 2nd and 4th stop at the limit, without EOS
    completions = [[{"role": "assistant", "content": t}] for t in texts]
    rewards = reward(None, completions, ["p1"] * 4, ["p1"] * 4, [0] * 4, completion_ids=ids)
    assert reward.last_round["answers"]["p1"] == ["4", None, "5", None]
    assert rewards == [1.0, 0.0, 0.0, 0.0]  # before, the game re-read the cut "4 + 6" as 4 and paid it
    reward(None, completions, ["p1"] * 4, ["p1"] * 4, [1] * 4)  # no ids (outside TRL): read whole
    assert reward.last_round["answers"]["p1"] == ["4", "4", "5", "5"]


def test_rows_follow_rounds_and_carry_no_gold(tmp_path):
    problems = load_items(make_config(tmp_path).data, 0)
    rows = problem_rows(problems, 0, rounds=3, per_round=4, render=lambda p: p.question)
    assert [r["round"] for r in rows] == [0] * 4 + [1] * 4 + [2] * 4
    assert {"prompt", "problem_id", "problem_key", "round"} == set(rows[0])
    again = problem_rows(problems, 0, rounds=3, per_round=4, render=lambda p: p.question)
    assert rows == again


@pytest.mark.parametrize(
    "trainer, message",
    [
        ({"learning_rat": 1e-3}, "not a GRPOConfig field"),
        ({"max_steps": 3}, "set by the learner"),
        ({"top_k": 5, "seeded": True}, r"seeded_sampling does not apply trainer settings \['top_k'\]"),
        (
            {"repetition_penalty": 1.1, "seeded": True},
            r"does not apply trainer settings \['repetition_penalty'\]",
        ),
    ],
)
def test_bad_trainer_settings_fail_before_work(tmp_path, trainer, message):
    trainer = dict(trainer)
    seeded = trainer.pop("seeded", False)
    with pytest.raises(ConfigError, match=message):
        make_config(tmp_path, trainer=trainer, seeded_sampling=seeded)


def test_seeded_sampling_takes_every_generation_backend(tmp_path):
    for trainer in ({}, {"use_vllm": True}, {"use_vllm": True, "vllm_mode": "server"}):
        assert make_config(tmp_path, trainer=trainer, seeded_sampling=True).seeded_sampling


def test_set_overrides_reach_nested_and_listed_keys():
    data = {"members": [{"name": "a"}, {"name": "b"}], "trainer": {}}
    apply_overrides(data, ["members.1.view=2", "trainer.learning_rate=1e-6", "max_steps=7"])
    assert data == {
        "members": [{"name": "a"}, {"name": "b", "view": 2}],
        "trainer": {"learning_rate": 1e-6},
        "max_steps": 7,
    }
    with pytest.raises(ConfigError, match="not an index"):
        apply_overrides(data, ["members.5.view=1"])


def _train_alone(tmp_path, learner, rule, **overrides):
    cfg = make_config(tmp_path, n=1, rule=rule, cls=BaselineConfig, **overrides)
    build_tiny_models(cfg, load_items(cfg.data, cfg.seed))
    before = AutoModelForCausalLM.from_pretrained(member_model_path(cfg, 0)).state_dict()
    row = run_member(cfg, 0, learner.reward_functions)
    after = AutoModelForCausalLM.from_pretrained(cfg.member_dir(0) / "final").state_dict()
    return row, before, after


def test_bf16_mixed_precision_keeps_fp32_master_weights(tmp_path):
    """10 steps at lr 1e-6 in bf16 autocast: every weight that gets a gradient moves (pure-bf16
    AdamW would round ~98% of these updates away). Input-embedding rows of tokens never seen get
    an exact zero gradient, so the embedding is left out of the count."""
    row, before, after = _train_alone(
        tmp_path, GRPO, "ground_truth", max_steps=10, trainer={"bf16": True, "learning_rate": 1e-6}
    )
    assert all(after[k].dtype == torch.float32 for k in after)
    keys = [k for k in before if "embed_tokens" not in k]
    changed = sum(int((after[k] != before[k]).sum()) for k in keys) / sum(before[k].numel() for k in keys)
    assert changed >= 0.99, changed


@pytest.mark.parametrize("learner, rule", [(RENT, "entropy"), (INTUITOR, "self_certainty")])
def test_intrinsic_rewards_train(tmp_path, learner, rule):
    row, before, after = _train_alone(tmp_path, learner, rule, max_steps=2)
    assert row["reward"] == row["reward"]  # a finite intrinsic score was logged
    assert any(not torch.equal(before[k], after[k]) for k in before)


def test_baseline_refuses_another_rule(tmp_path):
    with pytest.raises(ConfigError, match="needs 'ground_truth'"):
        GRPO(make_config(tmp_path, n=1, rule="self_majority", cls=BaselineConfig))
