"""The ``councilzoo`` command: demo, eval, train, repro, view.

Each subcommand lives with the code it drives; this module only parses arguments and dispatches,
importing heavy modules lazily so ``councilzoo --help`` stays instant. Every user mistake (a flag,
a config file, an agent spec, a dataset, a model, an endpoint, a missing extra) ends as ONE line
on stderr, ``councilzoo <cmd>: error: <what and where, how to fix>``, with exit status 2 (a file
with several mistakes: one such line per mistake, all from one run);
``COUNCILZOO_TRACEBACK=1`` re-raises it with its traceback instead. Ctrl-C ends as one line too
(what rerunning does) with exit status 130, and so do a full disk and a file that cannot be
read or written (exit status 2, naming the file). Each
subcommand is one ``_add_<name>`` function listed in ``SUBCOMMANDS``; its help states every
option's default.
"""

from __future__ import annotations

import argparse
import errno
import os
import sys

__all__ = ["build_parser", "main"]


class _Parser(argparse.ArgumentParser):
    """argparse with its usage errors on one line (no usage block), like every other error."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _at_least(minimum: int):
    """An argparse type: an integer >= ``minimum`` (argparse names the flag in the error)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be an integer >= {minimum}, got {value}")
        return value

    parse.__name__ = f"integer >= {minimum}"
    return parse


def _name_and_folder(text: str) -> tuple[str, str]:
    """An argparse type: ``NAME=FOLDER``."""
    name, sep, folder = text.partition("=")
    if not (sep and name and folder):
        raise argparse.ArgumentTypeError(f"expected NAME=FOLDER, got {text!r}")
    return name, folder


def _positive_number(text: str) -> float:
    """An argparse type: a finite number > 0, checked by the configs' own number check."""
    from councilzoo.config import check_number

    try:
        value = float(text)
        check_number(value, "", above=0)
    except ValueError:  # the check's ConfigError included
        raise argparse.ArgumentTypeError(f"expected a finite number > 0, got {text!r}") from None
    return value


_positive_number.__name__ = "number > 0"


def _user_errors() -> tuple[type[BaseException], ...]:
    """Exceptions that report a mistake in what the user gave or has (bad input, no network, no
    server, a missing extra): printed as one line, never a traceback."""
    from councilzoo.agents.generators.checks import GenerationError
    from councilzoo.agents.generators.model_lookup import ModelNotCachedError
    from councilzoo.config import MissingExtraError
    from councilzoo.sandbox import SandboxRefused
    from councilzoo.tasks.datasets import DatasetUnavailableError

    return (
        ValueError, FileNotFoundError, GenerationError, MissingExtraError, ModelNotCachedError,
        DatasetUnavailableError, SandboxRefused,
    )


def _full_disk(err: OSError, on_interrupt: str) -> str:
    """A full disk in words: what finished is on disk (episodes, checkpoints) and a rerun resumes."""
    where = f" writing {err.filename}" if err.filename else ""
    rerun = on_interrupt.removeprefix("interrupted; ")
    return f"no space left on the device{where}; the finished work is kept: free some space, then {rerun}"


def _demo(args: argparse.Namespace) -> int:
    from councilzoo.evaluation.demo import run_demo

    return run_demo(
        out=args.out, model=args.model, endpoint=args.endpoint, limit=args.limit, seed=args.seed,
        overwrite=args.overwrite,
    )


def _eval(args: argparse.Namespace) -> int:
    from councilzoo.evaluation.harness import main as eval_main

    return eval_main(args)


def _train(args: argparse.Namespace) -> int:
    from councilzoo.config import check_file

    check_file(args.config)  # before the learners' imports (torch, TRL: seconds)
    from councilzoo.learners.train import main as train_main

    return train_main(args)


def _paraphrase(args: argparse.Namespace) -> int:
    from councilzoo.config import check_output_file
    from councilzoo.tasks import load_problems
    from councilzoo.tasks.rephrase import write_paraphrases

    out = check_output_file(args.out)  # before the dataset is read
    problems = load_problems(args.dataset, args.split, path=args.path, limit=args.limit)
    out.parent.mkdir(parents=True, exist_ok=True)
    counts = write_paraphrases(problems, out)
    summary = ", ".join(f"{n} with {k} paraphrase(s)" for k, n in counts.items())
    print(f"{len(problems)} items -> {args.out}: {summary}")
    return 0


