"""LLMAgent with the offline tiny transformers model: every game to termination, bad output is data."""

from __future__ import annotations

import pytest
from hypothesis import settings

from councilzoo.agents import LLMAgent, Sampling, render_messages
from councilzoo.agents.base import Completion
from councilzoo.agents.controllers import FixedController
from councilzoo.agents.generators import GeneratorContractError
from councilzoo.envs.escalation_v0 import PHASE
from councilzoo.envs.types import SILENT_MODES, Mode, Turn, TurnContext
from councilzoo.rollout import RolloutEngine
from councilzoo.tasks import Problem, synthetic_problems
from councilzoo.testing import checks

CI = settings.get_profile("councilzoo-ci")
SAMPLING = Sampling(max_new_tokens=8, temperature=1.0, seed=0)


class ProbeThenEscalate:
    """A Controller (the protocol is one method): VERIFY at the gate, ESCALATE after the probe."""

    def choose(self, contexts: list[TurnContext]) -> list[Mode]:
        return [Mode.ESCALATE if ctx.features[PHASE] else Mode.VERIFY for ctx in contexts]


@pytest.fixture(scope="module")
def generator(tiny_model_dir):
    from councilzoo.agents import TransformersGenerator

    return TransformersGenerator(tiny_model_dir, device="cpu", seed=0)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("env_id", "kwargs"),
    [
        ("councilzoo/debate-v0", {"num_agents": 3, "rounds": 2}),
        ("councilzoo/review-v0", {"num_agents": 2, "rounds": 3}),
        ("councilzoo/escalation-v0", {"num_peers": 2, "debate_rounds": 1, "anchor_samples": 3}),
        ("councilzoo/cohort-v0", {"num_agents": 2, "num_samples": 2}),
    ],
)
def test_llm_agent_plays_every_game_to_the_end(generator, env_id, kwargs):
    problems = synthetic_problems("numeric", 2, seed=0)
    agents = {"*": LLMAgent(generator, sampling=SAMPLING)}
    if env_id == "councilzoo/escalation-v0":  # walk the longest path: probe, then debate
        agents["controller"] = LLMAgent(generator, controller=ProbeThenEscalate())
    engine = RolloutEngine(env_id, agents, env_kwargs=kwargs, num_envs=2, progress=False)
    records = engine.run(problems)
    assert [r.problem_id for r in records] == [p.id for p in problems]
    for record in records:
        spoken = [t for t in record.turns if t.mode not in SILENT_MODES]
        assert spoken and record.cost.calls >= len(spoken)
        for turn in spoken:  # learners get the tokens of every spoken turn
            assert turn.prompt_token_ids and turn.token_ids and len(turn.logprobs) == len(turn.token_ids)
            assert turn.cost.completion_tokens >= len(turn.token_ids)
    if env_id == "councilzoo/escalation-v0":
        assert all(r.info["path"] == "probe_escalate" for r in records)


def test_random_model_output_parses_to_no_answer(generator):
    """The untrained model writes noise: every action states no answer (check_agent below covers
    one legal action per context, calls, and never raising)."""
    problems = synthetic_problems("numeric", 4, seed=1)
    contexts = [TurnContext(0, "peer_0", "peer", 1, p, (), (Mode.SPEAK,), None, {}) for p in problems]
    actions = LLMAgent(generator, sampling=SAMPLING).act(contexts)
    assert all(a.answer is None and a.completion_tokens > 0 and a.prompt_tokens > 0 for a in actions)


def test_llm_agent_on_the_random_model_passes_check_agent(generator):
    """Noise from the untrained model, on contexts of every game and role and odd problems: one
    legal action per context, in order, with its calls and tokens, never an exception."""
    checks.check_agent(LLMAgent(generator, sampling=SAMPLING), max_batch=3, settings=CI)


@pytest.mark.slow
def test_anchor_draws_n_samples_and_commits_to_one(generator):
    problem = synthetic_problems("numeric", 1, seed=2)[0]
    ctx = TurnContext(0, "anchor", "anchor", 0, problem, (), (Mode.ANSWER,), None, {"num_samples": 3})
    (action,) = LLMAgent(generator, sampling=SAMPLING).act([ctx])
    assert len(action.samples) == 3 and action.text in action.samples and action.calls == 3


def test_prompts_show_the_role_and_what_others_said():
    problem = synthetic_problems("multiple_choice", 1, seed=3)[0]
    proposal = Turn("proposer_0", "proposer", 1, Mode.REFRESH, "So the answer is \\boxed{B}.", answer="B")
    ctx = TurnContext(0, "reviewer_0", "reviewer", 2, problem, (proposal,), (Mode.SKIP, Mode.SPEAK), None, {})
    system, user = render_messages(ctx)
    assert "review" in system["content"].lower()
    assert problem.question in user["content"] and "(A) " in user["content"]
    assert "\\boxed{B}" in user["content"] and "Verdict: RIGHT" in user["content"]
    custom = render_messages(ctx, {"reviewer": "Be terse."})
    assert custom[0]["content"] == "Be terse."


