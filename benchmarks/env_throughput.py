"""Env overhead per agent-step of every councilzoo game vs classic PettingZoo games, same loop.

Subject: debate-v0, review-v0, escalation-v0 (AEC) and cohort-v0 (parallel), played by a scripted
policy that picks a random legal mode and sends a pre-built Action (so the time measured is the
env's: action coercion, answer/verdict parsing, cost accounting, observation, features, grading
at the end). Baseline: PettingZoo's classic tictactoe_v3 (AEC) and rps_v2 (parallel) stepped by
the identical loop with int actions.

Loop floor: the loop itself costs time (agent_iter, last(), reading the mask, drawing a mode,
calling the policy, PettingZoo's dead-agent steps). It is measured by stepping a no-op env of the
same API with the identical loop: ``NoOpAEC`` / ``NoOpParallel``, unwrapped, whose step only
passes the turn and whose observation is a constant dict with an all-legal mask. Each row reports
``us/step`` (everything) and ``own us`` = us/step minus its API's floor: the env's own overhead,
PettingZoo wrappers that its ``env()`` factory adds included.

Target: own us <= 50 per agent-step, i.e. <= 0.5% of a 10 ms LLM turn (a real turn is 10 ms - 10
s); ``target met?`` and ``all_within_target`` are computed from the own-overhead column. The
pre-built texts repeat, so per-text parse caches (``extract_answer``, ``extract_verdict``) hit as
they do when an env re-reads a text its agent already parsed; a never-seen text pays one parse.
Times are CPU seconds of the benchmark process (``time.process_time``; the loop is single-threaded),
so other processes on a shared machine do not inflate them the way they inflate wall time; caches
and clock speed still vary with the machine and its load: compare rows of one run. To compare runs
across machines, each run also times a pure-Python reference, ``sum(range(100))`` (about 0.6 us on
a typical desktop core; microseconds per agent-step scale roughly with it).

    python benchmarks/env_throughput.py [--quick]

Needs pygame for the classic baselines (``pip install "pettingzoo[classic]"``).
"""

from __future__ import annotations

import argparse
import json
import os
import time
import timeit
from pathlib import Path

import numpy as np
from gymnasium import spaces
from pettingzoo import AECEnv, ParallelEnv

from councilzoo.envs import cohort_v0, debate_v0, escalation_v0, review_v0
from councilzoo.envs.types import Action, Mode
from councilzoo.tasks import synthetic_problems

TARGET_US = 50.0
LLM_TURN_US = 10_000.0  # a fast real LLM turn (10 ms); the target is 0.5% of it
RESULT = Path(__file__).parent / "results" / "env_throughput.json"


class NoOpAEC(AECEnv):
    """The AEC loop floor: three agents take turns for nine steps; a step only passes the turn."""

    metadata = {"name": "noop_aec"}
    EPISODE_STEPS = 9

    def __init__(self) -> None:
        super().__init__()
        self.possible_agents = ["a_0", "a_1", "a_2"]
        self._obs = {"action_mask": np.ones(2, np.int8)}
        self._space = spaces.Discrete(2)

    def observation_space(self, agent):
        return spaces.Dict({"action_mask": spaces.Box(0, 1, (2,), np.int8)})

    def action_space(self, agent):
        return self._space

    def reset(self, seed=None, options=None) -> None:
        self.agents = list(self.possible_agents)
        self.rewards = dict.fromkeys(self.agents, 0.0)
        self._cumulative_rewards = dict.fromkeys(self.agents, 0.0)
        self.terminations = dict.fromkeys(self.agents, False)
        self.truncations = dict.fromkeys(self.agents, False)
        self.infos = {a: {} for a in self.agents}
        self.agent_selection, self._steps = self.agents[0], 0

    def observe(self, agent):
        return self._obs

    def step(self, action) -> None:
        if self.terminations[self.agent_selection]:
            self._was_dead_step(action)
            return
        self._steps += 1
        self.agent_selection = self.possible_agents[self._steps % 3]
        if self._steps == self.EPISODE_STEPS:
            self.terminations = dict.fromkeys(self.agents, True)