def _repro(args: argparse.Namespace) -> int:
    from councilzoo.repro import main as repro_main

    return repro_main(args)


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Every option's default in its help; a default of None is said in words by the help itself."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.required or action.default is None or action.default is False:
            return action.help
        return super()._get_help_string(action)


INTERRUPTED = "interrupted; rerun the same command to resume"
OUT_HELP = (
    "output folder; a rerun with the same settings resumes its episodes, one with other settings is "
    "refused unless --overwrite"
)
OVERWRITE_HELP = "discard the episodes in --out (played with other settings) and start afresh"


def _subcommand(sub, name: str, summary: str, description: str, func) -> argparse.ArgumentParser:
    """One subcommand: ``summary`` in the top-level list, ``description`` atop its own --help."""
    command = sub.add_parser(
        name,
        help=summary,
        description=f"{summary[0].upper()}{summary[1:]}. {description}",
        formatter_class=_HelpFormatter,
    )
    command.set_defaults(func=func, on_interrupt=INTERRUPTED)
    return command


def _view(args: argparse.Namespace) -> int:
    from councilzoo.viewer import serve

    return serve(args.out, args.port, args.open)


def _add_demo(sub) -> None:
    demo = _subcommand(
        sub, "demo", "compare every collaboration protocol on the embedded default (offline, CPU)",
        "A simulated council (configs/demo_agents.yaml) on seeded synthetic numeric problems, or one "
        "real model in every seat with --model or --endpoint. Prints the protocols' table and writes "
        "report.json, report.md and plots into --out.",
        _demo,
    )
    demo.add_argument("--out", default="demo-out", help=OUT_HELP)
    demo.add_argument("--overwrite", action="store_true", help=OVERWRITE_HELP)
    demo.add_argument("--model", default=None, help="a local model directory or hub name (uses real models)")
    demo.add_argument("--endpoint", default=None, help="an OpenAI-compatible base URL (uses real models)")
    demo.add_argument(
        "--limit", type=_at_least(1), default=None,
        help="number of test problems (default: 300 simulated, 20 with a real model)",
    )
    demo.add_argument("--seed", type=_at_least(0), default=0, help="seed of the problems and the agents")


def _add_eval(sub) -> None:
    from councilzoo.evaluation.protocols import PROTOCOLS
    from councilzoo.tasks import DATASETS
    from councilzoo.tasks.source import MAX_SYNTHETIC_PROBLEMS, SPLIT_SEED_OFFSETS
    from councilzoo.tasks.synthetic import TASKS

    ev = _subcommand(
        sub, "eval", "evaluate collaboration protocols on a dataset",
        "Plays each protocol's episodes with the agents config, prints the protocols' table and writes "
        "report.json, report.md, plots and OUT/episodes/*.jsonl. Routing and the COMED gates are fitted "
        "on dev problems that never overlap the test problems.",
        _eval,
    )
    ev.add_argument(
        "--protocol", required=True,
        help=f"one protocol, a comma list (single,comed) or 'all'; protocols: {', '.join(PROTOCOLS)}",
    )
    ev.add_argument("--agents", required=True, help="agents config (YAML), e.g. configs/demo_agents.yaml")
    ev.add_argument(
        "--dataset", required=True,
        help=f"a named dataset ({', '.join(DATASETS)}), jsonl/json (a local file of problems, with "
        f"--path), or synthetic:KIND (KIND: {', '.join(TASKS)})",
    )
    ev.add_argument(
        "--split", default="test",
        help=f"split of the test problems; synthetic sets have {', '.join(SPLIT_SEED_OFFSETS)}",
    )
    ev.add_argument("--path", default=None, help="local JSON/JSONL/Parquet/CSV file of the dataset's rows")
    ev.add_argument("--dev-path", default=None,
                    help="local file of the dev problems (routing and COMED fit on them), same schema")
    ev.add_argument(
        "--limit", type=_at_least(1), default=None,
        help=f"number of test problems, a seeded sample (default: all; synthetic sets: 200, at most "
        f"{MAX_SYNTHETIC_PROBLEMS:,})",
    )
    ev.add_argument(
        "--difficulty", type=float, default=None,
        help="difficulty in [0, 1] of a synthetic set's test and dev problems (default 0.5)",
    )
    ev.add_argument("--out", default="runs/eval", help=OUT_HELP)
    ev.add_argument("--overwrite", action="store_true", help=OVERWRITE_HELP)
    ev.add_argument("--seed", type=_at_least(0), default=0, help="seed of the problems, sample and agents")


