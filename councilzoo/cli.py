"""The ``councilzoo`` command: demo, eval, train, repro, view.

Each subcommand lives with the code it drives; this module only parses arguments and dispatches,
importing heavy modules lazily so ``councilzoo --help`` stays instant. Every user mistake (a flag,
a config file, an agent spec, a dataset, a model, an endpoint, a missing extra) ends as ONE line
on stderr, ``councilzoo <cmd>: error: <what and where, how to fix>``, with exit status 2;
``COUNCILZOO_TRACEBACK=1`` re-raises it with its traceback instead.
"""

from __future__ import annotations

import argparse
import os
import sys


class _Parser(argparse.ArgumentParser):
    """argparse with its usage errors on one line (no usage block), like every other error."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def at_least(minimum: int):
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


def _user_errors() -> tuple[type[BaseException], ...]:
    """Exceptions that report a mistake in what the user gave or has (bad input, no network, no
    server, a missing extra): printed as one line, never a traceback."""
    from councilzoo.agents.generators.common import GenerationError, MissingExtraError, ModelNotCachedError
    from councilzoo.tasks.datasets import DatasetUnavailableError

    return (
        ValueError, FileNotFoundError, GenerationError, MissingExtraError, ModelNotCachedError,
        DatasetUnavailableError,
    )


def _demo(args: argparse.Namespace) -> int:
    from councilzoo.evaluation.demo import run_demo

    return run_demo(out=args.out, model=args.model, endpoint=args.endpoint, limit=args.limit, seed=args.seed)


def _eval(args: argparse.Namespace) -> int:
    from councilzoo.evaluation.harness import main as eval_main

    return eval_main(args)


def _train(args: argparse.Namespace) -> int:
    from councilzoo.learners.train import main as train_main

    return train_main(args)


def _repro(args: argparse.Namespace) -> int:
    from councilzoo.repro import main as repro_main

    return repro_main(args)


def _view(args: argparse.Namespace) -> int:
    from councilzoo.viewer import serve

    return serve(args.out, args.port, args.open)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="councilzoo",
        description=__doc__.splitlines()[0],
        epilog="A mistake in the input ends as one line on stderr and exit status 2; "
        "COUNCILZOO_TRACEBACK=1 shows the traceback instead.",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser(
        "demo", help="compare every collaboration protocol on the embedded default (offline, CPU)"
    )
    demo.add_argument("--out", default="demo-out", help="output folder for report.json, report.md and plots")
    demo.add_argument("--model", default=None, help="a local model directory or hub name (uses real models)")
    demo.add_argument("--endpoint", default=None, help="an OpenAI-compatible base URL (uses real models)")
    demo.add_argument(
        "--limit", type=at_least(1), default=None, help="number of problems (default: the demo's own)"
    )
    demo.add_argument("--seed", type=at_least(0), default=0)
    demo.set_defaults(func=_demo)

    ev = sub.add_parser("eval", help="evaluate a collaboration protocol on a dataset")
    ev.add_argument(
        "--protocol", required=True, help="comed | debate | single | self_consistency | routing | ..."
    )
    ev.add_argument("--agents", required=True, help="agents config (YAML)")
    ev.add_argument("--dataset", required=True, help="dataset name (gsm8k, math500, ...) or synthetic:<kind>")
    ev.add_argument("--split", default="test")
    ev.add_argument("--path", default=None, help="local JSON/JSONL file for the dataset")
    ev.add_argument("--dev-path", default=None,
                    help="local file of the dev problems (routing and COMED fit on them), same schema")
    ev.add_argument("--limit", type=at_least(1), default=None)
    ev.add_argument("--out", default="runs/eval")
    ev.add_argument("--seed", type=at_least(0), default=0)
    ev.set_defaults(func=_eval)

    tr = sub.add_parser("train", help="train with a learner: corl, tracer, grpo, ttrl, rent, intuitor, ...")
    tr.add_argument("learner")
    tr.add_argument("config", help="experiment config (YAML)")
    tr.add_argument("--set", action="append", metavar="KEY.SUB=VALUE",
                    help="override a config value (repeatable), e.g. --set trainer.learning_rate=1e-6")
    tr.add_argument("--out", default=None, help="override the config's output_dir")
    tr.add_argument("--max-steps", type=at_least(1), default=None, help="override the config's max_steps")
    tr.add_argument("--resume", action="store_true", help="continue the run in the output folder")
    tr.add_argument("--overwrite", action="store_true", help="discard the output folder's checkpoints first")
    tr.add_argument("--members", default=None,
                    help="cohorts: start only these member indices on this node (e.g. 1,2; multi-node)")
    tr.set_defaults(func=_train)

    rp = sub.add_parser("repro", help="reproduce a paper's central claim at toy scale")
    rp.add_argument("claim", choices=["corl", "comed", "tracer", "all"])
    rp.add_argument("--out", default="runs/repro")
    rp.add_argument("--seeds", type=at_least(1), default=None)
    rp.add_argument("--quick", action="store_true")
    rp.add_argument("--jobs", type=at_least(1), default=None,
                    help="with 'all': claims run in this many processes (default: one per CPU core)")
    rp.set_defaults(func=_repro)
    vw = sub.add_parser("view", help="see an output folder in the browser: protocols, episodes, curves")
    vw.add_argument("out", help="the --out folder of eval, demo, train or repro")
    vw.add_argument("--port", type=at_least(0), default=8765,
                    help="local port (default: 8765; 0: any free one)")
    vw.add_argument("--open", action="store_true", help="also open the page in the default browser")
    vw.set_defaults(func=_view)
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
    except Exception as err:  # a user's mistake: one line, not a traceback
        if os.environ.get("COUNCILZOO_TRACEBACK") or not isinstance(err, _user_errors()):
            raise
        print(f"councilzoo {args.command}: error: {' '.join(str(err).split())}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
