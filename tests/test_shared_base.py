"""Members on one base model, a LoRA adapter each (``learners/shared_base.py``): the same updates as
separate models, each adapter saved and resumed on its own, a member of another family beside them,
and configs that would break the turn-taking refused before work."""

from __future__ import annotations

import shutil
import socket
from pathlib import Path

import pytest
import torch
import yaml
from safetensors.torch import load_file

from councilzoo.agents.base import Sampling
from councilzoo.agents.generators.adapters import BASE, AdapterGenerator
from councilzoo.agents.generators.transformers_backend import TransformersGenerator
from councilzoo.agents.llm import LLMAgent
from councilzoo.cli import main
from councilzoo.config import ConfigError, load_config
from councilzoo.learners import engine
from councilzoo.learners.corl.config import CoRLConfig
from councilzoo.learners.corl.launch import launch_cohort
from councilzoo.learners.corl.learner import CoRL
from councilzoo.learners.corl.shared_world import run_shared_base
from councilzoo.learners.placement import Machines, Placement, plan_cohort
from councilzoo.learners.shared_base import AdapterTurns, SharedRounds, check_group, run_threads
from councilzoo.rollout.engine import RolloutEngine
from councilzoo.tasks import synthetic_problems

LORA = {"r": 4, "lora_alpha": 8, "target_modules": ["q_proj", "v_proj"]}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_config(out, model, shared=True, steps=3, **overrides):
    group = {"shared_base": "b"} if shared else {}
    members = [
        {"name": name, "model": str(model), "view": view, "peft": LORA, **group}
        for name, view in (("m0", 0), ("m1", 1))
    ]
    data = {
        "members": members, "reward_rule": "ring", "num_generations": 4, "prompts_per_step": 2,
        "max_completion_length": 12, "max_steps": steps, "output_dir": str(out), "save_steps": 2,
        "data": {"dataset": "synthetic:multiple_choice", "num_problems": 16},
        "trainer": {"learning_rate": 1e-2}, "distributed": {"port": _free_port()},
    }
    return load_config({**data, **overrides}, CoRLConfig)


def final_adapters(cfg) -> list[dict[str, torch.Tensor]]:
    return [
        load_file(next((cfg.member_dir(i) / "final").rglob("adapter_model.safetensors")))
        for i in range(len(cfg.members))
    ]


