"""``councilzoo repro tracer``: prompt formats of the tiny-LM part, and the quick run's report."""

from __future__ import annotations

import json

import pytest

from councilzoo.agents.prompts import render_messages
from councilzoo.envs import review_v0
from councilzoo.envs.types import Action, Mode
from councilzoo.repro import tracer
from councilzoo.repro.tiny_lms import MAX_NEW_TOKENS, addition_problems, solver_messages, tiny_lm
from councilzoo.repro.tracer import (
    CONTROL,
    LABEL_FREE,
    LM_REVIEWER,
    LM_ROUNDS,
    lm_agents,
    resolved_verdict,
    sft_messages,
)
from councilzoo.repro.verdicts import HELD, INCONCLUSIVE, NOT_HELD, conjunction, part_status
from councilzoo.tasks import answers_equivalent, extract_answer, load_problems


def test_sft_messages_are_the_formats_the_tiny_lms_were_trained_on():
    problem = addition_problems("test", 1)[0]
    env = review_v0.raw_env(problems=[problem])
    env.reset(options={"problem": problem})
    first = env.turn_context("proposer_0")
    assert sft_messages(first) == solver_messages(problem, "proposer") == render_messages(first)
    env.step(Action(Mode.REFRESH, text="The answer is \\boxed{12}.", answer="12"))
    review = env.turn_context("reviewer_0")
    assert sft_messages(review) == solver_messages(problem, "peer")  # re-solves without the proposal
    env.step(Action(Mode.SPEAK, text="Verdict: WRONG", verdict="WRONG"))
    # A later REFRESH: review-v0 shows the proposal and the review; the solver never saw that.
    again = env.turn_context("proposer_0")
    assert render_messages(again) != solver_messages(problem, "proposer")
    assert sft_messages(again) == solver_messages(problem, "proposer")


def test_resolved_verdict_compares_the_reviewers_answer_with_the_proposal():
    assert resolved_verdict("The answer is \\boxed{68}.", "68", "numeric") == "RIGHT"
    assert resolved_verdict("The answer is \\boxed{68}.", "68.0", "numeric") == "RIGHT"  # equivalent
    assert resolved_verdict("The answer is \\boxed{68}.", "67", "numeric") == "WRONG"
    assert resolved_verdict("The answer is \\boxed{68}.", None, "numeric") == "WRONG"  # unreadable proposal
    assert resolved_verdict("no idea", "68", "numeric") is None  # no answer of its own: no verdict


@pytest.mark.slow
def test_resolving_reviewer_judges_proposals_by_its_own_tiny_lm_answer():
    """Played in review-v0 with the quick tiny LM: every verdict is what its own answer implies."""
    from councilzoo.agents.generators.transformers_backend import TransformersGenerator

    gen = TransformersGenerator(tiny_lm(LM_REVIEWER))
    reviewer = lm_agents({"proposer": gen, "reviewer": gen}, seed=0)["reviewer"]
    problems = addition_problems("test", 12)
    envs = [review_v0.raw_env(problems=[p]) for p in problems]
    for i, (env, p) in enumerate(zip(envs, problems, strict=True)):
        env.reset(options={"problem": p})
        shown = p.answer if i % 2 else p.metadata["distractors"][0]
        env.step(Action(Mode.REFRESH, text=f"The answer is \\boxed{{{shown}}}.", answer=shown))
    actions = reviewer.act([env.turn_context("reviewer_0") for env in envs])
    assert any(a.verdict is not None for a in actions)  # the quick model writes readable answers
    for i, (action, env) in enumerate(zip(actions, envs, strict=True)):
        shown = problems[i].answer if i % 2 else problems[i].metadata["distractors"][0]
        own = extract_answer(action.text, "numeric")
        expected = None if own is None else "RIGHT" if answers_equivalent(own, shown, "numeric") else "WRONG"
        assert action.mode is Mode.SPEAK and action.verdict == expected
        env.step(action)
        assert env.transcript[-1].verdict == expected  # the env records the reviewer's verdict


