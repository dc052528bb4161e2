"""The command line: bad input is one line and exit 2 before work (more rows in test_cli_errors.py), a
rerun resumes only what the same settings played, Ctrl-C is one line and exit 130, and the help
teaches every subcommand and option."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import councilzoo
from councilzoo.cli import build_parser, main
from councilzoo.evaluation.protocols import PROTOCOLS
from councilzoo.learners import learner_names
from councilzoo.tasks import load_problems

ROOT = Path(__file__).resolve().parents[1]
AGENTS = str(ROOT / "configs" / "demo_agents.yaml")
BAD_EVAL = ["eval", "--protocol", "nope", "--agents", AGENTS, "--dataset", "synthetic:numeric"]


@pytest.fixture(autouse=True)
def _no_traceback(monkeypatch):
    monkeypatch.delenv("COUNCILZOO_TRACEBACK", raising=False)


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (BAD_EVAL, "unknown protocol 'nope'"),
        (["train", "corl", "configs/does_not_exist.yaml"], "does not exist"),
    ],
)
def test_bad_input_exits_2_with_a_message(argv, expected, capsys, tmp_path):
    assert main([*argv, "--out", str(tmp_path)]) == 2
    assert expected in capsys.readouterr().err


def test_traceback_on_request(monkeypatch, tmp_path):
    monkeypatch.setenv("COUNCILZOO_TRACEBACK", "1")
    with pytest.raises(ValueError, match="unknown"):
        main([*BAD_EVAL, "--out", str(tmp_path)])


# ---- answers written as JSON numbers grade as their text ----------------------------------------


def _write_problems(path: Path, n: int, as_numbers: bool = False) -> None:
    """``n`` synthetic numeric problems as a JSONL file of problems (answers as JSON numbers or text)."""
    with path.open("w") as f:
        for p in load_problems("synthetic:numeric", "test", limit=n):
            row = {"id": p.id, "question": p.question, "kind": "numeric"}
            f.write(json.dumps({**row, "answer": int(p.answer) if as_numbers else p.answer}) + "\n")


def test_numeric_answers_grade_as_their_text(tmp_path, capsys):
    """The same problems with ``"answer": 7`` and ``"answer": "7"`` score the same (not 0.000)."""
    accuracy = {}
    for as_number in (True, False):
        path = tmp_path / f"{as_number}.jsonl"
        _write_problems(path, 12, as_numbers=as_number)
        out = tmp_path / f"out-{as_number}"
        argv = ["eval", "--protocol", "single", "--agents", AGENTS, "--dataset", "jsonl", "--path", str(path)]
        assert main([*argv, "--out", str(out)]) == 0
        accuracy[as_number] = json.loads((out / "report.json").read_text())["protocols"]["single"]["accuracy"]
    assert accuracy[True] == accuracy[False] > 0.3


# ---- reruns into one --out ------------------------------------------------------------------------


def _eval_argv(folder: Path, *flags: str) -> list[str]:
    return ["eval", "--protocol", "single,debate", "--agents", str(folder / "agents.yaml"),
            "--dataset", "jsonl", "--path", str(folder / "data.jsonl"), "--out", str(folder / "out"), *flags]


def _episodes(folder: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted((folder / "out" / "episodes").glob("*.jsonl"))}


def _edit(path: Path, old: str, new: str) -> None:
    path.write_text(path.read_text().replace(old, new, 1))


@pytest.fixture(scope="module")
def first_run(tmp_path_factory) -> Path:
    """A folder with agents.yaml, data.jsonl and out/, the output of one eval run."""
    folder = tmp_path_factory.mktemp("first_run")
    (folder / "agents.yaml").write_text(Path(AGENTS).read_text())
    _write_problems(folder / "data.jsonl", 8)
    assert main(_eval_argv(folder)) == 0
    return folder


def test_the_same_command_resumes_exactly_and_overwrite_starts_afresh(first_run, tmp_path, capsys):
    shutil.copytree(first_run, tmp_path, dirs_exist_ok=True)
    first, report = _episodes(tmp_path), json.loads((tmp_path / "out" / "report.json").read_text())
    assert main(_eval_argv(tmp_path)) == 0
    assert _episodes(tmp_path) == first  # nothing played again
    assert json.loads((tmp_path / "out" / "report.json").read_text())["protocols"] == report["protocols"]

    _edit(tmp_path / "agents.yaml", "skill: 0.62", "skill: 0.9")
    assert main(_eval_argv(tmp_path, "--overwrite")) == 0
    assert _episodes(tmp_path) != first  # the old episodes discarded, the new agents' played
    assert main(_eval_argv(tmp_path)) == 0  # and the new settings resume


CHANGES = {  # a change between two runs into one --out, and the difference the refusal names
    "agents file": (lambda d: _edit(d / "agents.yaml", "skill: 0.62", "skill: 0.9"), [],
                    "agents.models.anchor.kwargs.skill: 0.62 -> 0.9"),
    "protocol setting": (lambda d: _edit(d / "agents.yaml", "debate_rounds: 2", "debate_rounds: 3"), [],
                         "agents.debate_rounds: 2 -> 3"),
    "models": (lambda d: _edit(d / "agents.yaml", "models:\n", "models:\n  extra: {type: simulated}\n"), [],
               'agents.models: ["anchor", "judge", "peer_a", "peer_b", "peer_c"] -> ["anchor", "extra"'),
    "data file": (lambda d: _edit(d / "data.jsonl", "numeric", "math"), [], "the data file (--path) changed"),
    "seed": (lambda d: None, ["--seed", "1"], "seed: 0 -> 1"),
    "limit": (lambda d: None, ["--limit", "5"], "limit: null -> 5"),
}


@pytest.mark.parametrize("change", CHANGES)
def test_a_rerun_with_other_settings_is_refused_before_any_model(change, first_run, tmp_path, capsys):
    edit, flags, difference = CHANGES[change]
    shutil.copytree(first_run, tmp_path, dirs_exist_ok=True)
    first = _episodes(tmp_path)
    edit(tmp_path)
    capsys.readouterr()
    assert main(_eval_argv(tmp_path, *flags)) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and "holds episodes played with other settings" in lines[0], lines
    assert difference in lines[0] and "--overwrite" in lines[0]
    assert _episodes(tmp_path) == first


def test_episodes_without_a_settings_record_are_refused(tmp_path, capsys):
    (tmp_path / "out" / "episodes").mkdir(parents=True)
    (tmp_path / "out" / "episodes" / "single.jsonl").write_text('{"problem_id": "p0"}\n')  # a finished one
    argv = ["eval", "--protocol", "single", "--agents", AGENTS, "--dataset", "synthetic:numeric",
            "--limit", "4", "--out", str(tmp_path / "out")]
    assert main(argv) == 2
    assert "settings were not recorded" in capsys.readouterr().err
    assert main([*argv, "--overwrite"]) == 0


# ---- Ctrl-C ------------------------------------------------------------------------------------------


def test_ctrl_c_is_one_line_exit_130_and_keeps_whole_episodes(tmp_path):
    """SIGINT mid-run, sent by a parent (a background job of a non-interactive shell ignores it, so the
    child starts with the default disposition, as a terminal's foreground job does)."""
    out = tmp_path / "out"
    argv = ["eval", "--protocol", "debate", "--agents", AGENTS, "--dataset", "synthetic:numeric",
            "--limit", "50000", "--out", str(out)]
    env = {k: v for k, v in os.environ.items() if k != "COUNCILZOO_TRACEBACK"}
    episodes = out / "episodes" / "debate.jsonl"
    # Ctrl-C's handler, even where this test runs as a background job (which starts with SIGINT ignored)
    run = subprocess.Popen([sys.executable, "-m", "councilzoo.cli", *argv], stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True, env=env,
                           preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 300
        while not (episodes.exists() and episodes.stat().st_size) and time.monotonic() < deadline:
            assert run.poll() is None, run.stderr.read()
            time.sleep(0.2)
        run.send_signal(signal.SIGINT)
        _, stderr = run.communicate(timeout=120)
    finally:
        run.kill()
    assert run.returncode == 130, stderr
    assert stderr.splitlines()[-1] == "councilzoo eval: interrupted; rerun the same command to resume"
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr
    lines = episodes.read_text().splitlines()
    assert 0 < len(lines) < 50000 and all(json.loads(line)["problem_id"] for line in lines)


# ---- help ------------------------------------------------------------------------------------------------


def _subcommands() -> dict:
    return build_parser().commands


@pytest.mark.parametrize("command", ["demo", "eval", "train", "repro"])
def test_every_subcommand_and_option_is_described_with_its_default(command):
    parser = _subcommands()[command]
    assert parser.description and len(parser.description) > 60
    text = " ".join(parser.format_help().split())
    for action in parser._actions:
        assert action.help, f"{command} {action.dest} has no help"
        if action.option_strings and action.default not in (None, False, "==SUPPRESS=="):
            assert f"(default: {action.default})" in text, (command, action.dest)
    assert "..." not in text and "``" not in text


def test_help_lists_every_protocol_and_learner_and_the_top_level_reads_plainly(capsys):
    commands = _subcommands()
    eval_help = " ".join(commands["eval"].format_help().split())
    assert all(name in eval_help for name in PROTOCOLS) and "'all'" in eval_help and "comma list" in eval_help
    train_help = " ".join(commands["train"].format_help().split())
    assert all(name in train_help for name in learner_names())
    assert main(["--help"]) == 0
    assert "``" not in capsys.readouterr().out


def test_version(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"councilzoo {councilzoo.__version__}"


def test_a_misspelt_protocol_is_reported_before_any_model_class_is_imported(tmp_path):
    """The flags are checked first: the agents file's check imports its models' classes (seconds)."""
    agents = tmp_path / "agents.yaml"
    agents.write_text("models:\n  m: {type: transformers, kwargs: {model: /nonexistent}}\n"
                      "anchor: m\npeers: [m, m]\nverifier: m\n")
    argv = ["eval", "--protocol", "singel", "--agents", str(agents), "--dataset", "synthetic:numeric",
            "--out", str(tmp_path / "out")]
    code = ("import sys; from councilzoo.cli import main; "
            f"print(main({argv!r}), 'transformers' in sys.modules)")
    repo = str(Path(__file__).resolve().parents[1])
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": repo})
    assert done.stdout.split() == ["2", "False"], done.stderr
    assert "unknown protocol 'singel' (did you mean 'single'?)" in done.stderr
