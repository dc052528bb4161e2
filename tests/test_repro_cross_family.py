"""The cross-family experiment's rules (``councilzoo.repro.cross_family``), decided by code from the
numbers: Cohen's kappa, the diversity change, C1-C4 and the power calculation; and its --quick
pipeline check on both real models (real tier)."""

from __future__ import annotations

import numpy as np
import pytest

from councilzoo.repro import cross_family as cf


def test_cohen_kappa_is_one_for_agreement_zero_for_independence_and_negative_for_opposition():
    a = np.array([1, 1, 0, 0, 1, 0, 1, 0], bool)
    assert cf.cohen_kappa(a, a) == pytest.approx(1.0)
    assert cf.cohen_kappa(a, ~a) == pytest.approx(-1.0)
    b = np.array([1, 0, 1, 0, 1, 0, 1, 0], bool)  # agrees on 6 of 8 at chance 0.5: (0.75 - 0.5) / 0.5
    assert cf.cohen_kappa(a, b) == pytest.approx(0.5)
    assert np.isnan(cf.cohen_kappa(np.ones(4, bool), np.ones(4, bool)))


def test_error_agreement_counts_items_both_get_wrong_with_the_same_answer():
    gold = ["1", "2", "3", "4"]
    agreement = cf.error_agreement(["1", "5", "6", None], ["1", "5", "7", None], gold)
    assert agreement["both_wrong_same_answer"] == pytest.approx(0.25)  # "5"; a shared None is no answer


def test_diversity_change_is_last_quarter_minus_first_quarter():
    assert cf.diversity_change([4, 4, 3, 3, 2, 2, 1, 1]) == pytest.approx(-3.0)
    assert cf.diversity_change([2, None, 2, 2]) == pytest.approx(0.0)


@pytest.mark.parametrize(
    ("differences", "status"),
    [({"two samples": [0.3, 0.1, 0.5], "two paraphrases": [0.2, 0.05, 0.4]}, "HELD"),
     ({"two samples": [0.3, 0.1, 0.5], "two paraphrases": [-0.3, -0.5, -0.1]}, "NOT HELD"),
     ({"two samples": [0.3, -0.1, 0.5], "two paraphrases": [0.2, 0.05, 0.4]}, "INCONCLUSIVE")],
)
def test_c1_needs_every_within_family_kappa_above_the_cross_family_one(differences, status):
    assert cf.decide_c1(differences)[0] == status


def test_c2_holds_when_ttrl_loses_diversity_and_corl_keeps_more():
    assert cf.decide_c2([0.0, 0.1, -0.1, 0.05], [-1.0, -1.2, -0.8, -1.1])[0] == "HELD"
    assert cf.decide_c2([-2.0, -2.2, -1.8, -2.1], [-1.0, -1.2, -0.8, -1.1])[0] == "NOT HELD"
    assert cf.decide_c2([0.0, 0.1, -0.1, 0.05], [0.0, 0.2, -0.2, 0.1])[0] == "INCONCLUSIVE"


def test_c3_needs_every_member_to_gain_over_its_base():
    assert cf.decide_c3({"smollm2": [0.1, 0.12, 0.08], "gemma": [0.05, 0.06, 0.04]})[0] == "HELD"
    assert cf.decide_c3({"smollm2": [0.1, 0.12, 0.08], "gemma": [-0.05, -0.06, -0.04]})[0] == "NOT HELD"
    assert cf.decide_c3({"smollm2": [0.1, 0.12, 0.08], "gemma": [0.1, -0.1, 0.0]})[0] == "INCONCLUSIVE"


def test_c4_is_described_against_the_margin_with_the_papers_deltas_beside_it():
    c4 = cf.describe_c4([0.50, 0.52, 0.51], [0.49, 0.50, 0.50], [0.40, 0.42, 0.38])
    assert c4["cross minus same"]["within_margin"] and c4["cross minus same"]["mean"] == pytest.approx(0.11)
    assert c4["paper"]["different family"] == [1.2, 0.6, 1.4, 0.7]


