"""TRACER's experiment config: plain dataclasses, loaded from YAML with ``councilzoo.config``.

Every field says what it means and its default (``metadata["help"]``); ``load_config`` rejects
unknown keys and wrong types with the dotted key path, and ``TracerConfig.__post_init__`` checks
the combinations before any work starts.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Literal

from councilzoo.agents.factory import ModelSpec, check_keywords, import_object
from councilzoo.config import ConfigError
from councilzoo.learners import engine
from councilzoo.learners.data import DataConfig
from councilzoo.learners.engine import check_trainer_overrides
from councilzoo.learners.logging import check_report_to
from councilzoo.learners.placement import split_round, updates_per_round
from councilzoo.learners.recipe_checks import check_sleep_mode
from councilzoo.learners.shared_base import check_turn_taking

__all__ = ["BASELINES", "ROLES", "GenerationConfig", "TracerDataConfig", "TracerConfig"]

BASELINES = ("always_speak", "never_review", "alternate", "random")
ROLES = ("proposer", "reviewer")
_CONSENSUS_VOTES = ("proposals", "proposals_and_reviews", "samples")  # label-free: whose answers vote


def _help(text: str, minimum: float | None = None, aliases: tuple[str, ...] = (), **kwargs):
    return field(metadata={"help": text, "minimum": minimum, "aliases": aliases}, **kwargs)


@dataclass
class EnvConfig:
    """review-v0's arguments."""

    num_agents: int = _help("Agents in review-v0 (N//2 proposers, the rest reviewers).", default=2)
    rounds: int = _help("Rounds R; odd rounds propose, even rounds review.", default=5)
    lam: float = _help(
        "Cost weight lambda of the team reward correct - lam * cost.", minimum=0.0, default=0.0
    )
    cost_unit: Literal["calls", "tokens"] = _help("What the cost counts.", default="calls")
    final_rule: Literal["last_pending", "majority"] = _help(
        "Final answer: the last pending proposal (TRACER) or the majority of proposals.",
        default="last_pending",
    )


@dataclass
class ControllerConfig:
    """The regret-matching controllers (``RegretMatchingController``) and their action values."""

    variant: Literal["rm+", "rm"] = _help("Regret matching+ (default) or plain RM.", default="rm+")
    averaging: Literal["uniform", "linear"] = _help("Weights of the average strategy.", default="uniform")
    exploration: float = _help("Uniform mixing in training play (voids the regret bound).", default=0.0)
    values: Literal["counterfactual", "myopic", "myopic_released"] = _help(
        "Action values: rollouts to the end (counterfactual), one-turn oracle scores with cost (myopic), "
        "or the release's cost-blind scores that never evaluate an untaken REFRESH.",
        default="counterfactual",
    )
    update: Literal["per_visit", "batch_mean"] = _help(
        "One RM iteration per decision (T = decisions), or per state per step on mean values "
        "(T = steps visiting the state).",
        default="per_visit",
    )
    eval_play: Literal["argmax", "sample"] = _help(
        "Evaluation plays the average strategy's argmax (random ties) or samples it.", default="argmax"
    )
    untrained: Literal["uniform", "error"] = _help(
        "Evaluation in a never-trained state: play uniformly or raise (always counted and reported).",
        default="uniform",
    )
    max_abs_score: int = _help("Vote-score buckets +-1..+-k (scores beyond are clipped).", default=2)
    with_round: bool = _help("Add the round number to the information state.", default=False)