def _add_train(sub) -> None:
    from councilzoo.learners import learner_names

    tr = _subcommand(
        sub, "train", "train with a learner",
        "Reads the experiment config, applies --set overrides and checks it, and the output folder, "
        "before any model loads. Writes checkpoints, metrics.jsonl and the resolved config into "
        "the config's output_dir (or --out).",
        _train,
    )
    tr.set_defaults(on_interrupt="interrupted; rerun the same command with --resume to continue")
    tr.add_argument(
        "learner", help=f"one of {', '.join(learner_names())}, or package.module:Class of your own"
    )
    tr.add_argument("config", help="experiment config (YAML), e.g. configs/corl_cpu.yaml")
    tr.add_argument("--set", action="append", metavar="KEY.SUB=VALUE",
                    help="override a config value (repeatable), e.g. --set trainer.learning_rate=1e-6")
    tr.add_argument("--out", default=None, help="output folder (default: the config's output_dir)")
    tr.add_argument(
        "--max-steps", type=_at_least(1), default=None,
        help="training steps (default: the config's max_steps)",
    )
    tr.add_argument(
        "--dry-run", action="store_true",
        help="train nothing: print each trained model's world size, batch, rounds, memory, sharding, "
        "held-out set and every warning; exit 2 on a setting the docs call wrong (no GPU, no download)",
    )
    tr.add_argument("--gpu-memory", type=_positive_number, default=80.0, metavar="GIB",
                    help="--dry-run: memory of one GPU in GiB (default 80)")
    again = tr.add_mutually_exclusive_group()
    again.add_argument("--resume", action="store_true", help="continue the run in the output folder")
    again.add_argument(
        "--overwrite", action="store_true", help="discard the output folder's checkpoints first"
    )
    tr.add_argument(
        "--allow-changed-settings", action="store_true",
        help="with --resume: continue with settings other than the run's (recorded in the output folder)",
    )
    tr.add_argument("--members", default=None,
                    help="cohorts: start only these member indices (e.g. 1,2)")
    tr.add_argument("--hosts", default=None, metavar="HOSTS",
                    help="cohorts: plan the worlds on these hosts (names or addresses, SLURM's list form: "
                    "gpu[01-04]); each host's launcher starts its own nodes")
    tr.add_argument("--gpus-per-host", type=int, default=0, metavar="N",
                    help="with --hosts: GPUs of each host (default 0: processes on CPUs)")
    tr.add_argument("--host", default=None,
                    help="with --hosts: which of them this machine is (default: its host name)")
    tr.add_argument("--slurm", action="store_true",
                    help="cohorts: plan the worlds on this SLURM job's allocation and start each as an srun "
                    "step (scripts/slurm/corl.sbatch)")


def _add_repro(sub) -> None:
    rp = _subcommand(
        sub, "repro", "reproduce a paper's central claim at toy scale",
        "Each claim writes OUT/CLAIM/report.md and report.json and prints HELD or NOT HELD with its "
        "reason. Tiny models are built once and cached under $COUNCILZOO_CACHE (~/.cache/councilzoo).",
        _repro,
    )
    rp.set_defaults(on_interrupt="interrupted; rerun the same command to start again (models stay cached)")
    rp.add_argument(
        "claim",
        choices=["corl", "comed", "tracer", "all", "corl-dose", "corl-cotrain", "real", "tracer-label-free",
                 "cross-family"],
        help="which paper's claim: corl (Co-RL), comed (COMED), tracer (TRACER) or all three; not in "
        "all, each with its own time budget: corl-dose (Co-RL's gain against its peers' skill), "
        "corl-cotrain (Co-RL co-trained with partners of another family against TTRL), real "
        "(Co-RL against TTRL and supervised GRPO on SmolLM2-135M-Instruct), tracer-label-free "
        "(TRACER's utterance layer with its label-free arms and single-agent GRPO control) and "
        "cross-family (Co-RL with SmolLM2 and Gemma-3-270M in one cohort)",
    )
    rp.add_argument("--out", default="runs/repro", help="output folder (one subfolder per claim)")
    rp.add_argument(
        "--seeds", type=_at_least(2), default=None,
        help="seeds per claim, at least 2: the checks are intervals over seeds (default: each claim's own)"
    )
    rp.add_argument("--quick", action="store_true", help="a smaller, faster run (fewer steps and problems)")
    rp.add_argument("--gpu", action="store_true",
                    help="cross-family only: the experiment at the paper's sizes on one GPU (vLLM colocated, "
                    "bf16; docs/reproductions.md, 'GPU recipe')")
    rp.add_argument("--model", action="append", type=_name_and_folder, default=None, metavar="NAME=FOLDER",
                    help="cross-family only, repeatable: load the registered model NAME from FOLDER (e.g. a "
                    "stand-in), still prompted by NAME's registered setting")
    rp.add_argument("--jobs", type=_at_least(1), default=None,
                    help="with 'all': claims run in this many processes (default: one per CPU core)")


