"""Co-RL and its baselines on tiny models: updates, reward independence, resume, learning."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from councilzoo.config import load_config
from councilzoo.learners.baselines import Baseline, BaselineConfig
from councilzoo.learners.corl import CoRL, CoRLConfig, cohort_rewards
from councilzoo.learners.logging import read_metrics

MEMBERS = [
    {"name": "qwen", "tiny_family": "qwen3", "view": 0},
    {"name": "llama", "tiny_family": "llama", "view": 1},
    {"name": "qwen_b", "tiny_family": "qwen3", "view": 2},
]


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """Tiny models run fastest single-threaded (and the test machine is shared)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory):
    return tmp_path_factory.mktemp("corl-models")


def make_config(tiny_models, out, n=2, rule="ring", cls=CoRLConfig, **overrides):
    data = {
        "members": MEMBERS[:n],
        "reward_rule": rule,
        "num_generations": 4,
        "prompts_per_step": 6,
        "max_new_tokens": 12,
        "max_steps": 3,
        "seed": 0,
        "output_dir": str(out),
        "tiny_models_dir": str(tiny_models),
        "data": {"dataset": "synthetic:multiple_choice", "num_problems": 32},
        "policy": {"learning_rate": 1e-3},
    }
    return load_config({**data, **overrides}, cls)


@pytest.mark.parametrize("n, rule", [(2, "ring"), (3, "ring"), (3, "peer_majority")])
def test_one_step_changes_every_members_weights(tiny_models, tmp_path, n, rule):
    learner = CoRL(make_config(tiny_models, tmp_path, n=n, rule=rule))
    before = [{k: v.clone() for k, v in m.model.state_dict().items()} for m in learner.members]
    row = learner.step()
    for member, old in zip(learner.members, before, strict=True):
        assert row[f"{member.cfg.name}/grad_norm"] > 0
        changed = [k for k, v in member.model.state_dict().items() if not torch.equal(v, old[k])]
        assert changed, f"{member.cfg.name} was not updated"
    assert 0.0 <= row["agreement"] <= 1.0 and 0.0 <= row["label_accuracy"] <= 1.0


ANSWERS = st.lists(st.sampled_from(["A", "B", "C", None]), min_size=4, max_size=4)


@given(
    st.sampled_from(["ring", "peer_majority"]),
    st.integers(2, 4).flatmap(lambda n: st.lists(ANSWERS, min_size=n, max_size=n)),
    st.integers(0, 3),
    st.data(),
)
def test_reward_never_depends_on_own_label_or_gold(rule, answers, g, data):
    """Sample g of member n keeps its reward when n's other samples (hence n's own label) or the
    gold answer change, in both the all-local and the exchanged-labels form."""
    from councilzoo.envs.rewards import own_label

    n = data.draw(st.integers(0, len(answers) - 1))
    own = [own_label(a, "multiple_choice") for a in answers]
    base = cohort_rewards(rule, answers, own, "multiple_choice", gold="A")
    other = [list(a) for a in answers]
    other[n] = [
        answers[n][i] if i == g else data.draw(st.sampled_from(["A", "B", "C", None])) for i in range(4)
    ]
    other_own = [own_label(a, "multiple_choice") for a in other]
    changed = cohort_rewards(
        rule, other, other_own, "multiple_choice", gold=data.draw(st.sampled_from(["B", None]))
    )
    assert changed.rewards[n][g] == base.rewards[n][g]
    remote = [a if j == n else None for j, a in enumerate(answers)]  # multi-process form
    assert cohort_rewards(rule, remote, own, "multiple_choice").rewards[n] == base.rewards[n]


def test_corl_step_is_blind_to_gold(tiny_models, tmp_path):
    """Stripping every gold answer changes no reward, loss or weight: gold is only a diagnostic."""
    rows, weights = [], []
    for strip in (False, True):
        learner = CoRL(make_config(tiny_models, tmp_path / str(strip)))
        if strip:
            learner.problems = [dataclasses.replace(p, answer=None) for p in learner.problems]
        rows.append(learner.step())
        weights.append([m.model.state_dict() for m in learner.members])
    for key in ("qwen/reward", "llama/reward", "qwen/grad_norm", "llama/grad_norm", "agreement"):
        assert rows[0][key] == rows[1][key]
    for a, b in zip(weights[0], weights[1], strict=True):
        assert all(torch.equal(a[k], b[k]) for k in a)


def test_resume_gives_the_same_next_step(tiny_models, tmp_path):
    straight = CoRL(make_config(tiny_models, tmp_path / "straight"))
    expected = straight.train(max_steps=3)[-1]
    first = CoRL(make_config(tiny_models, tmp_path / "resumed"))
    first.train(max_steps=2)  # saves a checkpoint at the end, as after an interruption
    second = CoRL(make_config(tiny_models, tmp_path / "resumed"))
    got = second.train(max_steps=3, resume=True)
    assert len(got) == 1 and second.step_count == 3
    for key in ("qwen/loss", "qwen/grad_norm", "qwen/reward", "llama/loss", "llama/grad_norm", "agreement"):
        assert got[0][key] == pytest.approx(expected[key], abs=1e-6), key
    for a, b in zip(straight.members, second.members, strict=True):
        sa, sb = a.model.state_dict(), b.model.state_dict()
        assert all(torch.allclose(sa[k], sb[k], atol=1e-6) for k in sa)
    rows = read_metrics(tmp_path / "resumed" / "metrics.jsonl")
    assert [r["step"] for r in rows] == [1, 2, 3]
    assert (tmp_path / "resumed" / "config.yaml").is_file() and (tmp_path / "resumed" / "run.json").is_file()


@pytest.mark.parametrize("rule", ["ground_truth", "self_majority", "entropy", "self_certainty"])
def test_baselines_step(tiny_models, tmp_path, rule):
    learner = Baseline(make_config(tiny_models, tmp_path, n=1, rule=rule, cls=BaselineConfig))
    row = learner.step()
    assert row["qwen/grad_norm"] > 0 or row["qwen/reward"] in (0.0, 1.0)
    if rule in ("entropy", "self_certainty"):
        assert row["qwen/reward"] != 0.0


@pytest.mark.slow
def test_rent_mean_reward_rises(tiny_models, tmp_path):
    """A random tiny model can learn to be confident: RENT's reward (-token entropy) rises."""
    cfg = make_config(
        tiny_models,
        tmp_path,
        n=1,
        rule="entropy",
        cls=BaselineConfig,
        max_steps=20,
        members=[{"name": "raw", "tiny_family": "qwen3", "tiny_warmup_steps": 0}],
        policy={"learning_rate": 1e-2},
    )
    rewards = [row["reward"] for row in Baseline(cfg).train()]
    assert sum(rewards[-5:]) / 5 > sum(rewards[:5]) / 5 + 0.2