@pytest.mark.slow
def test_quick_repro_writes_report_figures_and_computed_verdicts(quick_repro):
    out = quick_repro / "tracer"
    result = json.loads((out / "report.json").read_text())
    assert (out / "report.md").is_file() and (out / "report.json").is_file()
    assert all((out / f).is_file() and (out / f).stat().st_size > 1000 for f in result["figures"])
    res = result["results"]
    parts = {p["part"]: p["status"] for p in res["parts"]}
    assert set(parts) >= {"simulated", "tiny_lm", "utterance"}
    assert result["verdict"]["status"] == conjunction(parts.values())
    for part in parts:  # every part's status follows from its labelled checks
        assert parts[part] == part_status({r["check"]: r for r in res["checks"] if r["part"] == part})

    # Simulated part.
    assert res["all_states_within_bound"] and res["max_regret_over_bound"] <= 1.0
    rows = res["protocols"]
    assert {r["protocol"] for r in rows} == {"tracer", "always_speak", "never_review"}
    assert all(len(r["objective_ci"]) == 2 for r in rows)
    simulated = {r["check"]: r for r in res["checks"] if r["part"] == "simulated"}
    assert simulated["regret_within_bound"]["kind"] == "extension"  # true for any payoff sequence
    if min(res["mean_gap_to_best_fixed"].values()) <= -0.02:
        assert parts["simulated"] != HELD

    # Tiny-LM part: the fixed protocols cost what their rules say, the verdict follows the numbers.
    lm = {r["protocol"]: r for r in res["tiny_lm_protocols"]}
    assert lm["always_speak"]["calls_per_question"] == LM_ROUNDS
    assert lm["never_review"]["calls_per_question"] == 1
    assert 1 <= lm["tracer"]["calls_per_question"] <= LM_ROUNDS
    assert all(0 <= r["accuracy"] <= 1 and len(r["accuracy_ci"]) == 2 for r in lm.values())
    check = res["tiny_lm_check"][0]
    assert check["calls_gap"] == pytest.approx(lm["tracer"]["calls_per_question"] - LM_ROUNDS)
    assert check["accuracy_gap"] == pytest.approx(lm["tracer"]["accuracy"] - lm["always_speak"]["accuracy"])
    assert (check["fewer_calls"] == HELD) == (check["calls_gap_ci"][1] < 0)
    assert (check["accuracy_not_worse"] == HELD) == (check["accuracy_gap_ci"][0] > -0.02)
    assert parts["tiny_lm"] == conjunction([check["fewer_calls"], check["accuracy_not_worse"]])
    assert {r["role"] for r in res["tiny_lm_learned_policy"]} <= {"proposer", "reviewer"}

    # Utterance part: the gold arms (the label-free ones run in their own command, below).
    _check_utterance(res, parts["utterance"], ("gspo",))
    reasons = {p["part"]: p["reason"] for p in res["parts"]}
    assert "councilzoo repro tracer-label-free" in reasons["utterance"]

    # Experiment A: the learned controllers against the exact team optimum, per level and step count.
    rows = res["team_optimum_curve"]
    # a one-role change cannot beat the in-sample team optimum: 0 <= exploitability <= its gap; the
    # optimum chosen on independent problems scores at most the in-sample one on the test problems
    assert rows
    assert all(-1e-12 <= r["exploitability"] <= r["optimum_in_sample"] - r["learned"] + 1e-12 for r in rows)
    assert all(r["learned"] <= r["optimum_in_sample"] + 1e-12 for r in rows)
    assert all(r["optimum"] <= r["optimum_in_sample"] + 1e-12 for r in rows)
    assert (out / "team_optimum.png").stat().st_size > 1000


