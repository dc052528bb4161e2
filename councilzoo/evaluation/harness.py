"""``councilzoo eval``: play protocols on a dataset, score them, write the comparison report.

``Evaluation`` holds one agents config, the test problems and the dev problems, plays each
protocol's episodes with the ``RolloutEngine`` (one JSONL per run under ``OUT/episodes/``, so an
interrupted evaluation resumes where it stopped; the problems they were played on go to
``OUT/problems.jsonl``, since records name their problem by id only) and caches every
protocol's ``ProtocolResult`` (protocols reuse each other's runs: dense debate's rescue/harm is
measured against ``single``).
Dev problems (router and COMED thresholds) never overlap the test problems: synthetic dev sets
use another seed, named datasets another split, and ``Evaluation`` checks the ids.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from councilzoo import config
from councilzoo.agents.factory import build_models
from councilzoo.envs.types import EpisodeRecord
from councilzoo.evaluation import protocols, report
from councilzoo.evaluation.context import Run
from councilzoo.evaluation.council import CouncilConfig, agents_file, load_council
from councilzoo.evaluation.metrics import ProtocolResult
from councilzoo.evaluation.run_folder import PROBLEMS, check_rerun, file_digest, start_run
from councilzoo.learners.logging import cut_partial_line, read_metrics
from councilzoo.rollout import RolloutEngine
from councilzoo.tasks import Problem, load_problems

__all__ = [
    "PROTOCOL_ORDER", "Evaluation", "problems_for", "evaluate", "print_table", "run_and_report", "main",
]

PROTOCOL_ORDER = tuple(protocols.PROTOCOLS)


class Evaluation:
    """One agents config on one test set (see the module docstring)."""

    probe_seat = "peer_0"  # escalation-v0's probe

    def __init__(
        self,
        council: CouncilConfig,
        test: Sequence[Problem],
        dev: Sequence[Problem] | Callable[[], Sequence[Problem]],
        out: str | Path | None = None,
        *,
        num_envs: int = 32,
        progress: bool = True,
        seed: int = 0,
    ):
        if not test:
            raise ValueError("Evaluation needs at least one test problem")
        self.council, self.test = council, list(test)
        self._dev = dev
        self.out = None if out is None else Path(out)
        self.num_envs, self.progress, self.seed = num_envs, progress, seed
        self.models = build_models(council.models)
        self._results: dict[str, ProtocolResult] = {}
        self._singles: dict[tuple[str, str], ProtocolResult] = {}
        self._saved_problems: set[str] | None = None

    @cached_property
    def dev(self) -> list[Problem]:
        """Dev problems, loaded on first use and checked disjoint from the test problems."""
        return _checked_dev(self._dev() if callable(self._dev) else self._dev, self.test)

    def play(
        self, name: str, run: Run, problems: Sequence[Problem], label: str
    ) -> list[EpisodeRecord]:
        """Play ``run`` on ``problems``, streaming to ``OUT/episodes/<name>.jsonl`` (resumable);
        ``label`` names its progress bar (protocol and split, e.g. "comed · test")."""
        path = None if self.out is None else self.out / "episodes" / f"{name}.jsonl"
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._save_problems(problems)
        kwargs = {**run.env_kwargs, "problems": problems}  # the episodes pin their problem anyway
        engine = RolloutEngine(
            run.env_id,
            run.agents,
            self.num_envs,
            env_kwargs=kwargs,
            seed=self.seed,
            progress=self.progress,
            label=label,
            jsonl_path=path,
        )
        return engine.run(problems)

    def _save_problems(self, problems: Sequence[Problem]) -> None:
        """Append to ``OUT/problems.jsonl`` the problems it lacks (question, gold answer, metadata):
        what ``councilzoo view`` shows beside an episode. Images stay in the episode records."""
        path = self.out / PROBLEMS
        if self._saved_problems is None:
            cut_partial_line(path)
            self._saved_problems = {row["id"] for row in read_metrics(path)} if path.exists() else set()
        new = [p for p in problems if p.id not in self._saved_problems]
        with open(path, "a") as file:
            for problem in new:
                file.write(json.dumps({**problem.to_dict(), "images": []}) + "\n")
        self._saved_problems.update(p.id for p in new)

    def say(self, line: str) -> None:
        """One line when a phase ends (what a person following the run reads; off with progress)."""
        if self.progress:
            print(line, flush=True)

    def result(self, protocol: str) -> ProtocolResult:
        """The cached result of ``protocol`` (played on first request)."""
        if protocol not in protocols.PROTOCOLS:
            raise ValueError(f"unknown protocol {protocol!r}; known: {list(protocols.PROTOCOLS)}")
        if protocol not in self._results:
            result = self._results[protocol] = protocols.PROTOCOLS[protocol](self)
            row = result.summary(seed=self.seed)
            counted = "problems (oracle, from the other runs)" if result.oracle else "episodes"
            self.say(
                f"{protocol} · test: {row['n']} {counted}, accuracy {row['accuracy']:.3f}, "
                f"{row['calls']:.2f} calls/question"
            )
        return self._results[protocol]

    def _single(self, split: str, name: str) -> ProtocolResult:
        if split == "test" and name == self.council.anchor:
            return self.result("single")
        if (split, name) not in self._singles:
            if split == "test":
                problems, label = self.test, f"{name} alone · test"
            else:
                problems, label = self.dev, f"dev fit · router: {name} alone"
            self._singles[split, name] = protocols.model_alone(
                self, name, problems, f"{split}_single_{name}", label
            )
        return self._singles[split, name]

    def dev_single(self, name: str) -> ProtocolResult:
        """Model ``name`` alone on the dev problems (router training data)."""
        return self._single("dev", name)

    def test_single(self, name: str) -> ProtocolResult:
        """Model ``name`` alone on the test problems (only the hindsight oracle reads this)."""
        return self._single("test", name)

    @cached_property
    def _router_fit(self) -> tuple[Any, np.ndarray]:
        fit = protocols.fit_router(self)
        pool = self.council.router_pool
        alone = ", ".join(f"{name} {self.dev_single(name).correct.mean():.3f}" for name in pool)
        self.say(f"dev fit · router: {len(self.dev)} problems per model, accuracy alone {alone}")
        return fit

    @property
    def router(self):
        return self._router_fit[0]

    @property
    def router_oof(self) -> np.ndarray:
        return self._router_fit[1]

    @cached_property
    def anchor_draws(self) -> list[EpisodeRecord]:
        """The anchor's samples on the test problems (self-consistency's; COMED's gates replay them)."""
        return protocols.anchor_draws(self)

    @cached_property
    def comed_outcomes(self):
        """Every COMED path's outcome and cost on dev (the thresholds' and learned gates' data)."""
        return protocols.comed_dev_outcomes(self)

    @cached_property
    def comed_fit(self):
        thresholds, scores = fit = protocols.comed_thresholds(self)
        taus = " ".join(f"{k}={v:.3g}" for k, v in thresholds.to_dict().items())
        self.say(
            f"dev fit · comed: {len(protocols.DEV_GATES) * len(self.dev)} episodes, thresholds {taus}; "
            f"dev accuracy {scores['accuracy']:.3f}, escalation rate {scores['escalation_rate']:.3f}"
        )
        return fit

    def rows(self, names: Sequence[str]) -> list[dict[str, Any]]:
        return [self.result(name).summary(seed=self.seed) for name in names]