def _add_paraphrase(sub) -> None:
    pp = _subcommand(
        sub, "paraphrase", "write answer-preserving paraphrases of a training set (co-training views)",
        "Deterministic rewrites of each question's sentences (question first; reworded), each kept only "
        "if it holds exactly the question's numbers. Writes one JSONL line per item for a cohort "
        "config's data.paraphrases.",
        _paraphrase,
    )
    pp.add_argument("dataset", help="a named dataset (e.g. gsm8k), jsonl/json with --path, or synthetic:KIND")
    pp.add_argument("--split", default="train", help="split to rephrase")
    pp.add_argument("--path", default=None, help="local JSON/JSONL/Parquet/CSV file of the dataset's rows")
    pp.add_argument("--limit", type=_at_least(1), default=None, help="at most this many items (default: all)")
    pp.add_argument("--out", required=True, help="the JSONL file to write")


def _add_view(sub) -> None:
    vw = _subcommand(
        sub, "view", "see an output folder in the browser: protocols, episodes, curves",
        "Serves a local page (no network needed) for the --out folder of eval, demo, train or repro: the "
        "protocols' table and frontier, every episode as a conversation with filters, training curves "
        "and TRACER's controller policies.",
        _view,
    )
    vw.set_defaults(on_interrupt="stopped")
    vw.add_argument("out", help="the --out folder of eval, demo, train or repro")
    vw.add_argument("--port", type=_at_least(0), default=8765, help="local port (0: any free one)")
    vw.add_argument("--open", action="store_true", help="also open the page in the default browser")


SUBCOMMANDS = (_add_demo, _add_eval, _add_train, _add_paraphrase, _add_repro, _add_view)


def build_parser() -> argparse.ArgumentParser:
    from councilzoo import __version__

    parser = _Parser(
        prog="councilzoo",
        description=__doc__.splitlines()[0].replace("``", ""),
        epilog="A mistake in the input ends as one line on stderr and exit status 2; "
        "COUNCILZOO_TRACEBACK=1 shows the traceback instead. Ctrl-C ends with exit status 130.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in SUBCOMMANDS:
        add(sub)
    parser.commands = sub.choices  # name -> subcommand parser, so errors carry the command's name
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:  # argparse exits on --help and on usage errors; main returns the status either way
        args, unknown = parser.parse_known_args(argv)
        if unknown:
            parser.commands[args.command].error(f"unrecognized arguments: {' '.join(unknown)}")
    except SystemExit as done:
        return int(done.code or 0)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:  # Ctrl-C: finished episodes and checkpoints are on disk
        print(f"\ncouncilzoo {args.command}: {args.on_interrupt}", file=sys.stderr)
        return 130
    except Exception as err:  # a user's mistake or a full disk: one line, not a traceback
        if os.environ.get("COUNCILZOO_TRACEBACK"):
            raise
        if isinstance(err, OSError) and err.errno in (errno.ENOSPC, errno.EDQUOT):
            print(f"councilzoo {args.command}: error: {_full_disk(err, args.on_interrupt)}", file=sys.stderr)
            return 2
        if isinstance(err, OSError) and err.filename and not isinstance(err, _user_errors()):
            print(f"councilzoo {args.command}: error: {err.filename}: {err.strerror}", file=sys.stderr)
            return 2  # a file that cannot be written or read (read-only, a file where a folder was)
        if not isinstance(err, _user_errors()):
            raise
        for problem in str(err).splitlines() or [""]:  # several mistakes: one line each
            print(f"councilzoo {args.command}: error: {' '.join(problem.split())}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