@dataclass
class AgentsConfig:
    """Who plays: calibrated simulated agents, or LLMs."""

    kind: Literal["simulated", "llm"] = _help("Simulated agents or LLMs.", default="simulated")
    simulated: dict[str, dict[str, float]] = _help(
        "Per role ('proposer', 'reviewer'): SimulatedAgent keyword arguments (skill, catch_prob, "
        "false_alarm_prob, swayed_prob, correlation, ...).",
        default_factory=lambda: {"proposer": {"skill": 0.6}, "reviewer": {"skill": 0.6}},
    )
    models: dict[str, ModelSpec] = _help(
        "Per role ('proposer', 'reviewer'): an agent from the agents factory that `councilzoo eval` "
        "uses (type simulated | transformers | openai | package.module:Class, kwargs, agent), playing "
        "that role instead of the agent `kind` gives; an LLM run's trained proposer is not replaceable.",
        default_factory=dict,
    )
    model: str | None = _help("LLM: a local model directory or hub name.", default=None)
    share_model: bool = _help(
        "LLM: one model with role prompts for both roles (else the proposer's model trains and the "
        "reviewer is a frozen copy, or models.reviewer).",
        default=True,
    )
    train_reviewer: bool = _help(
        "LLM with share_model false: the reviewer trains too, by a GRPOTrainer of its own on its own "
        "turns and rewards (its own optimizer, schedule, checkpoints and metrics, in output_dir/reviewer/); "
        "the step is played once and each role trains on its own turns of it.",
        default=False,
    )
    shared_base: bool = _help(
        "LLM with share_model false and generation.peft: the roles share one copy of the base model. With "
        "train_reviewer each role trains a LoRA adapter of its own on it; without, the reviewer plays the "
        "base with the proposer's adapter switched off, instead of a frozen copy (the same episodes).",
        default=False,
    )
    render: str | None = _help(
        "LLM: import path 'package.module:function' of a prompt renderer (TurnContext -> chat "
        "messages) for the trained agents, e.g. the format a model was fine-tuned on; None: the "
        "project's role prompts.",
        default=None,
    )
    max_new_tokens: int = _help("LLM: tokens per utterance.", default=256)
    temperature: float = _help("LLM: sampling temperature (0: greedy).", minimum=0.0, default=1.0)
    stop: list[str] = _help("LLM: stop strings of every utterance.", default_factory=list)
    device: str = _help("LLM: torch device ('cpu', 'cuda', 'cuda:1', ...).", default="cpu")
    dtype: Literal["float32", "bfloat16", "float16"] = _help("LLM: weight dtype.", default="float32")


@dataclass
class GenerationConfig:
    """TRACER's utterance layer on TRL's GRPOTrainer: G candidates per speaking turn, role rewards."""

    enabled: bool = _help("Train the LLM with GSPO (needs agents.kind='llm').", default=False)
    num_candidates: int = _help("G candidates per REFRESH/SPEAK turn.", default=4)
    turns_per_step: int = _help(
        "Speaking turns trained per step (the trainer's prompts per round; resampled when fewer).", default=8
    )
    cost_penalty: float = _help(
        "Optional cost penalty: reward minus this times completion tokens / max_new_tokens.", default=0.0
    )
    minibatches: int = _help(
        "Updates per step: the step's turns_per_step x num_candidates completions split into this many "
        "minibatches, one optimizer step each (unless generation.trainer sets per_device_train_batch_size). "
        "From the second on the batch is off-policy, so GSPO's sequence ratio leaves 1 and its clip acts; "
        "with 1 update a round GSPO's gradient is GRPO's.",
        default=2,
    )
    trainer: dict = _help(
        "GRPOConfig fields (the release: lr 5e-6, grad clip 0.5, eps 0.1; GSPO by default).",
        default_factory=lambda: {"learning_rate": 5e-6, "max_grad_norm": 0.5, "epsilon": 0.1},
    )
    peft: dict | None = _help(
        "LoRA: peft.LoraConfig arguments (the release: r=8, lora_alpha=16); None trains all weights.",
        default_factory=lambda: {
            "r": 8,
            "lora_alpha": 16,
            "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj"],
        },
    )

    def __post_init__(self) -> None:
        check_trainer_overrides(self.trainer, "generation.trainer")
        if self.turns_per_step < 1:
            raise ValueError(f"generation.turns_per_step must be >= 1, got {self.turns_per_step}")
        batch = self.turns_per_step * self.num_candidates
        if self.minibatches < 1 or batch % self.minibatches:
            raise ValueError(f"generation.minibatches must be >= 1 and divide turns_per_step x "
                             f"num_candidates = {batch}, got {self.minibatches}")