SYNTHETIC_DIFFICULTY = 0.5  # of synthetic test and dev problems when --difficulty is not given


def problems_for(
    dataset: str, split: str, limit: int | None, seed: int, path: str | None = None,
    difficulty: float | None = None,
) -> list[Problem]:
    """Test problems: ``synthetic:<kind>`` (seeded, around ``difficulty``) or a named/local dataset
    (``tasks.load_problems``), each with an answer to score against."""
    level = SYNTHETIC_DIFFICULTY if difficulty is None else difficulty
    return load_problems(dataset, split, seed=seed, path=path, limit=limit, difficulty=level,
                         require_answers=True)


def _dev_for(
    dataset: str, council: CouncilConfig, seed: int, path: str | None = None, difficulty: float | None = None
) -> Callable[[], list[Problem]]:
    """A loader of the dev problems for ``dataset`` (another seed or split, never the test, at the
    test's difficulty; from ``path`` when given, a local file in the dataset's schema)."""
    size = council.comed.dev_size
    split = "dev" if dataset.startswith("synthetic:") else council.comed.dev_split
    level = SYNTHETIC_DIFFICULTY if difficulty is None else difficulty
    return lambda: load_problems(dataset, split, seed=seed, limit=size, path=path, difficulty=level,
                                 require_answers=True)