def test_seeds_for_power_grows_with_noise_and_shrinks_with_the_effect():
    few, many = cf.seeds_for_power(sd=0.02, effect=0.05), cf.seeds_for_power(sd=0.05, effect=0.05)
    assert 2 <= few < many
    # with sd = effect, a two-sided 95% t test needs about 10 seeds for 80% power
    assert 9 <= many <= 11
    with pytest.raises(ValueError, match="effect must be > 0"):
        cf.seeds_for_power(sd=0.1, effect=0.0)


def test_each_arm_prompts_its_members_by_their_models_registered_setting():
    families = {arm: {model for _, model, _ in members} for arm, (_, _, members) in cf.ARMS.items()}
    assert families["corl_cross"] == {cf.SMOLLM2, cf.GEMMA} and families["corl_same"] == {cf.SMOLLM2}
    assert cf.member_settings(cf.GEMMA) == {"prompt_style": "few_shot", "stop": ["\nQuestion:"]}
    assert cf.member_settings(cf.SMOLLM2) == {"prompt_style": "concise", "stop": []}
    assert set(cf.DROP_FIRST) <= set(cf.ARMS) and set(cf.QUICK["arms"]) <= set(cf.ARMS)


def test_the_training_level_is_the_lowest_where_both_models_are_in_the_useful_band():
    def accuracy(smollm2, gemma):
        levels = (0.0, 0.25, 0.5)
        return {cf.SMOLLM2: {str(lv): {"greedy": a} for lv, a in zip(levels, smollm2, strict=True)},
                cf.GEMMA: {str(lv): {"greedy": a} for lv, a in zip(levels, gemma, strict=True)}}

    assert cf.training_level(accuracy((0.9, 0.6, 0.3), (0.1, 0.3, 0.2)), [0.0, 0.25, 0.5]) == (0.25, True)
    assert cf.training_level(accuracy((0.9, 0.85, 0.3), (0.1, 0.05, 0.1)), [0.0, 0.25, 0.5]) == (0.0, False)


def test_the_training_temperature_is_the_highest_where_both_majorities_are_in_the_useful_band():
    def majority(smollm2, gemma):
        temperatures = (1.0, 0.7, 0.4)
        return {cf.SMOLLM2: {str(t): a for t, a in zip(temperatures, smollm2, strict=True)},
                cf.GEMMA: {str(t): a for t, a in zip(temperatures, gemma, strict=True)}}

    candidates = [1.0, 0.7, 0.4]
    assert cf.training_temperature(majority((0.3, 0.5, 0.6), (0.25, 0.4, 0.5)), candidates) == (1.0, True)
    assert cf.training_temperature(majority((0.05, 0.3, 0.6), (0.1, 0.4, 0.5)), candidates) == (0.7, True)
    # none in the band: the candidate whose lower majority is highest (0.4: min 0.15 against 0.1 and 0.0)
    assert cf.training_temperature(majority((0.0, 0.1, 0.15), (0.1, 0.1, 0.9)), candidates) == (0.4, False)


def test_the_calibration_reads_as_tables_with_the_training_temperatures_majority():
    calibration = {
        "accuracy": {
            cf.SMOLLM2: {"0.0": {"greedy": 0.4, "majority": 0.55}},
            cf.GEMMA: {"0.0": {"greedy": 0.5, "majority": 0.6}},
        },
        "majority_by_temperature": {
            cf.SMOLLM2: {"1.0": 0.05, "0.7": 0.55},
            cf.GEMMA: {"1.0": 0.2, "0.7": 0.6},
        },
        "level": 0.0,
        "temperature": 0.7,
        "error_agreement": {
            "smollm2 vs gemma": {"kappa": 0.1, "both_wrong_same_answer": 0.05},
            "kappa within minus cross, two samples": [0.3, 0.1, 0.5],
            "items": 64,
        },
    }
    tables = cf.calibration_tables(calibration)
    gemma = {"model": cf.GEMMA, "level": "0.0", "greedy": 0.5, "majority at T=0.7": 0.6}
    assert tables["calibration: accuracy per level"][1] == gemma
    by_temperature = tables["calibration: majority per temperature at level 0.0"]
    assert by_temperature[0] == {"model": cf.SMOLLM2, "T=1.0": 0.05, "T=0.7": 0.55}
    agreement = tables["calibration: agreement of errors at level 0.0 (64 items)"]
    assert [row["pair"] for row in agreement] == ["smollm2 vs gemma", "kappa within minus cross, two samples"]
    assert agreement[1]["kappa of correctness"] == "+0.300 [+0.100, +0.500]"


