"""``councilzoo repro corl``: the simulated companion's dynamics, and a --quick run's report."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from councilzoo.learners.data import DataConfig
from councilzoo.repro import corl, corl_sim, corl_vlm_code
from councilzoo.repro.corl_sim import SimConfig, initial_logits, train
from councilzoo.repro.verdicts import HELD, INCONCLUSIVE, NOT_HELD, check, conjunction, part_status
from councilzoo.tasks import extract_answer

SMALL = SimConfig(problems=24, steps=25)


def test_error_correlation_knob_controls_shared_mistakes():
    modes = {rho: initial_logits(SMALL, rho, np.random.default_rng(1)).argmax(-1) for rho in (0.0, 1.0)}
    wrong = modes[1.0] != 0
    assert (modes[1.0] == modes[1.0][0]).all()  # rho = 1: every member errs alike
    assert set(np.unique(modes[1.0][wrong])) <= {1}  # ... on the shared distractor
    assert (modes[0.0][modes[0.0] != 0] != 1).all()  # rho = 0: never on the shared one


def test_simulated_rules_behave_as_their_definitions_say():
    gt = train(SMALL, "ground_truth", 0.0, seed=0)
    assert gt["accuracy"] == 1.0 and gt["collapse"] < gt["start_collapse"]  # gold labels fix all
    ttrl = train(SMALL, "self_majority", 0.0, seed=0)
    assert abs(ttrl["accuracy"] - ttrl["start_accuracy"]) <= 0.05  # own majority keeps the argmax...
    assert ttrl["collapse"] > ttrl["start_collapse"]  # ... it sharpens the wrong ones: collapse
    peer = train(SMALL, "peer_majority", 0.0, seed=0)
    assert peer["accuracy"] > ttrl["accuracy"] and peer["collapse"] < ttrl["collapse"]


def test_peer_rewards_lose_their_edge_when_errors_coincide():
    runs = {rho: [train(SMALL, "ring", rho, seed) for seed in range(2)] for rho in (0.0, 1.0)}
    gain = {rho: np.mean([r["accuracy"] - r["start_accuracy"] for r in rs]) for rho, rs in runs.items()}
    assert gain[0.0] > corl.TIP_GAIN > gain[1.0]


def test_sim_summary_reports_tipping_points():
    cfg = SimConfig(problems=12, steps=15, correlations=(0.0, 1.0))
    table, tips = corl.summarise_sim(corl_sim.sweep(cfg, 2), cfg)
    assert {(t["rule"], t["rho"]) for t in table} == {(r, rho) for r in corl_sim.RULES for rho in (0.0, 1.0)}
    for rule, tip in tips.items():
        gains = {t["rho"]: t["gain"] for t in table if t["rule"] == rule}
        assert tip == min((rho for rho, g in gains.items() if g < corl.TIP_GAIN), default=None)


@pytest.mark.parametrize("task", ["visual", "code"])
def test_regime_targets_teach_the_known_share_of_right_answers(task):
    from councilzoo.tasks import synthetic_problems

    for problem in synthetic_problems(task, 6, seed=0, difficulty=0.2):
        right, wrongs = corl_vlm_code.answer_forms(problem)
        if task == "code":
            assert problem.metadata["solution"] in right and len(wrongs) >= 1
        else:
            assert extract_answer(right, problem.kind) == problem.answer
            assert all(extract_answer(w, problem.kind) != problem.answer for w in wrongs)
        for known, share in ((True, corl_vlm_code.KNOWN_RIGHT), (False, corl_vlm_code.UNKNOWN_RIGHT)):
            targets = corl_vlm_code.regime_targets(problem, known, wrong=1)
            assert targets.count(right) == round(10 * share) and len(targets) == 10
            assert set(targets) == {right, wrongs[1 % len(wrongs)]}  # one fixed wrong answer per member


def test_v2_items_differ_in_every_view_and_members_know_an_exact_share():
    from councilzoo.tasks import paraphrase, synthetic_problems

    for v1, v2 in (("vlm", "vlm_v2"), ("code", "code_v2")):
        old, new = corl_vlm_code.part_items(v1, 24), corl_vlm_code.part_items(v2, 24)
        assert old == synthetic_problems(corl_vlm_code.COHORTS[v1].task, 24, seed=corl_vlm_code.ITEMS_SEED,
                                         difficulty=corl_vlm_code.DIFFICULTY)  # v1's items as they were
        assert len({p.question for p in old}) < 24  # the reason for v2: v1's prompts repeat
        for view in corl_vlm_code.VIEWS:
            texts = [paraphrase(p, view).question for p in new]
            assert len(set(texts)) == 24
            assert [t.split(". ", 1)[1] for t in texts] == [paraphrase(p, view).question for p in old]
        assert [(p.id, p.answer) for p in new] == [(p.id, p.answer) for p in old]
    for seed in (1, 2, 3):
        known, wrong = corl_vlm_code.known_items(2, seed, 24)
        assert known.sum() == 15 and set(wrong) <= {0, 1, 2}
    assert {int(corl_vlm_code.known_items(1, s, 24)[0].sum()) for s in range(1, 9)} != {15}  # v1: a draw


def test_items_written_under_a_relative_folder_load_with_their_images(tmp_path, monkeypatch):
    from councilzoo.tasks import load_dataset
    from councilzoo.tasks.images import load_image

    monkeypatch.chdir(tmp_path)
    out = Path("runs") / "corl"  # `repro corl --out runs`: the loader once read runs/corl/runs/corl/...
    out.mkdir(parents=True)
    problems, path = corl_vlm_code.write_items("vlm_v2", out, 3)
    loaded = load_dataset("jsonl", path=str(path))
    assert [p.id for p in loaded] == [p.id for p in problems]
    for p in loaded:
        assert p.images and all(min(load_image(image).size) > 0 for image in p.images)
    monkeypatch.chdir(out)  # the file's image paths do not depend on the folder it was written from
    assert len(load_dataset("jsonl", path=path.name)) == 3


def test_every_full_size_member_is_shipped_with_its_spec_and_matches_its_digest():
    from councilzoo.repro.tiny_lms import checked

    for part, cohort in corl_vlm_code.COHORTS.items():
        problems = corl_vlm_code.part_items(part, corl_vlm_code.FULL["items"])
        for index in range(len(cohort.families)):
            name, spec = corl_vlm_code.member_name(part, index, problems, cohort.warmup_steps)
            folder = corl_vlm_code.SHIPPED_DIR / name
            assert corl_vlm_code.build_member(part, index, problems, cohort.warmup_steps) == folder
            assert checked(folder, corl_vlm_code.SHA256[name], "corl_vlm_code.SHA256") == folder
            built = json.loads((folder / "regime.json").read_text())
            assert {k: v for k, v in built.items() if k != "known_items"} == json.loads(json.dumps(spec))
            if cohort.version > 1:  # v2's members know an exact share of the items
                assert built["known_items"] == 15
    assert len(corl_vlm_code.SHA256) == 12 == sum(len(c.families) for c in corl_vlm_code.COHORTS.values())


@pytest.mark.slow
def test_a_v2_member_build_reproduces_its_bytes(tmp_path):
    from councilzoo.repro.tiny_lms import digest

    problems = corl_vlm_code.part_items("code_v2", 4)
    a, b = (corl_vlm_code.build_member("code_v2", 1, problems, 3, root=tmp_path / d) for d in "ab")
    assert a.name == b.name and digest(a) == digest(b)


def test_a_part_whose_precondition_failed_reports_its_training_checks_as_not_run():
    measured = {"members": [{"majority_accuracy": a} for a in (0.4, 0.6, 0.7)], "in_band": False}
    rows, checks = corl_vlm_code.summarise("code_v2", {}, measured)
    assert rows == [] and not any(c["status"] == HELD for c in checks.values())
    # a failed precondition means the run could not test the claim: INCONCLUSIVE, not NOT HELD
    assert part_status(checks) == INCONCLUSIVE
    assert all("not run" in checks[k]["rule"] for k in ("corl_beats_start", "corl_beats_ttrl"))


def test_majority_accuracy_on_a_constructed_case():
    answers = [
        ["5", "5", "3"],  # plurality 5: right
        ["2", "4", "4"],  # plurality 4: wrong
        [None, None, "7"],  # no answer never wins: 7, right
        ["1", "2"],  # a tie keeps the first seen: 1, wrong
        [None, None],  # no answer at all: wrong
        ["10.0", "10", "9"],  # equivalent numbers form one group: right
    ]
    golds = ["5", "2", "7", "2", "3", "10"]
    assert corl.majority_accuracy(answers, golds) == pytest.approx(3 / 6)
    assert corl.majority_accuracy(answers[:1], ["3"]) == 0.0
    with pytest.raises(ValueError, match="gold"):
        corl.majority_accuracy(answers, golds[:2])


def test_peer_label_stats_follow_the_rule():
    # three members, two items; own majorities: item 0 -> 4, 4, 5 (gold 4); item 1 -> 1, 2, 3 (gold 1)
    answers = [[["4", "4", "5"], ["1", "1", "2"]],
               [["4", "4", "4"], ["2", "2", "1"]],
               [["5", "5", "4"], ["3", "3", "3"]]]
    golds = ["4", "1"]
    # peer_majority: item 0 labels m0 <- (4, 5) tie: none; m1 <- (4, 5): none; m2 <- (4, 4): 4 (right);
    # item 1: every pair of peers disagrees: none. So one labeled item of six, and it is right.
    stats = corl.peer_label_stats(answers, golds, "peer_majority")
    assert stats["coverage"] == pytest.approx(np.mean([0, 0, 1 / 2]))
    assert stats["precision"] == 1.0  # members with no labeled item are left out (NaN)
    # ring: m0 <- m1 (4 right, 2 wrong), m1 <- m2 (5 wrong, 3 wrong), m2 <- m0 (4 right, 1 right)
    ring = corl.peer_label_stats(answers, golds, "ring")
    assert ring == {"precision": pytest.approx(np.mean([1 / 2, 0, 1])), "coverage": 1.0}


def test_label_threshold_interpolates_the_upward_crossing():
    points = [(0.5, 0.03), (0.2, -0.04), (0.4, 0.01), (0.3, -0.01)]
    assert corl_sim.label_threshold(points) == pytest.approx(0.35)
    assert corl_sim.label_threshold(points, 0.02) == pytest.approx(0.45)
    assert corl_sim.label_threshold([(0.2, 0.05), (0.6, 0.1)]) is None  # never at or below 0


def test_simulated_label_precision_rises_with_skill():
    cfg = SimConfig(problems=24, steps=10, skills=(0.2, 0.8))
    rows = corl_sim.label_sweep(cfg, 1)
    assert {r["cohort"] for r in rows} == {f"{rule}, {m} members" for m, rule in corl_sim.LABEL_COHORTS}
    for cohort in {r["cohort"] for r in rows}:
        low, high = (next(r for r in rows if r["cohort"] == cohort and r["skill"] == s) for s in (0.2, 0.8))
        assert 0.0 <= low["label_precision"] < high["label_precision"] <= 1.0


def _fake_curves(gain: float, precision: float, steps: int = 4) -> dict[str, list[float]]:
    accuracy = [0.5] + [float("nan")] * (steps - 1) + [0.5 + gain]
    return {"accuracy": accuracy, "label_precision": [precision] * steps, "wrong_consensus": [0.2] * steps}


def test_regime_plot_is_written(tmp_path):
    runs = {name: {"corl_heterogeneous": [_fake_curves(g, p) for g, p in ((-0.02, 0.4), (0.01, 0.45))]}
            for name in corl.REGIMES}
    measured = {name: {"label_precision": 0.5} for name in corl.REGIMES}
    table = [{"cohort": f"{rule}, {m} members", "skill": s, "label_precision": s, "gain": s - 0.5}
             for m, rule in corl_sim.LABEL_COHORTS for s in (0.3, 0.7)]
    path = tmp_path / "regimes.png"
    corl._plot_regimes(runs, measured, table, path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_homogeneous_cohort_is_compared_with_the_member_whose_checkpoint_it_copies():
    def curves(collapse, first_collapse, first_start, seed):
        steps = 4
        return {"accuracy": [0.6] + [float("nan")] * (steps - 1) + [0.65 + 0.01 * seed],
                "first_member_accuracy": [first_start] + [float("nan")] * (steps - 1) + [first_start + 0.02],
                "wrong_consensus": [collapse + 0.01 * seed] * steps,
                "first_member_wrong_consensus": [first_collapse + 0.01 * seed] * steps,
                "label_precision": [0.8] * steps, "label_accuracy": [0.7] * steps,
                "answer_entropy": [1.0] * steps}

    # the diverse cohort's mean collapses more (0.3) than the copies (0.2), but its first member, the
    # checkpoint the copies start from, collapses less (0.1): the same-checkpoint comparison holds
    runs = {"grpo": [curves(0.1, 0.1, 0.7, s) for s in range(4)],
            "ttrl": [curves(0.3, 0.3, 0.7, s) for s in range(4)],
            "corl_homogeneous": [curves(0.2, 0.2, 0.7, s) for s in range(4)],
            "corl_heterogeneous": [curves(0.3, 0.1, 0.7, s) for s in range(4)]}
    rows, checks = corl.summarise_lm(runs)
    assert checks["heterogeneous_collapses_less"]["value"][0] == pytest.approx(0.1)
    assert checks["heterogeneous_collapses_less"]["status"] == HELD
    homo, het = (next(r for r in rows if r["arm"] == a) for a in ("corl_homogeneous", "corl_heterogeneous"))
    assert homo["first_member_start"] == het["first_member_start"] == 0.7


def test_primary_regime_needs_members_in_the_majority_band():
    ok = {"x": check("paper", HELD, "r", [0.1, 0.05, 0.2])}
    members = [{"majority_accuracy": 0.6}, {"majority_accuracy": 0.7}]
    measured = {corl.PRIMARY: {"members": members, "in_band": True},
                "present": {"members": [], "in_band": False}}
    checks = corl.regime_checks({corl.PRIMARY: ([], ok), "present": ([], ok)}, measured)
    assert checks[corl.PRIMARY]["members_majority_in_band"]["status"] == HELD
    assert part_status(checks[corl.PRIMARY]) == HELD
    # the comparison regime lies outside the paper's regime: reported, not deciding
    assert "members_majority_in_band" not in checks["present"]
    assert checks["present"]["x"]["kind"] == "extension" and checks["present"]["x"]["status"] == HELD
    measured[corl.PRIMARY]["in_band"] = False  # e.g. one member 0.006 under the band
    checks = corl.regime_checks({corl.PRIMARY: ([], ok), "present": ([], ok)}, measured)
    assert checks[corl.PRIMARY]["members_majority_in_band"]["status"] == NOT_HELD
    assert part_status(checks[corl.PRIMARY]) == INCONCLUSIVE


def test_a_regime_not_trained_reports_its_checks_as_not_run():
    rows, checks = corl.summarise_lm({arm: [] for arm in corl.ARMS})
    assert rows == [] and {c["status"] for c in checks.values()} == {INCONCLUSIVE}
    assert all("not run" in c["rule"] for c in checks.values())
    measured = {corl.PRIMARY: {"members": [{"majority_accuracy": 0.544}], "in_band": False},
                "present": {"members": [], "in_band": False}}
    regime = corl.regime_checks({corl.PRIMARY: (rows, checks), "present": (rows, checks)}, measured)
    assert part_status(regime[corl.PRIMARY]) == INCONCLUSIVE


@pytest.mark.slow
def test_quick_run_writes_a_report_whose_verdict_follows_from_its_numbers(quick_repro):
    out = quick_repro / "corl"
    report = result = json.loads((out / "report.json").read_text())
    assert set(report) >= {"claim", "setup", "results", "verdict", "figures", "run"}
    assert "corl_regimes.png" in report["figures"]
    assert all((out / f).is_file() for f in report["figures"])
    assert "NOT HELD" in (out / "report.md").read_text() or "HELD" in (out / "report.md").read_text()

    runs = json.loads((out / "curves.json").read_text())
    assert set(runs) == set(corl.REGIMES)
    for arms in runs.values():
        assert set(arms) == set(corl.ARMS) and all(len(seeds) == 2 for seeds in arms.values())
        # seeds change the data order and the samples, so the curves differ between seeds
        for seeds in arms.values():
            assert seeds[0]["wrong_consensus"] != seeds[1]["wrong_consensus"] or \
                seeds[0]["label_accuracy"] != seeds[1]["label_accuracy"]
    # the pre-training majority accuracies: one per member of each regime, each a share
    majority = result["results"]["majority_before_training"]
    for name, regime in corl.REGIMES.items():
        rows = [m for m in majority if m["regime"] == name]
        assert [(m["model"], m["view"]) for m in rows] == list(regime.members)
        assert all(0.0 <= m["majority_accuracy"] <= 1.0 for m in rows)
    # the verdicts are recomputed from the stored curves and the measured majorities
    lo, hi = corl.MAJORITY_BAND
    measured = {}
    for name in corl.REGIMES:
        rows = [m for m in majority if m["regime"] == name]
        measured[name] = {"members": rows, "in_band": all(lo <= m["majority_accuracy"] <= hi for m in rows)}
    per_regime = {name: corl.summarise_lm(arms) for name, arms in runs.items()}
    checks = corl.regime_checks(per_regime, measured)
    parts = {p["part"]: p["status"] for p in result["results"]["parts"]}
    assert set(parts) == {"text", *corl_vlm_code.COHORTS}
    assert parts["text"] == part_status(checks[corl.PRIMARY])
    assert result["verdict"]["status"] == conjunction(parts.values())
    stored_rows = result["results"]["checks"]
    for part in corl_vlm_code.COHORTS:  # each new part's checks, recomputed from its curves and majorities
        curves = json.loads((out / f"{part}_curves.json").read_text())
        members = result["results"][f"{part}_before_training"]
        in_band = all(lo <= m["majority_accuracy"] <= hi for m in members)
        trained = in_band or corl_vlm_code.COHORTS[part].version > 1  # --quick trains v2's arms regardless
        assert set(curves) == (set(corl_vlm_code.ARMS) if trained else set())
        assert all(len(seeds) == 2 for seeds in curves.values())
        measured_part = {"members": members, "in_band": in_band}
        _, part_checks = corl_vlm_code.summarise(part, curves, measured_part)
        stored = {c["check"]: c["status"] for c in stored_rows if c["part"] == part}
        assert stored == {k: c["status"] for k, c in part_checks.items()}
        assert parts[part] == part_status(part_checks)
        if trained:
            grpo = next(r for r in result["results"][f"{part}_arms"] if r["arm"] == "grpo")
            assert grpo["label_precision"] == 1.0  # supervised GRPO's labels are the gold answers
    status = {r["regime"]: r["status"] for r in result["results"]["regimes"]}
    assert status[corl.PRIMARY] == part_status(checks[corl.PRIMARY])
    stored = [(r["regime"], r["arm"], r["final_accuracy"]) for r in result["results"]["arms"]]
    assert stored == [(name, r["arm"], r["final_accuracy"])
                      for name, (rows, _) in per_regime.items() for r in rows]
    # supervised GRPO's pseudo-labels are the gold answers, in both regimes
    for rows, _ in per_regime.values():
        assert next(r for r in rows if r["arm"] == "grpo")["label_accuracy"] == 1.0


@pytest.mark.slow
def test_an_arm_run_in_this_process_matches_the_pooled_run(quick_repro, tmp_path):
    # The report's arms ran in spawned worker processes; one arm and seed replayed here must give
    # the same curves, so results never depend on --jobs or on which worker ran what.
    out = quick_repro / "corl"
    pooled = json.loads((out / "curves.json").read_text())["in_regime"]["corl_heterogeneous"][1]
    data = DataConfig(dataset="jsonl", path=str(out / "rl_items.jsonl"))
    here = corl._run_job(("in_regime", "corl_heterogeneous", 1, corl.QUICK, data, tmp_path))
    assert set(here) == set(pooled)
    for name, curve in here.items():
        np.testing.assert_array_equal(curve, pooled[name], err_msg=name)