class NoOpParallel(ParallelEnv):
    """The parallel loop floor: three agents, one step per episode, constant observations."""

    metadata = {"name": "noop_parallel"}

    def __init__(self) -> None:
        self.possible_agents = ["a_0", "a_1", "a_2"]
        self._obs = {a: {"action_mask": np.ones(2, np.int8)} for a in self.possible_agents}

    def action_space(self, agent):
        return spaces.Discrete(2)

    def reset(self, seed=None, options=None):
        self.agents = list(self.possible_agents)
        return self._obs, {a: {} for a in self.agents}

    def step(self, actions):
        done = dict.fromkeys(self.agents, True)
        self.agents = []
        return self._obs, dict.fromkeys(done, 0.0), done, dict.fromkeys(done, False), {a: {} for a in done}


def councilzoo_actions() -> dict[int, Action]:
    """One pre-built action per mode, with realistic short utterances."""
    answer = "Let me work through it: 80 * 2 = 160, 160 * 4 = 640, 640 + 17 = 657. \\boxed{657}"
    actions = {int(m): Action(m, calls=0) for m in Mode}
    for mode in (Mode.SPEAK, Mode.ANSWER, Mode.REFRESH):
        actions[int(mode)] = Action(mode, answer, prompt_tokens=200, completion_tokens=40, calls=1)
    actions[int(Mode.ANSWER)] = Action(Mode.ANSWER, answer, samples=(answer,) * 5, calls=5)
    return actions


def review_aware(actions: dict[int, Action]) -> dict[int, Action]:
    out = dict(actions)
    out[int(Mode.SPEAK)] = Action(Mode.SPEAK, "Every step checks out. Verdict: RIGHT", calls=1)
    return out


def legal_modes(env, agent, obs) -> np.ndarray:
    if isinstance(obs, dict) and "action_mask" in obs:
        return np.flatnonzero(obs["action_mask"])
    return np.arange(env.action_space(agent).n)  # rps_v2 has no mask: every action is legal


def aec_loop(env, policy, steps: int, rng: np.random.Generator) -> tuple[int, float]:
    """Play episodes until ``steps`` agent-steps are taken; returns (agent-steps, seconds)."""
    done = 0
    start = time.process_time()
    while done < steps:
        env.reset()
        for agent in env.agent_iter():
            obs, _, term, trunc, _ = env.last()
            if term or trunc:
                env.step(None)
                continue
            legal = legal_modes(env, agent, obs)
            env.step(policy(int(legal[rng.integers(len(legal))]), agent))
            done += 1
    return done, time.process_time() - start


def parallel_loop(env, policy, steps: int, rng: np.random.Generator) -> tuple[int, float]:
    done = 0
    start = time.process_time()
    while done < steps:
        obs, _ = env.reset()
        while env.agents:
            actions = {}
            for agent in env.agents:
                legal = legal_modes(env, agent, obs[agent])
                actions[agent] = policy(int(legal[rng.integers(len(legal))]), agent)
            obs, *_ = env.step(actions)
            done += len(actions)
    return done, time.process_time() - start