def _check_utterance(res: dict, status: str, trained: tuple[str, ...]) -> None:
    """The utterance part's arms at equal episodes; its verdict and differences follow the rows."""
    arms = {r["arm"]: r for r in res["utterance_arms"]}
    assert set(arms) == {"controllers_only", *trained}
    assert "candidate_reward_first_step" not in arms["controllers_only"]
    assert "clipped_fraction" not in arms["controllers_only"]
    for arm in trained:
        assert -1.0 <= arms[arm]["candidate_reward_last_step"] <= 1.0
        assert 0.0 <= arms[arm]["clipped_fraction"] <= 1.0  # GSPO's clip in each round's later updates
        assert arms[arm]["updates"] > 0 and 0 < arms[arm]["completion_length"] <= MAX_NEW_TOKENS
    for arm in set(trained) & set(LABEL_FREE):
        assert 0.0 <= arms[arm]["label_accuracy"] <= 1.0
    gaps = {(d["arm"], d["metric"]): d for d in res["utterance_vs_controllers_only"]}
    for arm in trained:  # metrics every seed has (correction may be undefined)
        for metric in ("first_proposal_accuracy", "accuracy", "calls_per_question"):
            expected = arms[arm][metric] - arms["controllers_only"][metric]
            assert gaps[(arm, metric)]["difference"] == pytest.approx(expected)
    first = gaps[("gspo", "first_proposal_accuracy")]
    check = res["utterance_check"][0]
    assert (check["first_proposal_raised"] == HELD) == (first["ci"][0] > 0)
    assert (check["accuracy_not_worse"] == HELD) == (gaps[("gspo", "accuracy")]["ci"][0] > -0.02)
    assert status == conjunction([check["first_proposal_raised"], check["accuracy_not_worse"]])


@pytest.mark.slow
def test_label_free_command_runs_every_arm_on_the_gold_arms_seeds(quick_repro, tmp_path):
    from councilzoo.repro import run_claim

    run_claim("tracer-label-free", tmp_path, quick=True)
    report = json.loads((tmp_path / "tracer_label_free" / "report.json").read_text())
    res = report["results"]
    assert [p["part"] for p in res["parts"]] == ["utterance"]
    _check_utterance(res, report["verdict"]["status"], ("gspo", *LABEL_FREE, CONTROL))
    arms = {r["arm"]: r for r in res["utterance_arms"]}
    assert arms[CONTROL]["updates"] == arms["gspo"]["updates"]  # equal compute: the same updates
    checks = {r["check"]: r for r in res["checks"]}
    assert {checks[f"{CONTROL}_{name}"]["kind"] for name in ("first_proposals_raised",
                                                             "final_accuracy_not_lower")} == {"control"}
    versus = {d["metric"]: d for d in res["gspo_vs_grpo_single"]}
    expected = arms["gspo"]["accuracy"] - arms[CONTROL]["accuracy"]
    assert versus["accuracy"]["difference"] == pytest.approx(expected)
    # the gold arms are `repro tracer`'s own cells: same seeds, same numbers
    tracer = json.loads((quick_repro / "tracer" / "report.json").read_text())["results"]
    gold = {r["arm"]: r for r in tracer["utterance_arms"]}
    assert [r for r in res["utterance_arms"] if r["arm"] in gold] == list(gold.values())


def test_the_clipped_fraction_counts_each_rounds_later_updates_only():
    from councilzoo.repro.tracer import _off_policy_clipped

    log = [{"clip_ratio/region_mean": v} for v in (0.0, 0.1, 0.0, 0.3)] + [{"reward": 0.5}]
    assert _off_policy_clipped(log, 2) == pytest.approx(0.2)  # the 2nd and 4th updates
    assert _off_policy_clipped(log, 0.25) is None  # a round every 4 steps: no update is off-policy
    assert _off_policy_clipped([], 2) is None


def test_the_team_optimum_is_chosen_on_independent_problems_and_scored_on_the_test_ones():
    """Experiment A's yardstick: chosen on its own (selection) problems, the table scores on the
    test problems at most the in-sample optimum, which fits the test problems' noise; the fixed
    policies and the learned one are scored against it on the same test problems."""
    sizes = {**tracer.QUICK, "opt_steps": (1,), "opt_problems": 8, "opt_test": 12, "opt_select": 24}
    cell = tracer.run_optimum_cell((0.7, 0, sizes))
    assert cell["optimum"] <= cell["optimum_in_sample"] + 1e-12
    assert cell["curve"][-1]["gap"] == pytest.approx(cell["optimum"] - cell["curve"][-1]["value"])
    assert len(cell["final_problem_gap"]) == 12
    def ids(seed, n):
        return {p.id for p in load_problems("synthetic:numeric", "test", seed=seed, limit=n, size=n)}

    assert not ids(tracer.SELECT_SEED, 24) & ids(0, 12)


# the single-agent GRPO control at small sizes: one round of 4 prompts x 4 completions
TINY = {**tracer.QUICK, "utt_steps": 1, "utt_problems": 4, "utt_episodes": 1, "utt_turns": 4,
        "utt_candidates": 4, "utt_test": 8}