def test_a_temperature_where_one_model_was_not_measured_is_not_chosen():
    majority = {cf.SMOLLM2: {"1.0": 0.05, "0.7": 0.5}, cf.GEMMA: {"0.7": 0.4}}  # Gemma skipped at 1.0
    assert cf.training_temperature(majority, [1.0, 0.7]) == (0.7, True)
    calibration = {"majority_by_temperature": majority, "accuracy": {}, "level": 0.0, "temperature": 0.7,
                   "error_agreement": {"items": 64}}
    rows = cf.calibration_tables(calibration)["calibration: majority per temperature at level 0.0"]
    assert rows[1] == {"model": cf.GEMMA, "T=1.0": "-", "T=0.7": 0.4}


def test_the_full_run_drops_arms_in_the_plans_order_before_it_cuts_seeds():
    """Amendment 1's sizing: five arms at 4 seeds where they fit 3 hours on 2 cores, else the GRPO
    reference goes first, then TTRL on Gemma; then seeds are cut (never below 2)."""
    def size(smollm2, cross):
        return cf.full_run_size({"ttrl_smollm2": {"cpu_s": smollm2}, "corl_cross": {"cpu_s": cross}})

    cheap = size(300, 900)  # per seed 3 * 300 + 2 * 900 CPU-s = 45 min on 2 cores: 4 seeds in 3 hours
    assert (cheap["arms"], cheap["seeds"]) == (list(cf.ARMS), 4)
    no_grpo = size(400, 2200)  # five arms: 4 * (1200 + 4400) / 2 > 3 h; without GRPO: 4 * 5200 / 2 = 10400 s
    assert no_grpo["arms"] == [a for a in cf.ARMS if a != "grpo_smollm2"] and no_grpo["seeds"] == 4
    three = size(600, 3000)  # three arms: 4 * (1800 + 3000) / 2 = 9600 s
    assert three["arms"] == ["ttrl_smollm2", "corl_same", "corl_cross"] and three["seeds"] == 4
    cut = size(900, 4500)  # three arms: 3600 s a seed, so 3 seeds
    assert cut["arms"] == three["arms"] and cut["seeds"] == 3 and cut["estimated_wall_s"] == 3 * 3600
    assert size(3000, 20000)["seeds"] == 2


def test_the_gpu_preset_is_the_plan_at_the_papers_sizes_with_c4_powered():
    gpu, full = cf.GPU, cf.FULL
    # C4's one point (the paper's edge over TTRL) at 80% power, at the last real run's per-seed sd
    assert cf.C4_SD == pytest.approx(0.058, abs=5e-4) and cf.C4_EFFECT == 0.01
    assert gpu["seeds"] == cf.seeds_for_power(cf.C4_SD, cf.C4_EFFECT)
    # the release's sampling: 8 completions a group, 16 prompts a step, temperature 1.0 the first candidate
    assert gpu["generations"] == 8 and gpu["prompts"] * gpu["generations"] == 128
    assert gpu["calibration"]["temperatures"][0] == 1.0 and gpu["calibration"]["samples"] == 8
    assert gpu["arms"] == list(cf.ARMS)
    for key in ("steps", "prompts", "held_out", "train_items", "max_new_tokens", "seeds"):
        assert gpu[key] > full[key], key
    assert gpu["calibration"]["items"] > full["calibration"]["items"]
    trainer = {**cf.TRAINER, **gpu["trainer"]}
    assert trainer["vllm_mode"] == "colocate" and trainer["use_vllm"] and trainer["bf16"]
    assert "beta" not in trainer  # no KL term: TRL's default 0
    # FULL and QUICK add nothing to a run's settings, so their finished runs are read back as before
    assert not set(cf.EXTRA_RUN_KEYS) & (set(cf.FULL) | set(cf.QUICK))


