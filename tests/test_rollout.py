"""RolloutEngine: lockstep equivalence, one generate call per generator per tick, JSONL resume."""

from __future__ import annotations

import json

import pytest

from councilzoo.agents import LLMAgent, Sampling, SimulatedAgent, bind_agents
from councilzoo.agents.controllers import FixedController, default_mode
from councilzoo.envs import make
from councilzoo.envs.types import Action, Mode, TurnContext
from councilzoo.rollout import RolloutEngine
from councilzoo.tasks import synthetic_problems


def simulated_team(correlation: float = 0.3) -> dict[str, SimulatedAgent]:
    return {f"peer_{i}": SimulatedAgent(f"p{i}", 0.6, seed=i, correlation=correlation) for i in range(3)}


def dicts(records) -> list[dict]:
    return [r.to_dict() for r in records]


@pytest.mark.parametrize(
    ("env_id", "agents"),
    [
        ("councilzoo/debate-v0", simulated_team()),
        ("councilzoo/review-v0", {"*": SimulatedAgent("s", 0.5, seed=1)}),
        ("councilzoo/escalation-v0", {"*": SimulatedAgent("s", 0.5, seed=2)}),
        ("councilzoo/cohort-v0", {"member_0": SimulatedAgent("a", 0.6), "member": SimulatedAgent("b", 0.3)}),
    ],
)
def test_lockstep_gives_the_same_records_as_one_env(env_id, agents):
    problems = synthetic_problems("numeric", 40, seed=1)
    one = RolloutEngine(env_id, agents, num_envs=1, progress=False).run(problems, episodes_per_problem=2)
    many = RolloutEngine(env_id, agents, num_envs=8, progress=False).run(problems, episodes_per_problem=2)
    assert dicts(one) == dicts(many)
    assert [r.problem_id for r in many] == [p.id for p in problems for _ in range(2)]
    # the two episodes of a problem are distinct draws, not copies
    pairs = zip(dicts(many[::2]), dicts(many[1::2]), strict=True)
    assert any(a["turns"] != b["turns"] for a, b in pairs)


def test_lockstep_runs_fewer_ticks():
    problems = synthetic_problems("numeric", 64, seed=2)
    engine = RolloutEngine("councilzoo/debate-v0", simulated_team(), num_envs=64, progress=False)
    engine.run(problems)
    assert engine.stats.ticks == 2 and engine.stats.episodes == 64  # 2 simultaneous rounds of 3 peers


def _view(ctx: TurnContext) -> dict:
    return {**ctx.__dict__, "features": ctx.features.tolist()}


@pytest.mark.parametrize(
    ("env_id", "kwargs", "largest"),
    [("councilzoo/debate-v0", {"num_agents": 3, "rounds": 3}, 3),
     ("councilzoo/escalation-v0", {"num_peers": 3, "debate_rounds": 2}, 3)],
)
def test_a_simultaneous_round_is_seen_alike_before_and_on_each_turn(env_id, kwargs, largest):
    """upcoming_turns: every peer left in a debate round, each context exactly the one that peer
    gets when its turn comes (so the engine may play them in one tick); one turn elsewhere."""
    env = make(env_id, **kwargs).unwrapped
    agent = SimulatedAgent("s", 0.5, seed=4)
    sizes = set()
    for problem in synthetic_problems("numeric", 12, seed=6):
        env.reset(options={"problem": problem})
        while not all(env.terminations.values()):
            upcoming = env.upcoming_turns()
            sizes.add(len(upcoming))
            for ctx in upcoming:
                assert env.agent_selection == ctx.agent
                assert _view(env.turn_context(ctx.agent)) == _view(ctx)
                env.step(agent.act([ctx])[0])
    assert max(sizes) == largest  # a whole round was offered at once


def test_a_sequential_game_offers_one_turn_at_a_time():
    env = make("councilzoo/review-v0").unwrapped
    env.reset(options={"problem": synthetic_problems("numeric", 1, seed=0)[0]})
    assert [c.agent for c in env.upcoming_turns()] == [env.agent_selection]


@pytest.fixture(scope="module")
def counting_generator(tiny_model_dir):
    from councilzoo.agents import TransformersGenerator

    class CountingGenerator(TransformersGenerator):
        """The real generator, counting calls and prompts per call."""

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.batches: list[int] = []

        def generate(self, prompts, n=1, sampling=None):
            self.batches.append(len(prompts) * n)
            return super().generate(prompts, n, sampling)

    return CountingGenerator(tiny_model_dir, device="cpu")


