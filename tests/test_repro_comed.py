"""`councilzoo repro comed`: the tiny-LM seats speak the SFT format; --quick's verdict follows
from its numbers, per part."""

from __future__ import annotations

import json

import numpy as np
import pytest

from councilzoo.agents.llm import LLMAgent
from councilzoo.envs.types import Mode, Turn, TurnContext
from councilzoo.repro import comed
from councilzoo.repro.tiny_lms import addition_problems, solver_messages, verifier_messages
from councilzoo.repro.verdicts import HELD, NOT_HELD, conjunction, part_status


def test_solver_format_agent_renders_every_seat_as_the_sft_prompt(tiny_model_dir):
    problem = addition_problems("test", 1)[0]
    anchor = Turn("anchor", "anchor", 0, Mode.ANSWER, text="The answer is \\boxed{7}.", answer="7")
    features = np.zeros(9, dtype=np.float32)
    seats = {"anchor": ("anchor", ()), "peer_0": ("probe", (anchor,)), "verifier": ("verifier", (anchor,)),
             "peer_1": ("peer", (anchor,))}
    contexts = [TurnContext(0, agent, role, 0, problem, seen, (Mode.ANSWER,), features)
                for agent, (role, seen) in seats.items()]
    agent = comed.solver_agent(str(tiny_model_dir), name="solver")
    requests = agent.plan(contexts)
    for request, ctx in zip(requests, contexts, strict=True):
        assert request.messages == solver_messages(problem, comed.solver_role(ctx.role))
        assert request.context is ctx  # parsing still sees the game's own role
    assert comed.solver_role("verifier") == "member"
    # a picking verifier sees the anchor's and the probe's answers, as it was SFT'd to
    picker = comed.solver_agent(str(tiny_model_dir), name="verifier", picking=True)
    extras = {"anchor_answer": "7", "probe_answer": "9"}
    verify = TurnContext(0, "verifier", "verifier", 0, problem, (anchor,), (Mode.ANSWER,), features, extras)
    assert picker.plan([verify])[0].messages == verifier_messages(problem, "7", "9")
    # what a plain LLMAgent would have shown the probe: the anchor's answer, outside the SFT format
    plain = LLMAgent(agent.generator).plan(contexts[1:2])[0].messages
    assert "\\boxed{7}" in plain[1]["content"] and plain != requests[1].messages


@pytest.mark.slow
def test_quick_repro_writes_a_consistent_report(quick_repro):
    out = quick_repro / "comed"
    report = json.loads((out / "report.json").read_text())
    for figure in report["figures"]:
        assert (out / figure).stat().st_size > 0
    results = report["results"]
    parts = {p["part"]: p["status"] for p in results["parts"]}
    assert set(parts) == {"simulated", "tiny_lm", "complementary"}
    assert report["verdict"]["status"] == conjunction(parts.values())
    assert parts["simulated"] == (HELD if all(c["held"] for c in results["sweep_checks"]) else NOT_HELD)
    for part in parts:  # every part's status follows from its labelled checks
        assert parts[part] == part_status({r["check"]: r for r in results["checks"] if r["part"] == part})

    rows = results["sweep"]
    levels = sorted({r["swayed_prob"] for r in rows})
    debate = {r["swayed_prob"]: r for r in rows if r["protocol"] == "debate"}
    single = {r["swayed_prob"]: r for r in rows if r["protocol"] == "single"}
    # harm grows with the peers' harm propensity; rescue - harm == accuracy change, per row
    assert debate[levels[-1]]["harm"] > debate[levels[0]]["harm"]
    for r in rows + results["tiny_lm_protocols"]:
        assert abs(r["net"] - (r["rescue"] - r["harm"])) < 1e-9
    cross = results["dense_loses_to_anchor_from_swayed_prob"]
    if cross is not None:  # interpolated between the grid levels where debate's lead changes sign
        above = min(lv for lv in levels if lv >= cross)
        assert debate[above]["accuracy"] < single[above]["accuracy"]
        assert all(debate[lv]["accuracy"] >= single[lv]["accuracy"] for lv in levels if lv < cross)

    lm = {r["protocol"]: r for r in results["tiny_lm_protocols"]}
    assert set(lm) == {*comed.PROTOCOLS, "comed_learned", "comed_regret", "oracle_gate"}
    for r in lm.values():  # Acc = Acc_anchor + Rescue - Harm, each against its own anchor
        assert abs(r["accuracy"] - (r["anchor_accuracy"] + r["net"])) < 1e-9
    assert lm["debate"]["anchor_accuracy"] == lm["single"]["accuracy"]  # one anchor sample
    assert lm["oracle_gate"]["anchor_accuracy"] == lm["comed"]["anchor_accuracy"]  # COMED's samples
    assert lm["oracle_gate"]["harm"] == 0
    check = results["tiny_lm_check"][0]
    assert check["held"] == (
        lm["comed"]["accuracy"] >= lm["debate"]["accuracy"]
        and lm["comed"]["calls"] < lm["debate"]["calls"]
        and lm["comed"]["tokens"] < lm["debate"]["tokens"]
        and lm["comed"]["harm"] < lm["debate"]["harm"]
    )
    # the complementary council's verdict is its pre-registered check, computed from its rows
    lm = {r["protocol"]: r for r in results["complementary_protocols"]}
    check = results["complementary_check"][0]
    assert check["at_least_debate"] == (lm["comed"]["accuracy"] >= lm["debate"]["accuracy"])
    assert check["rescue_above_harm"] == (lm["comed"]["rescue"] > lm["comed"]["harm"])
    assert check["comed_learned_between_comed_and_oracle"] == (
        lm["comed"]["accuracy"] <= lm["comed_learned"]["accuracy"] <= lm["oracle_gate"]["accuracy"])
    md = (out / "report.md").read_text()
    assert "Verdict" in md and "tiny_lm_protocols" in md