def _checked_dev(dev: Sequence[Problem], test: Sequence[Problem]) -> list[Problem]:
    """``dev`` when it is disjoint from ``test`` and large enough to fit the router and COMED."""
    dev = list(dev)
    overlap = {p.id for p in dev} & {p.id for p in test}
    if overlap:
        raise ValueError(f"dev and test problems overlap ({len(overlap)} ids, e.g. {sorted(overlap)[:3]})")
    if len(dev) < 10:
        raise ValueError(f"need >= 10 dev problems to fit the router and COMED, got {len(dev)}")
    return dev


def evaluate(
    protocol: str,
    agents_cfg: str | Path | dict | CouncilConfig,
    problems: Sequence[Problem],
    dev: Sequence[Problem] | Callable[[], Sequence[Problem]] = (),
    out: str | Path | None = None,
    **kwargs: Any,
) -> ProtocolResult:
    """One protocol's result on ``problems`` (``dev`` is needed by routing, comed, oracle_gate)."""
    if isinstance(agents_cfg, (str, Path)):
        council = load_council(agents_cfg)
    else:
        council = config.load_config(agents_cfg, CouncilConfig)  # a mapping, or a CouncilConfig as it is
    return Evaluation(council, problems, dev, out, **kwargs).result(protocol)


def _parse_protocols(spec: str) -> list[str]:
    """The protocols of ``--protocol``: one name, a comma list or 'all'; an unknown name (with a
    did-you-mean) or one named twice is refused, every such mistake on its own line."""
    names = list(PROTOCOL_ORDER) if spec == "all" else [s.strip() for s in spec.split(",") if s.strip()]
    if not names:
        raise ValueError(f"--protocol {spec!r}: name one of {list(PROTOCOL_ORDER)} or 'all'")
    problems = [
        f"--protocol {spec!r}: unknown protocol {n!r}{config.did_you_mean(n, PROTOCOL_ORDER)}; choose from "
        f"{list(PROTOCOL_ORDER)} or 'all'"
        for n in dict.fromkeys(names)
        if n not in protocols.PROTOCOLS
    ]
    problems += [
        f"--protocol {spec!r}: {n!r} is named {names.count(n)} times; name each protocol once"
        for n in dict.fromkeys(names)
        if names.count(n) > 1
    ]
    if problems:
        raise ValueError("\n".join(problems))
    return names


def print_table(rows: list[dict[str, Any]], title: str) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    for col in ("protocol", *report.COLUMNS):
        table.add_column(col, justify="left" if col == "protocol" else "right")
    for row in rows:
        table.add_row(
            f"{row['protocol']} (oracle)" if row["oracle"] else row["protocol"], *report.table_cells(row)
        )
    Console(width=max(Console().width, 140)).print(table)