@pytest.mark.slow
def test_one_generate_call_per_generator_per_tick(counting_generator):
    sampling = Sampling(max_new_tokens=4, seed=0)
    # two agents (different role prompts) share one model: their turns go into the same call
    first = LLMAgent(counting_generator, sampling=sampling, name="a")
    other = LLMAgent(counting_generator, sampling=sampling, role_prompts={"peer": "Be brief."}, name="b")
    engine = RolloutEngine("councilzoo/debate-v0", {"peer": other, "peer_0": first}, num_envs=4,
                           env_kwargs={"num_agents": 3, "rounds": 2}, progress=False)
    counting_generator.batches.clear()
    records = engine.run(synthetic_problems("numeric", 4, seed=3))
    assert len(records) == 4
    assert len(counting_generator.batches) == engine.stats.ticks == engine.stats.generate_calls == 2
    assert counting_generator.batches == [12] * 2  # every env's round (3 peers) in one call


def _documented_batched_agent():
    """The custom LLM agent of docs/new_agent.md section 4, exactly as written there."""
    import re
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[1] / "docs" / "new_agent.md").read_text()
    section = doc.split("## 4.", 1)[1]
    namespace: dict = {}
    exec(re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL)[0], namespace)
    return namespace["TerseAgent"]


@pytest.mark.slow
def test_a_custom_batched_agent_is_batched_and_its_turns_carry_tokens(counting_generator):
    from councilzoo.agents.base import BatchedAgent

    terse = _documented_batched_agent()(counting_generator, Sampling(max_new_tokens=4, seed=0))
    assert isinstance(terse, BatchedAgent)
    engine = RolloutEngine("councilzoo/debate-v0", {"*": terse}, num_envs=4,
                           env_kwargs={"num_agents": 2, "rounds": 1}, progress=False)
    counting_generator.batches.clear()
    records = engine.run(synthetic_problems("numeric", 4, seed=5))
    assert counting_generator.batches == [8] * engine.stats.ticks  # all envs' turns in one call
    turns = [t for r in records for t in r.turns]
    assert turns and all(t.token_ids and t.prompt_token_ids and t.logprobs for t in turns)


@pytest.mark.slow
def test_mixed_sample_counts_still_make_one_call(counting_generator):
    """Escalation: the anchor draws 3 samples while probes draw 1, all in one call per tick."""
    sampling = Sampling(max_new_tokens=4, seed=0)
    agent = LLMAgent(counting_generator, sampling=sampling)
    engine = RolloutEngine("councilzoo/escalation-v0", {"*": agent}, num_envs=3, progress=False,
                           env_kwargs={"anchor_samples": 3, "num_peers": 2, "debate_rounds": 1})
    counting_generator.batches.clear()
    records = engine.run(synthetic_problems("numeric", 3, seed=4))
    assert all(len(r.turns[0].samples) == 3 for r in records)
    assert counting_generator.batches[0] == 9  # 3 anchors x 3 samples
    assert len(counting_generator.batches) == engine.stats.generate_calls


class Crashing:
    """Wraps an agent and raises once it has acted ``limit`` times (a crash mid-evaluation)."""

    def __init__(self, agent, limit: int):
        self.agent, self.limit, self.calls = agent, limit, 0

    def act(self, contexts: list[TurnContext]) -> list[Action]:
        self.calls += len(contexts)
        if self.calls > self.limit:
            raise RuntimeError("simulated crash")
        return self.agent.act(contexts)


def test_jsonl_resume_after_a_crash_has_no_lost_or_duplicated_episode(tmp_path):
    problems = synthetic_problems("numeric", 30, seed=5)
    path = tmp_path / "episodes.jsonl"
    reference = RolloutEngine("councilzoo/debate-v0", simulated_team(), num_envs=4, progress=False).run(
        problems, episodes_per_problem=2)

    crashing = {**simulated_team(), "peer_2": Crashing(simulated_team()["peer_2"], limit=50)}
    with pytest.raises(RuntimeError, match="simulated crash"):
        RolloutEngine("councilzoo/debate-v0", crashing, num_envs=4, jsonl_path=path, progress=False).run(
            problems, episodes_per_problem=2)
    finished = path.read_text().splitlines()
    assert 0 < len(finished) < 60
    with path.open("a") as f:  # the crash also cut the next record mid-line
        f.write(finished[0][:57])

    engine = RolloutEngine("councilzoo/debate-v0", simulated_team(), num_envs=4, jsonl_path=path)
    resumed = engine.run(problems, episodes_per_problem=2)
    assert engine.stats.episodes == 60 - len(finished)  # only the missing episodes were played
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    keys = [(d["problem_id"], d["episode"]) for d in lines]
    assert len(keys) == len(set(keys)) == 60
    assert dicts(resumed) == dicts(reference)
    again = RolloutEngine("councilzoo/debate-v0", simulated_team(), num_envs=2, jsonl_path=path,
                          progress=False)
    assert dicts(again.run(problems, episodes_per_problem=2)) == dicts(reference)
    assert again.stats.episodes == 0


def test_jsonl_of_another_env_is_refused(tmp_path):
    path = tmp_path / "episodes.jsonl"
    problems = synthetic_problems("numeric", 2, seed=6)
    RolloutEngine("councilzoo/debate-v0", simulated_team(), jsonl_path=path, progress=False).run(problems)
    with pytest.raises(ValueError, match="debate-v0"):
        RolloutEngine("councilzoo/review-v0", {"*": SimulatedAgent("s", 0.5)}, jsonl_path=path,
                      progress=False).run(problems)