def reference_us() -> float:
    """Best-of-5 time of ``sum(range(100))`` in microseconds: this machine's pure-Python speed."""
    timer = timeit.Timer("sum(range(100))")
    loops, _ = timer.autorange()
    return 1e6 * min(timer.repeat(5, loops)) / loops


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer steps (a smoke run)")
    parser.add_argument("--repeats", type=int, default=5, help="best of this many timed runs per env")
    args = parser.parse_args()
    steps = 2_000 if args.quick else 10_000
    from pettingzoo.classic import rps_v2, tictactoe_v3

    problems = synthetic_problems("numeric", 50, seed=0)
    plain, reviewed = councilzoo_actions(), review_aware(councilzoo_actions())

    def review_policy(mode: int, agent: str) -> Action:
        return (reviewed if agent.startswith("reviewer") else plain)[mode]

    cases = [
        ("no-op AEC env (loop floor)", "aec", NoOpAEC, lambda m, a: m),
        ("tictactoe_v3 (classic, baseline)", "aec", lambda: tictactoe_v3.env(), lambda m, a: m),
        (
            "debate-v0 (3 peers x 3 rounds)",
            "aec",
            lambda: debate_v0.env(num_agents=3, rounds=3, problems=problems),
            lambda m, a: plain[m],
        ),
        (
            "review-v0 (N=3, 5 rounds)",
            "aec",
            lambda: review_v0.env(num_agents=3, rounds=5, problems=problems),
            review_policy,
        ),
        (
            "escalation-v0 (k=3, 2 rounds)",
            "aec",
            lambda: escalation_v0.env(num_peers=3, debate_rounds=2, problems=problems),
            lambda m, a: plain[m],
        ),
        ("no-op parallel env (loop floor)", "parallel", NoOpParallel, lambda m, a: m),
        ("rps_v2 (classic parallel, baseline)", "parallel", lambda: rps_v2.parallel_env(), lambda m, a: m),
        (
            "cohort-v0 (N=3, G=5, peer_majority)",
            "parallel",
            lambda: cohort_v0.parallel_env(num_agents=3, reward_rule="peer_majority", problems=problems),
            lambda m, a: plain[m],
        ),
    ]
    load_before = os.getloadavg()
    envs = []
    for _, api, make, policy in cases:
        loop = aec_loop if api == "aec" else parallel_loop
        env = make()
        loop(env, policy, steps // 10, np.random.default_rng(0))  # warm caches (grading is lru-cached)
        envs.append((loop, env, policy))
    # Repeats go round-robin over the cases, so a change in the machine's load hits every row alike.
    best: list[tuple[int, float] | None] = [None] * len(cases)
    for r in range(args.repeats):
        for i, (loop, env, policy) in enumerate(envs):
            run = loop(env, policy, steps, np.random.default_rng(r))
            if best[i] is None or run[1] / run[0] < best[i][1] / best[i][0]:
                best[i] = run
    rows = [
        {
            "env": name,
            "api": api,
            "agent_steps": n,
            "steps_per_s": n / seconds,
            "us_per_agent_step": 1e6 * seconds / n,
        }
        for (name, api, _, _), (n, seconds) in zip(cases, best, strict=True)
    ]
    floor = {r["api"]: r["us_per_agent_step"] for r in rows if "loop floor" in r["env"]}
    base = {r["api"]: r["us_per_agent_step"] for r in rows if "baseline" in r["env"]}
    for row in rows:
        own = row["us_per_agent_step"] - floor[row["api"]]
        row["loop_floor_us"] = floor[row["api"]]
        row["own_us_per_agent_step"] = own
        row["vs_classic"] = row["us_per_agent_step"] / base[row["api"]]
        row["own_vs_classic"] = own / (base[row["api"]] - floor[row["api"]])
        row["own_share_of_10ms_llm_turn"] = own / LLM_TURN_US
        row["target_met"] = own <= TARGET_US
    header = (
        f"{'env':<38} {'steps/s':>8} {'us/step':>8} {'floor':>6} {'own us':>7} "
        f"{'own x classic':>13} {'own % of 10ms turn':>18} {'target met?':>11}"
    )
    print(header)
    print("-" * len(header))
    for r in rows:
        print(
            f"{r['env']:<38} {r['steps_per_s']:>8.0f} {r['us_per_agent_step']:>8.1f} "
            f"{r['loop_floor_us']:>6.1f} {r['own_us_per_agent_step']:>7.1f} {r['own_vs_classic']:>13.2f} "
            f"{100 * r['own_share_of_10ms_llm_turn']:>17.3f}% {'yes' if r['target_met'] else 'NO':>11}"
        )
    ours = [r for r in rows if r["env"].split("-v0")[0] in ("debate", "review", "escalation", "cohort")]
    summary = {
        "definition": "own us/agent-step = us/agent-step minus the no-op env's (same API, same loop)",
        "target_own_us_per_agent_step": TARGET_US,
        "loop_floor_us_per_agent_step": floor,
        "max_own_us_per_agent_step": max(r["own_us_per_agent_step"] for r in ours),
        "all_within_target": all(r["target_met"] for r in ours),
        "own_us_per_agent_step": {r["env"]: round(r["own_us_per_agent_step"], 2) for r in ours},
        "us_per_agent_step": {r["env"]: round(r["us_per_agent_step"], 2) for r in ours},
        "own_ratio_vs_classic": {r["env"]: round(r["own_vs_classic"], 2) for r in ours},
        "max_own_share_of_10ms_llm_turn": max(r["own_share_of_10ms_llm_turn"] for r in ours),
    }
    print(json.dumps(summary, indent=2))
    RESULT.parent.mkdir(parents=True, exist_ok=True)
    machine = {
        "cpus": os.cpu_count(),
        "reference_sum_range_100_us": round(reference_us(), 3),
        "load_average_1_5_15_before": [round(x, 2) for x in load_before],
        "load_average_1_5_15_after": [round(x, 2) for x in os.getloadavg()],
    }
    print(f"machine: {machine}")
    result = {"quick": args.quick, "repeats": args.repeats, "machine": machine, "rows": rows}
    RESULT.write_text(json.dumps({**result, "summary": summary}, indent=2) + "\n")


if __name__ == "__main__":
    main()