def run_and_report(ev: Evaluation, names: Sequence[str], out: str | Path, meta: dict[str, Any], title: str):
    rows = ev.rows(names)
    print_table(rows, title)
    paths = report.write(rows, out, meta, title)
    print(f"report: {paths['markdown']}  plots: {paths['frontier']}, {paths['rescue_harm']}")
    return rows


def _check_options(args: argparse.Namespace, names: Sequence[str]) -> None:
    """Refuse options that would be ignored: a synthetic set reads no file, only a synthetic set has
    a ``--difficulty``, and only the protocols fitted on dev problems read ``--dev-path``."""
    difficulty = getattr(args, "difficulty", None)
    if difficulty is not None and not args.dataset.startswith("synthetic:"):
        raise ValueError(
            f"--difficulty {difficulty}: only generated sets (synthetic:KIND) have a difficulty, "
            f"{args.dataset} does not; drop --difficulty"
        )
    if args.dataset.startswith("synthetic:"):
        for flag, value in (("--path", args.path), ("--dev-path", args.dev_path)):
            if value is not None:
                raise ValueError(
                    f"{flag} {value}: {args.dataset} is generated, it reads no file; drop {flag}, or pass "
                    f"--dataset jsonl (a file of problems) or a named dataset in that file's schema"
                )
    if args.dev_path is not None and not any(name in protocols.DEV_FITTED for name in names):
        raise ValueError(
            f"--dev-path {args.dev_path}: no protocol of {list(names)} is fitted on dev problems (only "
            f"{list(protocols.DEV_FITTED)} are); drop --dev-path"
        )


def main(args: argparse.Namespace) -> int:
    """``councilzoo eval --protocol P[,Q|all] --agents CONFIG --dataset NAME [--limit N]``.

    Everything that needs no model is checked first (flags, the output folder, the agents file,
    every problem, the dev split of protocols fitted on it, a rerun's settings), then the models
    are built and the episodes played."""
    problems: list[str] = []  # every independent input is checked; their mistakes reported together
    names = config.gather(problems, _parse_protocols, args.protocol) or []
    config.gather(problems, _check_options, args, names)
    config.gather(problems, config.check_output_dir, args.out)
    if problems:  # the flags' mistakes at once: checking the agents file imports its models' classes
        raise ValueError("\n".join(problems))
    council = config.gather(problems, load_council, args.agents)
    difficulty = getattr(args, "difficulty", None)
    test = config.gather(
        problems, problems_for, args.dataset, args.split, args.limit, args.seed, args.path, difficulty
    )
    if problems:
        raise ValueError("\n".join(problems))
    dev = _dev_for(args.dataset, council, args.seed, args.dev_path, difficulty)
    if any(name in protocols.DEV_FITTED for name in names):
        dev = _checked_dev(dev(), test)
    settings = {
        "command": "eval",
        "agents": config.config_to_dict(council),
        "dataset": args.dataset,
        "split": args.split,
        "path_sha256": file_digest(args.path),  # the files' contents, wherever they are read from
        "dev_path_sha256": file_digest(args.dev_path),
        "limit": args.limit,
        "seed": args.seed,
    }
    if difficulty is not None:  # absent otherwise, so runs from before the flag still match
        settings["difficulty"] = difficulty
    check_rerun(args.out, settings, args.overwrite)
    with agents_file(args.agents):  # the models are built here: a bad value names the file and line
        ev = Evaluation(council, test, dev, args.out, seed=args.seed)
    with config.run_lock(args.out):
        check_rerun(args.out, settings, args.overwrite)  # again: a run may have finished meanwhile
        start_run(args.out, settings, args.overwrite)
        meta = config.run_metadata(
            args.seed, agents=str(args.agents), dataset=args.dataset, split=args.split, n=len(test)
        )
        level = "" if difficulty is None else f" at difficulty {difficulty:g}"
        run_and_report(ev, names, args.out, meta, f"{args.dataset}{level}: {len(test)} problems")
    return 0