def test_corrupt_middle_line_is_an_error_not_silently_skipped(tmp_path):
    path = tmp_path / "episodes.jsonl"
    path.write_text("{not json}\n{}\n")
    engine = RolloutEngine("councilzoo/debate-v0", simulated_team(), jsonl_path=path, progress=False)
    with pytest.raises(ValueError, match="line 1"):
        engine.run(synthetic_problems("numeric", 1, seed=7))


def test_unbound_seat_and_bad_arguments_fail_before_work():
    with pytest.raises(KeyError, match="peer_2"):
        two = {"peer_0": SimulatedAgent("a", 0.5), "peer_1": SimulatedAgent("b", 0.5)}
        RolloutEngine("councilzoo/debate-v0", two)
    with pytest.raises(ValueError, match="match no agent or role"):
        bind_agents(make("councilzoo/debate-v0"), {"peers": SimulatedAgent("a", 0.5)})
    with pytest.raises(TypeError, match="expected an Agent"):
        bind_agents(make("councilzoo/debate-v0"), {"peer": "not an agent"})
    with pytest.raises(ValueError, match="num_envs"):
        RolloutEngine("councilzoo/debate-v0", simulated_team(), num_envs=0)
    engine = RolloutEngine("councilzoo/debate-v0", simulated_team(), progress=False)
    problem = synthetic_problems("numeric", 1, seed=8)[0]
    with pytest.raises(ValueError, match="appears twice"):
        engine.run([problem, problem])


def test_binding_prefers_name_over_role_and_resolves_turn_roles():
    a, b, c = (SimulatedAgent(x, 0.5) for x in "abc")
    binding = bind_agents(make("councilzoo/escalation-v0"), {"peer": a, "peer_0": b, "*": c, "probe": a})
    assert binding.agent_for("peer_0", "peer") is b and binding.agent_for("peer_1", "peer") is a
    assert binding.agent_for("anchor", "anchor") is c and binding.agent_for("peer_1", "probe") is a


class DefaultModes:
    """The controller an agent without one follows: speak whenever speaking is legal."""

    def choose(self, contexts):
        return [default_mode(ctx) for ctx in contexts]


class Recording(SimulatedAgent):
    """A simulated agent that keeps every context it was asked to act on."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.seen: list[TurnContext] = []

    def act(self, contexts):
        self.seen.extend(contexts)
        return super().act(contexts)


def review_envs(engine, problems):
    envs = [engine.env_fn().unwrapped for _ in problems]
    for env, problem in zip(envs, problems, strict=True):
        env.reset(options={"problem": problem})
    return envs


def test_play_under_the_agents_own_default_controller_equals_run():
    problems = synthetic_problems("numeric", 12, seed=4)
    agents = {"*": SimulatedAgent("s", 0.5, seed=3)}
    engine = RolloutEngine("councilzoo/review-v0", agents, num_envs=4, progress=False)
    envs = review_envs(engine, problems)
    engine.play(envs, [0] * len(envs), controller=DefaultModes())
    assert dicts(env.episode_record() for env in envs) == dicts(engine.run(problems))


def test_play_calls_agents_only_to_speak_forces_first_modes_and_stops_at_max_turns():
    problems = synthetic_problems("numeric", 6, seed=5)
    agent = Recording("s", 0.5, seed=3)
    engine = RolloutEngine("councilzoo/review-v0", {"*": agent}, progress=False)
    never_review = FixedController({"reviewer": Mode.SKIP, "proposer": Mode.KEEP})
    envs, seen = review_envs(engine, problems), []
    engine.play(envs, list(range(6)), controller=never_review, on_turn=lambda i, env, ctx, m: seen.append(m))
    # Only each episode's opening proposal (REFRESH is its one legal mode) reaches the agent.
    assert [ctx.legal_modes for ctx in agent.seen] == [(Mode.REFRESH,)] * 6
    assert [ctx.extras["episode"] for ctx in agent.seen] == list(range(6))
    assert len(seen) == sum(len(env.transcript) for env in envs)
    assert all(env.episode_record().cost.calls == 1 for env in envs)
    # Forcing the second turn's mode (the first review) to SPEAK, for two turns only.
    agent.seen.clear()
    envs = review_envs(engine, problems)
    engine.play(envs, [0] * 6, controller=never_review, max_turns=1)
    engine.play(envs, [0] * 6, controller=never_review, first_modes=[Mode.SPEAK] * 6, max_turns=1)
    assert [t.mode for env in envs for t in env.transcript] == [Mode.REFRESH, Mode.SPEAK] * 6
    assert [ctx.role for ctx in agent.seen] == ["proposer"] * 6 + ["reviewer"] * 6
    assert not any(all(env.terminations.values()) for env in envs)