@dataclass
class TracerDataConfig(DataConfig):
    """The training problems (every learner's ``DataConfig``) and the held-out sets evaluated at the
    end; synthetic sets share ``num_problems`` and ``difficulty``."""

    difficulty: float = _help(
        "Synthetic difficulty in [0, 1] (training and held-out sets).", default=0.5,
        aliases=("synthetic_difficulty",),
    )
    eval: list[str] = _help(
        "Evaluation sets (names as for dataset).", default_factory=lambda: ["synthetic:numeric"]
    )
    eval_split: str = _help("Split of the evaluation sets.", default="test")
    eval_limit: int | None = _help("Problems per evaluation set (None = all).", minimum=1, default=None)


@dataclass
class TracerConfig:
    """Everything ``councilzoo train tracer CONFIG`` needs."""

    seed: int = _help("The run seed; every draw derives from it.", default=0)
    max_steps: int = _help(
        "Training steps (one generation round each; with the utterance layer, generation.minibatches "
        "updates each).", default=50)
    output_dir: str = _help(
        "Output folder (metrics.jsonl, checkpoints, summary.json).", default="runs/tracer"
    )
    problems_per_step: int = _help("Problems per training batch.", default=32)
    num_processes: int = _help(
        "Processes of TRACER's world (data parallel; with GPUs one each): each plays its share of a "
        "step's problems and samples its share of the round (needs generation.enabled when above 1).",
        default=1,
    )
    episodes_per_problem: int = _help("Episodes per problem per step.", default=1)
    label_free: bool = _help("Train against peer-consensus labels instead of gold.", default=False)
    consensus_votes: str = _help(
        "Label-free: who votes for the consensus label: 'proposals' (every REFRESH answer), "
        "'proposals_and_reviews' (also the answer each reviewer states when it speaks), or 'samples' "
        "(consensus_samples fresh opening proposals per problem, drawn outside the episodes so no "
        "controller choice shapes them; each GSPO candidate scored against the other candidates of its "
        "group, leaving itself out).",
        default="proposals",
    )
    consensus_samples: int = _help("Label-free 'samples': fresh proposals per problem and step.", default=8)
    eval_every: int = _help("Evaluate every k steps (0 = only at the end).", default=0)
    save_steps: int = _help("Checkpoint every k steps (0 = only at the end).", default=10)
    save_total_limit: int = _help("Checkpoints kept.", default=2)
    report_to: list[str] = _help("Trackers: tensorboard, wandb, trackio.", default_factory=lambda: ["none"])
    baselines: list[str] = _help(
        f"Fixed protocols evaluated at the end, among {list(BASELINES)}.",
        default_factory=lambda: list(BASELINES),
    )
    env: EnvConfig = _help("review-v0's arguments.", default_factory=EnvConfig)
    controller: ControllerConfig = _help("The controller layer.", default_factory=ControllerConfig)
    agents: AgentsConfig = _help("The agents.", default_factory=AgentsConfig)
    generation: GenerationConfig = _help("The generation layer.", default_factory=GenerationConfig)
    data: TracerDataConfig = _help("The problems.", default_factory=TracerDataConfig)

    def __post_init__(self) -> None:
        for name in ("max_steps", "problems_per_step", "num_processes", "episodes_per_problem",
                     "save_total_limit"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        check_report_to(self.report_to)
        for name in ("eval_every", "save_steps"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.consensus_samples < 1:
            raise ValueError(f"consensus_samples must be >= 1, got {self.consensus_samples}")
        if self.consensus_votes not in _CONSENSUS_VOTES:
            raise ValueError(
                f"consensus_votes must be one of {list(_CONSENSUS_VOTES)}, got {self.consensus_votes!r}"
            )
        unknown = [b for b in self.baselines if b not in BASELINES]
        if unknown:
            raise ValueError(f"baselines {unknown} unknown; expected some of {list(BASELINES)}")
        if self.generation.enabled and self.agents.kind != "llm":
            raise ValueError("generation.enabled needs agents.kind='llm' (simulated agents have no weights)")
        if self.num_processes > 1 and not self.generation.enabled:
            raise ValueError("num_processes above 1 needs generation.enabled (a world trains a model; "
                             "controllers alone run in one process)")
        if self.generation.num_candidates < 2:
            raise ValueError("generation.num_candidates must be >= 2 (GSPO needs a group to compare)")
        if self.agents.kind == "llm" and not self.agents.model:
            raise ValueError("agents.kind='llm' needs agents.model (a local model directory or hub name)")
        self._check_role_models()
        if self.agents.render is not None:
            try:
                render = import_object(self.agents.render, "agents.render")
            except ValueError as err:
                raise ConfigError(str(err)) from None
            if not callable(render):
                raise ConfigError(f"agents.render {self.agents.render!r} is not callable")
        if not self.data.eval:
            raise ValueError("data.eval must name at least one evaluation set")
        if self.data.paraphrases:
            raise ValueError("data.paraphrases: TRACER's agents read the original wording; leave it out")
        check_sleep_mode(self.generation.trainer, ["TRACER's episodes"], "generation.trainer")

    def trainer_settings(self, world: int, cpu: bool | None = None) -> dict[str, Any]:
        """The ``GRPOConfig`` arguments of the utterance trainer in a world of ``world`` processes
        (what the placement plan stores): a round is ``turns_per_step`` turns x ``num_candidates``
        candidates of at most ``max_new_tokens``, trained in ``generation.minibatches`` updates unless
        ``generation.trainer`` chooses the micro-batch (``placement.split_round``). The trainer counts
        updates, so ``max_steps`` and ``save_steps`` are scaled by the updates a round: TRACER's
        steps stay generation rounds."""
        a, g = self.agents, self.generation
        micro = split_round(g.turns_per_step, g.num_candidates, world, g.minibatches, "generation")
        run = engine.RunSettings.of(self)
        per_round = engine.Round(g.turns_per_step, g.num_candidates, a.max_new_tokens)
        overrides = {"temperature": a.temperature, "save_total_limit": self.save_total_limit,
                     "per_device_train_batch_size": micro, **g.trainer}  # fmt: skip

        def settings(updates: int) -> dict[str, Any]:
            scaled = replace(run, max_steps=self.max_steps * updates, save_steps=self.save_steps * updates)
            return scaled.grpo_settings(per_round, f"tracer-{self.seed}", overrides, world, "generation", cpu)

        updates = updates_per_round(settings(1), world)
        return settings(1) if updates == 1 else settings(int(updates))

    def _check_role_models(self) -> None:
        models = self.agents.models
        unknown = sorted(set(models) - set(ROLES))
        if unknown:
            raise ValueError(f"agents.models has roles {unknown}; expected 'proposer' and 'reviewer'")
        if self.agents.kind == "llm" and "proposer" in models:
            raise ValueError("agents.models.proposer: with agents.kind='llm' the proposer is trained")
        a, g = self.agents, self.generation
        needs = {
            "agents.kind 'llm'": a.kind == "llm", "agents.share_model false": not a.share_model,
            "no agents.models.reviewer": "reviewer" not in models, "generation.enabled": g.enabled,
        }  # fmt: skip
        lora = {"generation.peft": bool(g.peft), "no use_vllm": not g.trainer.get("use_vllm")}
        one_process = {"num_processes 1": self.num_processes == 1}  # the role trainers take turns in one
        for option, required in (("train_reviewer", needs | one_process), ("shared_base", needs | lora)):
            missing = [need for need, met in required.items() if not met]
            if getattr(a, option) and missing:
                raise ValueError(f"agents.{option} needs: {missing}")
        if a.train_reviewer:  # two trainers taking turns in one process
            trainers = dict.fromkeys(ROLES, g.trainer)
            problems = check_turn_taking("agents.train_reviewer", trainers, self.report_to)
            if problems:
                raise ValueError("\n".join(problems))
        for role, spec in models.items():
            try:
                check_keywords(role, spec)
            except ConfigError as err:
                raise ConfigError(f"agents.{err}") from None