def assert_same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert a.keys() == b.keys()
    for key in a:
        torch.testing.assert_close(a[key], b[key], rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_two_adapters_on_one_base_update_as_two_separate_models(tmp_path, tiny_member_dir):
    """A ring cohort of two members, once as two worlds with a model each, once as one world with
    two adapters on one base (forked from the warm-start server, which runs the module the plan's
    command names): same rewards, same gradient norms, same adapters after 3 steps, and the
    adapters did move (lora_B starts at zero)."""
    separate = make_config(tmp_path / "separate", tiny_member_dir, shared=False)
    shared = make_config(tmp_path / "shared", tiny_member_dir, shared=True, warm_start=True)
    rows_separate = launch_cohort(separate, "corl")
    rows_shared = launch_cohort(shared, "corl")
    for row_separate, row_shared in zip(rows_separate, rows_shared, strict=True):
        assert row_shared["reward"] == pytest.approx(row_separate["reward"])
        assert row_shared["grad_norm"] == pytest.approx(row_separate["grad_norm"], rel=1e-5)
    for alone, beside in zip(final_adapters(separate), final_adapters(shared), strict=True):
        assert_same(alone, beside)
        assert any(float(v.abs().max()) > 0 for k, v in alone.items() if "lora_B" in k)


@pytest.mark.slow
def test_each_adapter_resumes_from_its_own_checkpoint(tmp_path, tiny_member_dir):
    """4 steps in one go, and 4 steps killed after the checkpoint of step 2 and resumed: the same
    adapters (each resumed its own weights, optimizer, schedule and random state); each checkpoint
    holds its own adapter only."""
    whole = make_config(tmp_path / "whole", tiny_member_dir, steps=4)
    run_shared_base(whole, [0, 1], CoRL.reward_functions)
    broken = make_config(tmp_path / "broken", tiny_member_dir, steps=4)
    run_shared_base(broken, [0, 1], CoRL.reward_functions)
    for i, member in enumerate(broken.members):
        checkpoint = broken.member_dir(i) / "checkpoint-2"
        adapters = list(checkpoint.rglob("adapter_model.safetensors"))
        assert adapters == [checkpoint / member.name / "adapter_model.safetensors"]
        shutil.rmtree(broken.member_dir(i) / "checkpoint-4")
        shutil.rmtree(broken.member_dir(i) / "final")
    run_shared_base(broken, [0, 1], CoRL.reward_functions, resume=True)
    for a, b in zip(final_adapters(whole), final_adapters(broken), strict=True):
        assert_same(a, b)


@pytest.mark.parametrize(
    "change, message",
    [
        ({"peft": None}, r"\['m1'\] give no 'peft'"),
        ({"model": "", "tiny_family": "llama"}, "must name one model"),
        ({"trainer": {"gradient_accumulation_steps": 2}}, "gradient_accumulation_steps"),
        ({"num_processes": 2}, "one-process world"),
        ({"trainer": {"per_device_train_batch_size": 4}}, "per_device_train_batch_size differs"),
        ({"trainer": {"use_vllm": True}}, r"\['m1'\] set use_vllm"),
    ],
)
def test_a_group_that_cannot_share_a_base_is_refused_before_work(tmp_path, tiny_model_dir, change, message):
    cfg = make_config(tmp_path, tiny_model_dir).members
    data = {
        "members": [{"name": m.name, "model": m.model, "peft": LORA, "shared_base": "b"} for m in cfg],
        "output_dir": str(tmp_path),
    }
    data["members"][1].update(change)
    with pytest.raises(ConfigError, match=message):
        load_config(data, CoRLConfig)


def test_a_tracker_of_one_run_per_process_is_refused_for_a_group():
    models, peft = {"m0": "x", "m1": "x"}, {"m0": LORA, "m1": LORA}
    [problem] = check_group("b", models, peft, {"m0": {}, "m1": {}}, ["wandb", "tensorboard"])
    assert "report_to ['wandb']" in problem
    assert check_group("b", models, peft, {"m0": {}, "m1": {}}, ["tensorboard"]) == []


def test_a_group_is_one_world_of_the_plan_and_other_members_their_own(tmp_path, tiny_model_dir):
    """The placement plan holds the group as one one-process world of both members (each with its
    own GRPOConfig arguments), started by shared_world with the plan and the world's index; the
    member after the group is world 1; starting a group's member starts the whole group."""
    cfg = make_config(tmp_path, tiny_model_dir)
    cfg.members.append(type(cfg.members[0])(name="other", tiny_family="llama"))
    plan = Placement.read(plan_cohort(cfg, CoRL.spec(), Machines.here()).write(tmp_path))
    group, other = plan.worlds
    assert [(m.index, m.name) for m in group.members] == [(0, "m0"), (1, "m1")]
    assert (group.name, group.processes, group.launcher) == ("b", 1, "python")
    assert group.model == str(tiny_model_dir)
    assert [m.grpo["output_dir"] for m in group.members] == [str(cfg.member_dir(i)) for i in (0, 1)]
    entry = ["councilzoo.learners.corl.shared_world", str(tmp_path.absolute() / "plan.json"), "--world", "0"]
    assert group.nodes[0].command[-4:] == entry
    assert [m.index for m in other.members] == [2] and other.nodes[0].command[-1] == "1"
    assert plan.world_of(1) is group and plan.worlds_of([1, 2]) == [0, 1] and plan.worlds_of([2]) == [1]
    assert "  members          m0, m1: a LoRA adapter each on one copy of the base" in plan.describe()
    apart = make_config(tmp_path, tiny_model_dir, shared=False)
    assert apart.fingerprint() == make_config(tmp_path, tiny_model_dir).fingerprint()  # placement only


def test_dry_run_counts_the_shared_base_once(tmp_path, capsys):
    """Two adapters on a 1.5B base: the first member's plan holds the frozen fp32 base, the second
    none (it points at the first); a member of its own would count a base of its own. Likewise
    TRACER's reviewer trainer beside the proposer's: on their shared base, or on a model of its own."""
    member = {"model": "Qwen/Qwen2.5-1.5B-Instruct", "peft": LORA, "shared_base": "qwen"}
    config = tmp_path / "shared.yaml"
    config.write_text(yaml.safe_dump({
        "members": [{"name": "a", **member}, {"name": "b", **member, "view": 1}],
        "data": {"dataset": "synthetic:numeric"}, "output_dir": str(tmp_path / "run"),
    }))
    assert main(["train", "corl", str(config), "--dry-run"]) == 0
    out = capsys.readouterr().out
    first, second = out.split("members.1 (b)")
    base = 1.54e9 * 4 / 2**30
    assert f"training state {base:.1f} GiB (frozen fp32 weights, 4 bytes a parameter)" in first
    assert "state 0.0 GiB (the shared base, counted with members.0 (a): 0 bytes a parameter)" in second

    for shared in (True, False):  # TRACER's proposer and reviewer trainers
        config.write_text(yaml.safe_dump({
            "agents": {"kind": "llm", "model": "Qwen/Qwen2.5-1.5B-Instruct", "share_model": False,
                       "train_reviewer": True, "shared_base": shared},
            "generation": {"enabled": True}, "output_dir": str(tmp_path / "tracer"),
        }))  # fmt: skip
        assert main(["train", "tracer", str(config), "--dry-run"]) == 0
        proposer, reviewer = capsys.readouterr().out.split("tracer (reviewer)")
        held = f"training state {base:.1f} GiB (frozen fp32 weights"
        counted = "state 0.0 GiB (the shared base, counted with tracer: 0 bytes a parameter)"
        assert held in proposer
        assert (counted if shared else held) in reviewer


FRESH = {"r": 4, "lora_alpha": 8, "target_modules": ["q_proj", "v_proj"], "init_lora_weights": False}
PROMPTS = [[{"role": "user", "content": f"what is {i} + 1?"}] for i in range(3)]


def test_one_call_decodes_each_prompt_with_its_own_adapter(tiny_model_dir):
    """Greedy rows of adapters x, y and the bare base in one batch equal each decoded alone, the
    base row equals the plain model's, and the adapters (random, not the identity) differ."""
    shared = AdapterGenerator(str(tiny_model_dir), {"x": FRESH, "y": {**FRESH, "r": 2}})
    greedy = Sampling(max_new_tokens=8, temperature=0.0)
    mixed = shared.generate(PROMPTS, 1, greedy, adapters=["x", "y", BASE])
    seats = [shared.seat(name) for name in ("x", "y", BASE)]
    alone = [seat.generate([p], 1, greedy)[0] for seat, p in zip(seats, PROMPTS, strict=True)]
    assert [g[0].token_ids for g in mixed] == [g[0].token_ids for g in alone]
    plain = TransformersGenerator(str(tiny_model_dir)).generate(PROMPTS, 1, greedy)
    assert mixed[2][0].token_ids == plain[2][0].token_ids
    by_adapter = [shared.generate(PROMPTS[:1], 1, greedy, adapters=[name])[0][0].token_ids for name in "xy"]
    assert by_adapter[0] != by_adapter[1] != plain[0][0].token_ids
    with pytest.raises(ValueError, match="unknown adapters \\['z'\\]"):
        shared.generate(PROMPTS[:1], 1, greedy, adapters=["z"])


def test_the_rollout_engine_batches_the_seats_of_one_base(tiny_model_dir):
    """Three debaters on three adapters of one base: one generate call a debate round for all of
    them, and the same turns (greedy) as three generators with one adapter each, three calls."""
    ranks = {"x": 2, "y": 4, "z": 8}
    greedy = Sampling(max_new_tokens=6, temperature=0.0)
    problems = synthetic_problems("numeric", 4, seed=0)

    def debate(seats):
        agents = {f"peer_{i}": LLMAgent(seat, sampling=greedy, name=name)
                  for i, (name, seat) in enumerate(seats.items())}
        engine = RolloutEngine("councilzoo/debate-v0", agents, num_envs=4, progress=False,
                               env_kwargs={"problems": problems, "num_agents": 3, "rounds": 2})
        records = engine.run(problems)
        return engine.stats, [[t.token_ids for t in r.turns] for r in records]

    shared = AdapterGenerator(str(tiny_model_dir), {n: {**FRESH, "r": r} for n, r in ranks.items()})
    stats, together = debate({n: shared.seat(n) for n in ranks})
    assert stats.generate_calls == 2 and stats.batch_sizes == [12, 12]
    stats, separately = debate(
        {n: AdapterGenerator(str(tiny_model_dir), {n: {**FRESH, "r": r}}).seat(n) for n, r in ranks.items()}
    )
    assert stats.generate_calls == 6
    assert together == separately


@pytest.mark.slow
def test_tracer_reviewer_on_the_proposers_base_plays_as_a_frozen_copy(tiny_model_dir, tmp_path):
    """TRACER with separate role models: the reviewer on the proposer's base with the adapter off
    (no second copy) makes the run of a frozen copy: the same controller history, the same trained
    adapter, and the adapter did move."""
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    from test_tracer_llm import _adapters, tiny_config

    from councilzoo.learners.tracer.learner import Tracer

    runs = {}
    for shared in (False, True):
        agents = {"kind": "llm", "model": str(tiny_model_dir), "max_new_tokens": 12, "stop": ["e", "a"],
                  "share_model": False, "shared_base": shared}
        tracer = Tracer(tiny_config(tiny_model_dir, tmp_path / f"run{int(shared)}", agents=agents))
        before = _adapters(tracer)
        history = [{k: v for k, v in row.items() if k != "seconds"} for row in tracer.train()]
        runs[shared] = before, history, _adapters(tracer), tracer
    (before, copy_history, copy_adapter, _), (_, base_history, base_adapter, tracer) = runs[False], runs[True]
    assert base_history == copy_history
    assert_same(copy_adapter, base_adapter)
    assert any(not torch.equal(before[k], base_adapter[k]) for k in before)
    reviewer = tracer.generation.agents["reviewer"].generator
    assert reviewer.shared.model is tracer.generation.trainer.model and reviewer.adapter == BASE


def _tracer_roles_run(model_dir, out, shared: bool, resume: bool = False):
    """A 2-step TRACER run with both roles trained (``agents.train_reviewer``), on one base with an
    adapter each or on a model each; returns its history and each role's final adapter."""
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    from test_tracer_llm import tiny_config

    from councilzoo.learners.tracer.learner import Tracer

    agents = {"kind": "llm", "model": str(model_dir), "max_new_tokens": 12, "stop": ["e", "a"],
              "share_model": False, "train_reviewer": True, "shared_base": shared}
    tracer = Tracer(tiny_config(model_dir, out, agents=agents, save_steps=1))
    rows = tracer.train(tracer.resume() if resume else None)
    history = [{k: v for k, v in row.items() if k != "seconds"} for row in rows]
    finals = {role: load_file(next((folder / "final").rglob("adapter_model.safetensors")))
              for role, folder in (("proposer", out), ("reviewer", out / "reviewer"))}  # fmt: skip
    return history, finals


def test_tracer_roles_as_two_adapters_on_one_base_update_as_two_separate_models(tiny_model_dir, tmp_path):
    """TRACER's proposer and reviewer each trained by its own trainer: as two LoRA adapters of one
    base they play the same steps (history) and end with the same adapters as two separate models,
    the two adapters different; each role keeps its own checkpoints and metrics, and a run killed
    between the proposer's and the reviewer's save of step 2 resumes both from step 1 (the newest
    step both hold) and ends as the uninterrupted run."""
    separate_history, separate = _tracer_roles_run(tiny_model_dir, tmp_path / "separate", shared=False)
    out = tmp_path / "shared"
    shared_history, shared = _tracer_roles_run(tiny_model_dir, out, shared=True)
    assert shared_history == separate_history
    for role in ("proposer", "reviewer"):
        assert_same(separate[role], shared[role])
    assert any(not torch.equal(shared["proposer"][k], shared["reviewer"][k]) for k in shared["proposer"])
    reviewer_rows = (out / "reviewer" / "metrics.jsonl").read_text().splitlines()
    assert len(reviewer_rows) == 2 and "reward" in reviewer_rows[0]
    assert engine.checkpoint_steps(out) == engine.checkpoint_steps(out / "reviewer") == [1, 2]
    step_1 = load_file(out / "reviewer" / "checkpoint-1" / "reviewer" / "adapter_model.safetensors")
    assert any(not torch.equal(step_1[k], shared["reviewer"][k]) for k in step_1)  # the reviewer trains

    shutil.rmtree(out / "reviewer" / "checkpoint-2")
    resumed_history, resumed = _tracer_roles_run(tiny_model_dir, out, shared=True, resume=True)
    assert resumed_history == shared_history[1:]
    for role in ("proposer", "reviewer"):
        assert_same(shared[role], resumed[role])


def test_a_round_is_made_once_every_trainer_asked_for_it_and_a_failure_wakes_the_peers():
    """SharedRounds between two threads taking turns: the lead makes round k only after the other
    trainer has asked for it (so after its updates of round k - 1), each gets its own part, and a
    trainer that fails stops the one waiting for it instead of leaving it waiting forever."""
    turns = AdapterTurns(None)
    events: list[str] = []

    def make() -> dict[str, str]:
        events.append(f"made {made}")
        return {"lead": f"lead {made}", "peer": f"peer {made}"}

    rounds, made = SharedRounds(turns, ["lead", "peer"], make), 0

    def trainer(name: str, steps: int) -> None:
        nonlocal made
        with turns.turn(name):
            for k in range(steps):
                part = rounds.take(name, k)
                if name == "lead":
                    made += 1
                events.append(f"{name} trained on {part}")

    run_threads({"lead": lambda: trainer("lead", 2), "peer": lambda: trainer("peer", 2)}, rounds.fail)
    assert events == ["made 0", "lead trained on lead 0", "peer trained on peer 0",
                      "made 1", "lead trained on lead 1", "peer trained on peer 1"]  # fmt: skip

    def broken() -> None:
        with turns.turn("peer"):
            raise RuntimeError("peer broke")

    turns = AdapterTurns(None)  # the trainers above take turns on these from now on
    rounds = SharedRounds(turns, ["lead", "peer"], make)
    with pytest.raises(RuntimeError, match="peer broke"):
        run_threads({"lead": lambda: trainer("lead", 1), "peer": broken}, rounds.fail)


@pytest.mark.parametrize(
    "agents, trainer, run, message",
    [
        ({"shared_base": True}, {}, {}, r"agents.shared_base needs: \['agents.share_model false'\]"),
        ({"train_reviewer": True}, {}, {}, r"agents.train_reviewer needs: \['agents.share_model false'\]"),
        ({"train_reviewer": True, "share_model": False}, {"gradient_accumulation_steps": 2}, {},
         "gradient_accumulation_steps"),
        ({"train_reviewer": True, "share_model": False}, {}, {"num_processes": 2},
         r"agents.train_reviewer needs: \['num_processes 1'\]"),  # the trainers take turns in one process
    ],
)
def test_tracer_role_models_on_one_base_are_checked_before_work(
    tiny_model_dir, agents, trainer, run, message
):
    from councilzoo.learners.tracer.config import TracerConfig

    data = {"agents": {"kind": "llm", "model": str(tiny_model_dir), **agents},
            "generation": {"enabled": True, "trainer": trainer}, **run}
    with pytest.raises(ConfigError, match=message):
        load_config(data, TracerConfig)


def train(learner: str, config: str, *sets: str) -> int:
    return main(["train", learner, config, *(a for s in sets for a in ("--set", s))])


@pytest.mark.slow
def test_the_shipped_shared_base_configs_train_on_cpu(tmp_path, tiny_model_dir, monkeypatch):
    """configs/corl_shared_base_cpu.yaml (two adapters on one tiny base beside a Llama member) and
    configs/tracer_shared_base_cpu.yaml (proposer and reviewer adapters on one base), each for a
    short run: every member and role writes its own metrics and final adapter."""
    monkeypatch.chdir(Path(__file__).resolve().parents[1])
    out = tmp_path / "corl"
    sets = ["max_steps=2", "save_steps=2", f"output_dir={out}", f"distributed.port={_free_port()}"]
    assert train("corl", "configs/corl_shared_base_cpu.yaml", *sets) == 0
    for name in ("qwen_a", "qwen_b"):
        assert (out / "members" / name / "final" / name / "adapter_model.safetensors").is_file()
        assert (out / "members" / name / "metrics.jsonl").read_text().count("\n") >= 2
    assert (out / "members" / "llama" / "final" / "model.safetensors").is_file()
    out = tmp_path / "tracer"
    sets = ["max_steps=1", "save_steps=1", f"output_dir={out}", f"agents.model={tiny_model_dir}"]
    assert train("tracer", "configs/tracer_shared_base_cpu.yaml", *sets, "data.eval_limit=2") == 0
    for folder, role in ((out, "proposer"), (out / "reviewer", "reviewer")):
        assert (folder / "final" / role / "adapter_model.safetensors").is_file()
    assert (out / "reviewer" / "metrics.jsonl").read_text().count("\n") == 2  # a row an update, 2 a step