def test_the_control_trains_its_proposer_alone_through_the_grpo_learner(tmp_path):
    """The proposer is trained by the ``grpo`` learner on gold rewards, with the ``gspo`` arm's
    updates a round, and its trained weights (not the shipped ones) are what the control plays."""
    from safetensors.torch import load_file

    shipped = tiny_lm(tracer.LM_PROPOSER)
    final, log = tracer.train_proposer_alone(0, TINY, shipped, tmp_path / "grpo")
    updates = [row for row in log if "loss" in row]
    assert len(updates) == TINY["utt_steps"] * tracer.UTT_MINIBATCHES
    assert all("rewards/ground_truth/mean" in row for row in log if "reward" in row)  # gold rewards
    assert [row["completions/mean_length"] <= MAX_NEW_TOKENS for row in log if "reward" in row] == [True]
    before, after = load_file(shipped / "model.safetensors"), load_file(final / "model.safetensors")
    assert before.keys() == after.keys()
    assert any(not after[k].float().equal(before[k].float()) for k in before)


@pytest.mark.slow
def test_the_control_is_played_and_graded_like_the_other_arms():
    """Its cell reports what every arm's does, from the same evaluation (same test problems, same
    controllers' training, same metrics), and its training figures on the role reward's scale."""
    paths = {"proposer": tiny_lm(tracer.LM_PROPOSER), "reviewer": tiny_lm(LM_REVIEWER)}
    control = tracer.run_utterance_cell(CONTROL, 0, TINY, paths)
    alone = tracer.run_utterance_cell("controllers_only", 0, TINY, paths)
    trained = {"candidate_reward", "clipped_fraction", "updates", "completion_length"}
    assert set(control) == set(alone) | trained
    assert control["updates"] == TINY["utt_steps"] * tracer.UTT_MINIBATCHES
    assert all(-1.0 <= r <= 1.0 for r in control["candidate_reward"])
    assert 1 <= control["calls_per_question"] <= LM_ROUNDS and 0 <= control["accuracy"] <= 1


def _gap(arm: str, metric: str, lo: float, hi: float) -> dict:
    return {"arm": arm, "metric": metric, "difference": (lo + hi) / 2, "ci": (lo, hi)}


def test_the_single_agent_control_goes_through_the_utterance_rules_as_a_control():
    """Registered 2026-12-07 as a ``control``: the gspo arm's two rules applied to the proposer
    trained alone, reported and never deciding; the part stays the paper checks' conjunction."""
    paper = {("gspo", "first_proposal_accuracy"): _gap("gspo", "first_proposal_accuracy", 0.01, 0.05),
             ("gspo", "accuracy"): _gap("gspo", "accuracy", -0.01, 0.04)}
    assert set(tracer.utterance_checks(paper)) == {"first_proposals_raised", "final_accuracy_not_lower"}
    for first, final, statuses in (((0.02, 0.06), (-0.01, 0.03), (HELD, HELD)),
                                   ((-0.05, -0.01), (-0.08, -0.03), (NOT_HELD, NOT_HELD)),
                                   ((-0.01, 0.03), (-0.04, 0.01), (INCONCLUSIVE, INCONCLUSIVE))):
        gaps = {**paper, (CONTROL, "accuracy"): _gap(CONTROL, "accuracy", *final),
                (CONTROL, "first_proposal_accuracy"): _gap(CONTROL, "first_proposal_accuracy", *first)}
        checks = tracer.utterance_checks(gaps)
        rules = ("first_proposals_raised", "final_accuracy_not_lower")
        controls = [checks[f"{CONTROL}_{rule}"] for rule in rules]
        assert [c["kind"] for c in controls] == ["control", "control"]
        assert tuple(c["status"] for c in controls) == statuses
        assert part_status(checks) == HELD  # the gspo arm's checks alone decide
    # the control runs at 8 seeds in its own command, not in `repro tracer` (whose budget is full)
    from councilzoo.repro import tracer_label_free

    assert tracer.FULL["utt_control_seeds"] == 0
    assert tracer_label_free.FULL["utt_control_seeds"] == tracer.FULL["utt_seeds"] == 8
