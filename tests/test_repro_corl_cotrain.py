"""The co-training experiment's arms and its checks, on constructed cells."""

from __future__ import annotations

from councilzoo.repro import corl_cotrain
from councilzoo.repro.tiny_lms import REGISTRY


def _cells(final: dict[str, list[float]]) -> list[dict]:
    return [{"arm": arm, "seed": s, "start": 0.5, "final": v, "label_precision": None}
            for arm, values in final.items() for s, v in enumerate(values)]


def test_the_arms_separate_model_diversity_from_wording_diversity():
    arms = corl_cotrain.ARMS
    learner = (corl_cotrain.LEARNER, 0)
    assert all(members[0] == learner for _, _, members in arms.values())  # the same learner everywhere
    assert arms["corl_copy"][2] == (learner, (corl_cotrain.LEARNER, 1))  # another wording, the same model
    for arm in corl_cotrain.DIVERSE:  # another wording and another family, both members updating
        (partner, view) = arms[arm][2][1]
        assert view == 1 and REGISTRY[partner].family != REGISTRY[corl_cotrain.LEARNER].family
        assert arms[arm][:2] == ("corl", "ring")


def test_diverse_cotraining_above_ttrl_and_the_copy_holds():
    base = [0.50, 0.52, 0.49, 0.51]
    rows, checks = corl_cotrain.summarise(_cells({
        "ttrl": base, "corl_diverse": [b + 0.05 for b in base], "corl_diverse_2": [b + 0.06 for b in base],
        "corl_copy": [b + 0.01 for b in base], "grpo": [b + 0.1 for b in base]}))
    assert [r["arm"] for r in rows] == list(corl_cotrain.ARMS)
    assert checks["diverse_corl_beats_ttrl"]["status"] == "HELD"
    assert checks["diverse_beats_copy"]["status"] == "HELD"


def test_not_held_needs_the_interval_below_the_papers_edge_over_ttrl():
    ttrl = [0.50, 0.52, 0.49, 0.51]
    near = [t + d for t, d in zip(ttrl, [0.0, 0.02, -0.01, 0.01], strict=True)]  # spans the +1-point edge
    below = [t + d for t, d in zip(ttrl, [-0.04, -0.05, -0.03, -0.04], strict=True)]
    for diverse, status in ((near, "INCONCLUSIVE"), (below, "NOT HELD")):
        final = {"ttrl": ttrl, "corl_diverse": diverse, "corl_diverse_2": diverse, "corl_copy": ttrl,
                 "grpo": ttrl}
        _, checks = corl_cotrain.summarise(_cells(final))
        assert checks["diverse_corl_beats_ttrl"]["status"] == status