def test_preset_points_the_models_at_folders_and_refuses_bad_input_before_any_work(tmp_path):
    assert cf.preset() is cf.FULL and cf.preset(quick=True) is cf.QUICK and cf.preset(gpu=True) is cf.GPU
    sizes = cf.preset(gpu=True, models={cf.GEMMA: str(tmp_path)})
    assert sizes["models"] == {cf.GEMMA: str(tmp_path.resolve())} and sizes["steps"] == cf.GPU["steps"]
    with pytest.raises(ValueError, match="choose one"):
        cf.preset(quick=True, gpu=True)
    with pytest.raises(ValueError, match="--model names"):
        cf.preset(models={"qwen": str(tmp_path)})
    with pytest.raises(ValueError, match="do not exist"):
        cf.preset(models={cf.SMOLLM2: str(tmp_path / "none")})


@pytest.mark.slow
def test_the_folders_preset_names_are_what_the_calibration_and_the_runs_load(tmp_path):
    """``preset(models=...)`` through the calibration and one cross-family run on tiny stand-ins of
    both architectures: every member loads its folder and is prompted by its name's setting, and the
    calibration's answers are kept apart from the registered models'."""
    import yaml

    from councilzoo.testing import build_tiny_model

    folders = {cf.SMOLLM2: build_tiny_model(tmp_path / "smollm2", family="llama"),
               cf.GEMMA: build_tiny_model(tmp_path / "gemma", family="gemma3", vocab_size=1024, seed=1)}
    sizes = {**cf.preset(quick=True, models={name: str(path) for name, path in folders.items()}),
             "steps": 1, "prompts": 1, "generations": 2, "eval_every": 1, "held_out": 2, "train_items": 2,
             "max_new_tokens": 4,
             "calibration": {"levels": [0.0], "items": 2, "samples": 2, "temperatures": [1.0]}}
    _, settings = cf.calibrated(tmp_path / "out", sizes)
    assert settings["models"] == {name: str(path.resolve()) for name, path in folders.items()}
    assert [p.name[:12] for p in (tmp_path / "out").iterdir() if p.is_dir()] == ["calibration-"]
    result = cf.run_arm("corl_cross", 0, settings, tmp_path / "runs")
    config = yaml.safe_load((tmp_path / "runs" / "corl_cross-seed0" / "config.yaml").read_text())
    assert [(m["model"], m["prompt_style"], m["stop"]) for m in config["members"]] == [
        (settings["models"][cf.SMOLLM2], "concise", []),
        (settings["models"][cf.GEMMA], "few_shot", ["\nQuestion:"]),
    ]
    assert {name: (r["model"], r["eval_steps"]) for name, r in result.items()} == {
        "smollm2": (cf.SMOLLM2, [0, 1]), "gemma": (cf.GEMMA, [0, 1])}


def test_the_gpu_config_is_one_cross_family_run_of_the_gpu_preset():
    """configs/corl_smollm2_gemma_gpu.yaml: the preset's corl_cross run as a `train corl` config."""
    from pathlib import Path

    import yaml

    config = yaml.safe_load((Path(__file__).parents[1] / "configs/corl_smollm2_gemma_gpu.yaml").read_text())
    gpu, (_, rule, members) = cf.GPU, cf.ARMS["corl_cross"]
    shape = {"num_generations": "generations", "prompts_per_step": "prompts", "max_steps": "steps",
             "max_completion_length": "max_new_tokens"}
    assert {k: config[k] for k in shape} == {k: gpu[preset] for k, preset in shape.items()}
    assert config["reward_rule"] == rule and config["seeded_sampling"]
    assert config["data"] == {"dataset": cf.DATASET, "num_problems": gpu["train_items"], "difficulty": 0.0}
    assert config["eval"] == {"dataset": cf.DATASET, "num_problems": gpu["held_out"], "difficulty": 0.0,
                              "eval_steps": gpu["eval_every"]}
    assert config["trainer"] == {**cf.TRAINER, **gpu["trainer"], "temperature": 1.0}
    assert [(m["model"], m["view"], m["prompt_style"], m.get("stop", []), m["peft"], m["devices"])
            for m in config["members"]] == [
        (model, view, *cf.member_settings(model).values(), cf.LORA, gpu["member"]["devices"])
        for _, model, view in members
    ]