def test_verifier_prompt_shows_anchor_and_probe_answers():
    problem = synthetic_problems("numeric", 1, seed=4)[0]
    anchor = Turn("anchor", "anchor", 0, Mode.ANSWER, "I get \\boxed{12}.", answer="12")
    probe = Turn("peer_0", "probe", 0, Mode.ANSWER, "\\boxed{15}", answer="15")
    ctx = TurnContext(0, "verifier", "verifier", 0, problem, (anchor, probe), (Mode.ANSWER,), None,
                      {"anchor_answer": "12", "probe_answer": "15"})
    user = render_messages(ctx)[1]["content"]
    assert "\\boxed{12}" in user and "\\boxed{15}" in user


def test_non_generator_is_rejected():
    with pytest.raises(TypeError, match="generator"):
        LLMAgent(object())


class ContractBreaker:
    """A custom generator that answers ``"\\boxed{7}"`` but breaks its contract as told by ``flaw``."""

    def __init__(self, flaw: str | None = None) -> None:
        self.flaw = flaw

    def generate(self, prompts, n=1, sampling=None):
        results = [[Completion("\\boxed{7}") for _ in range(n)] for _ in prompts]
        if self.flaw == "fewer lists":
            return results[:-1]
        if self.flaw == "more lists":
            return [*results, results[0]]
        if self.flaw == "fewer completions":
            return [r[:-1] for r in results]
        if self.flaw == "more completions":
            return [[*r, r[0]] for r in results]
        if self.flaw == "text None":
            return [[Completion(None)] * n for _ in prompts]
        if self.flaw == "bare strings":
            return [["\\boxed{7}"] * n for _ in prompts]
        if self.flaw == "a dict":
            return {i: r for i, r in enumerate(results)}
        return results


ANCHOR = TurnContext(0, "anchor", "anchor", 0, synthetic_problems("numeric", 1, seed=5)[0], (),
                     (Mode.ANSWER,), None, {"num_samples": 3})
PEER = TurnContext(1, "peer_0", "peer", 1, synthetic_problems("numeric", 1, seed=6)[0], (),
                   (Mode.SPEAK,), None, {})


@pytest.mark.parametrize(
    ("flaw", "contexts", "breach"),
    [
        ("fewer lists", [PEER, PEER], "1 result lists for 2 prompts"),
        ("more lists", [PEER], "2 result lists for 1 prompts"),
        ("fewer completions", [ANCHOR], "prompt 0: 2 completions, asked for n=3"),
        ("more completions", [PEER, PEER], "prompt 0: 2 completions, asked for n=1"),
        ("fewer completions", [ANCHOR, PEER], "prompt 0: 0 completions, asked for n=1"),  # mixed n
        ("text None", [ANCHOR], "prompt 0, completion 0: text None is not a str"),
        ("bare strings", [PEER], "prompt 0, completion 0: a str, not a Completion"),
        ("a dict", [PEER], "it returned a dict, not a list"),
    ],
)
def test_a_generator_that_breaks_its_contract_fails_naming_the_backend(flaw, contexts, breach):
    agent = LLMAgent(ContractBreaker(flaw))
    named = rf"generator {__name__}\.ContractBreaker broke the Generator contract: {breach};"
    with pytest.raises(GeneratorContractError, match=named):
        agent.act(contexts)


def test_an_llm_agent_over_a_custom_generator_passes_check_agent():
    checks.check_agent(LLMAgent(ContractBreaker()), settings=CI)


def test_a_generator_that_keeps_its_contract_is_accepted_and_rollouts_check_it_too():
    (anchor, peer) = LLMAgent(ContractBreaker()).act([ANCHOR, PEER])
    assert anchor.answer == peer.answer == "7" and len(anchor.samples) == 3
    broken = {"*": LLMAgent(ContractBreaker("text None"))}
    engine = RolloutEngine("councilzoo/debate-v0", broken, progress=False)
    with pytest.raises(GeneratorContractError, match="ContractBreaker"):
        engine.run(synthetic_problems("numeric", 2, seed=0))


def test_seats_of_one_local_model_share_its_weights(tiny_model_dir):
    """A council seating one transformers model five times loads it once (a real model's weights
    five times over would not fit where one copy does); other settings get their own copy."""
    from councilzoo.agents.factory import ModelSpec, build_models

    same = {"model": str(tiny_model_dir), "dtype": "float32"}
    specs = {
        "anchor": ModelSpec("transformers", dict(same), {"sampling": {"temperature": 0.7, "seed": 0}}),
        "peer": ModelSpec("transformers", dict(same), {"role_prompts": {"peer": "Be brief."}}),
        "bf16": ModelSpec("transformers", {**same, "dtype": "bfloat16"}),
    }
    agents = build_models(specs)
    assert agents["anchor"].generator is agents["peer"].generator
    assert agents["bf16"].generator is not agents["anchor"].generator
    assert agents["anchor"].sampling != agents["peer"].sampling  # each seat keeps its own settings