def test_complementary_check_is_the_preregistered_one_with_the_own_and_routed_anchors():
    def row(acc, calls=4.0, rescue=0.1, harm=0.05):
        return {"accuracy": acc, "calls": calls, "rescue": rescue, "harm": harm}

    def cells(comed_acc, single_acc, own_acc=0.46, routing_acc=0.44, routed_acc=0.49):
        return [{"comed": row(comed_acc + d), "single": row(single_acc + d),
                 "self_consistency": row(own_acc + d), "routing": row(routing_acc + d),
                 "comed_routed": row(routed_acc + 1.5 * d)} for d in (0.0, 0.01, 0.02)]

    table = {"comed": row(0.50), "single": row(0.45), "debate": row(0.48, calls=6.0),
             "comed_learned": row(0.55), "comed_regret": row(0.52), "oracle_gate": row(0.80, harm=0.0)}
    check = comed.complementary_check(cells(0.50, 0.45), table)
    assert part_status(comed.complementary_labelled(check)) == HELD
    assert check["comed_minus_anchor"] == pytest.approx(0.05)
    assert check["comed_minus_own_anchor"] == pytest.approx(0.04)
    assert check["comed_routed_minus_routing"] == pytest.approx(0.05 + 0.005)
    failing = {
        "beats_anchor": (cells(0.48, 0.50), table),
        "at_least_debate": (cells(0.50, 0.45), {**table, "debate": row(0.51, calls=6.0)}),
        "fewer_calls_than_debate": (cells(0.50, 0.45), {**table, "comed": row(0.50, calls=6.0)}),
        "rescue_above_harm": (cells(0.50, 0.45), {**table, "comed": row(0.50, rescue=0.05, harm=0.05)}),
        "comed_regret_between_comed_and_oracle": (cells(0.50, 0.45), {**table, "comed_regret": row(0.49)}),
        "comed_learned_between_comed_and_oracle": (cells(0.50, 0.45), {**table, "comed_learned": row(0.81)}),
    }
    for name, (c, t) in failing.items():
        check = comed.complementary_check(c, t)
        assert not check[name], name
        assert all(v for k, v in check.items() if isinstance(v, bool) and k != name), name
        labelled = comed.complementary_labelled(check)
        # every check registered on 2026-12-04 decides, the learned gates' (5) included
        assert labelled[name]["kind"] == "paper" and labelled[name]["status"] == NOT_HELD, name
        assert part_status(labelled) == NOT_HELD, name
    # the router, or COMED's own anchor, beats COMED on every seed: NOT HELD (the paper claims both improve)
    for bad, name in (({"routed_acc": 0.40}, "routed_beats_routing"),
                      ({"own_acc": 0.53}, "beats_own_anchor")):
        labelled = comed.complementary_labelled(comed.complementary_check(cells(0.50, 0.45, **bad), table))
        assert labelled[name]["status"] == NOT_HELD and part_status(labelled) == NOT_HELD, name


def test_comed_paths_and_gates_replay_one_anchor_draw(tmp_path):
    """The dev runs behind COMED's path outcomes replay the first run's anchor samples (and probe
    answer), and the test gates replay self-consistency's anchor: the anchor's model draws once
    per problem and split (plus its router data), and every run shows the same anchor turn."""
    from councilzoo.evaluation.harness import Evaluation
    from councilzoo.learners.logging import read_metrics
    from councilzoo.repro.tiny_lms import torch_threads

    test, dev = addition_problems("test", 12, seed=0), addition_problems("dev", 12, seed=0)
    with torch_threads():
        ev = Evaluation(comed.lm_council(comed.FIRST_COUNCIL, 0, 12), test, dev, tmp_path, progress=False,
                        num_envs=12)
        generator = ev.models[comed.FIRST_COUNCIL.anchor].generator
        asked, generate = [], generator.generate
        generator.generate = lambda prompts, **kw: asked.append(len(prompts)) or generate(prompts, **kw)
        ev.result("comed_learned")
    # router data on dev (one sample), COMED's first dev run, self-consistency on test: 3 x 12 prompts
    # (without the replay, the two other dev runs and the gate's test run would add 3 x 12)
    assert sum(asked) == 36

    def turns(run: str, role: str) -> dict[str, tuple]:
        rows = read_metrics(tmp_path / "episodes" / f"{run}.jsonl")
        return {r["problem_id"]: (t["text"], tuple(t["samples"]), t["answer"], t["cost"]["calls"])
                for r in rows for t in r["turns"] if t["role"] == role}

    first = turns("dev_comed_probe_verify", "anchor")
    assert len(first) == 12 and all(len(s) == comed.LM_SAMPLES and c == comed.LM_SAMPLES
                                    for _, s, _, c in first.values())
    assert turns("dev_comed_probe_escalate", "anchor") == first == turns("dev_comed_escalate", "anchor")
    assert turns("dev_comed_probe_escalate", "probe") == turns("dev_comed_probe_verify", "probe")
    assert turns("comed_learned", "anchor") == turns("self_consistency", "anchor")