class CutShort:
    """A generator whose every reply ran into the token limit mid-sentence, as SmolLM2's did at a
    64-token cap ("so the answer is 4 + 6")."""

    def generate(self, prompts, n=1, sampling=None):
        text = "Multiply 2 times the number of shells, so the answer is 4 + 6"
        return [[Completion(text, finish_reason="length") for _ in range(n)] for _ in prompts]


def test_a_reply_at_the_token_limit_is_recorded_truncated_and_states_no_answer():
    """Before, every turn recorded truncated: false and the answer "4" was read from the cut sentence."""
    engine = RolloutEngine("councilzoo/debate-v0", {"*": LLMAgent(CutShort())}, progress=False)
    (record,) = engine.run(synthetic_problems("numeric", 1, seed=0))
    speaking = [t for t in record.turns if t.text]
    assert speaking and all(t.truncated and t.answer is None for t in speaking)
    assert record.final_answer is None


class SometimesCut:
    """Samples alternately cut at the token limit (uncut, they would read 41) and finished."""

    def generate(self, prompts, n=1, sampling=None):
        cut = Completion("6 * 7 = 41. Now check 6 * 7 again and", finish_reason="length")
        replies = [cut, Completion("So 6 * 7 = 42.")]
        return [[replies[i % 2] for i in range(n)] for _ in prompts]


def test_an_escalation_anchors_cut_samples_are_read_as_cut_by_the_env():
    """The anchor's samples are re-read by escalation-v0 (for the plurality and its consistency
    feature); before, their cut flags were lost there and the three cut samples outvoted the two
    finished ones with 41."""
    problem = Problem("q", "What is 6 * 7?", "42", kind="numeric")
    gate = LLMAgent(SometimesCut(), controller=FixedController(Mode.ACCEPT))
    agents = {"*": LLMAgent(SometimesCut()), "controller": gate}
    kwargs = {"num_peers": 1, "anchor_samples": 5}
    engine = RolloutEngine("councilzoo/escalation-v0", agents, env_kwargs=kwargs, progress=False)
    (record,) = engine.run([problem])
    anchor = record.turns[0]
    assert anchor.samples_truncated == (True, False, True, False, True)
    assert record.final_answer == "42" and record.info["anchor_correct"] is True


def test_the_concise_prompt_style_asks_for_the_number_and_a_bad_style_is_refused():
    (request,) = LLMAgent(ContractBreaker(), prompt_style="concise").plan([ANCHOR])
    assert request.messages[-1]["content"].endswith("Answer with the number only.")
    (default,) = LLMAgent(ContractBreaker()).plan([ANCHOR])
    assert default.messages[-1]["content"].endswith("\\boxed{...}.")
    with pytest.raises(ValueError, match="prompt style must be one of"):
        LLMAgent(ContractBreaker(), prompt_style="terse")


def test_the_few_shot_style_shows_worked_examples_to_answering_roles_only():
    from councilzoo.agents.prompts import EXEMPLARS

    (request,) = LLMAgent(ContractBreaker(), prompt_style="few_shot").plan([ANCHOR])
    roles = [m["role"] for m in request.messages]
    assert roles == ["system"] + ["user", "assistant"] * len(EXEMPLARS) + ["user"]
    assert request.messages[2]["content"] == EXEMPLARS[0][1]
    assert request.messages[-1]["content"].endswith("End with: The answer is N.")
    verifier = TurnContext(0, "verifier", "verifier", 0, ANCHOR.problem, (), (Mode.ANSWER,), ANCHOR.features)
    assert [m["role"] for m in render_messages(verifier, style="few_shot")] == ["system", "user"]


def test_a_tokenizer_without_a_chat_template_is_prompted_with_completion_text(tiny_model_dir):
    """A base model (no chat template) reads the conversation as plain text after its BOS token,
    worked examples answered, ending on the open "Answer:" it completes."""
    from transformers import AutoTokenizer

    from councilzoo.agents.generators.chat_template import render_prompt

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    tokenizer.chat_template, tokenizer.bos_token = None, tokenizer.eos_token
    (request,) = LLMAgent(ContractBreaker(), prompt_style="few_shot").plan([ANCHOR])
    text = tokenizer.decode(render_prompt(tokenizer, request.messages))
    assert text.startswith(tokenizer.bos_token + request.messages[0]["content"] + "\n\n")
    assert "\nAnswer: 4 + 3 = 7. The answer is 7.\n\n" in text
    assert text.endswith(request.messages[-1]["content"] + "\nAnswer:")
