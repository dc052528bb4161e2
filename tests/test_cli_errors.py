"""Every bad input to the command line: one line on stderr, exit status 2, no traceback, no network,
and no half-written output folder.

Each row of ``CASES`` runs ``councilzoo ARGV`` in a fresh process (so environment variables such as
HF_HUB_OFFLINE act as they do for a user) under a guard that blocks, and reports on stderr, any
connection that does not go to this machine. ``{out}`` in ARGV is the output folder that must not
appear, ``{closed}`` a localhost port nobody listens on, and ``files`` are written into the test's
folder first (``{dir}`` names it). Add a row for every new mistake a user can make.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from dataclasses import dataclass, field

import pytest

GOOD_AGENTS = """\
models:
  medium: {type: simulated, kwargs: {skill: 0.6, seed: 1}}
  strong: {type: simulated, kwargs: {skill: 0.7, seed: 2}}
anchor: medium
peers: [strong, medium]
verifier: strong
"""
# Run the CLI with every connection off this machine refused (and reported as a second line).
GUARDED_CLI = """
import socket, sys
LOCAL = ("127.0.0.1", "::1", "localhost")
def refuse(what):
    sys.stderr.write(f"NETWORK ACCESS ATTEMPTED: {what}\\n")
    raise OSError("network access blocked by the test")
real_connect, real_getaddrinfo = socket.socket.connect, socket.getaddrinfo
def connect(sock, address):
    if sock.family in (socket.AF_INET, socket.AF_INET6) and address[0] not in LOCAL:
        refuse(address)
    return real_connect(sock, address)
def getaddrinfo(host, *args, **kwargs):
    if host not in (None, *LOCAL):
        refuse(host)
    return real_getaddrinfo(host, *args, **kwargs)
socket.socket.connect, socket.getaddrinfo = connect, getaddrinfo
if "--no-httpx" in sys.argv:
    sys.argv.remove("--no-httpx")
    sys.modules["httpx"] = None  # as if the openai extra were not installed
from councilzoo.cli import main
sys.exit(main(sys.argv[1:]))
"""


@dataclass
class Case:
    argv: list[str]
    expected: str  # a piece of the one error line
    files: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)


EVAL = ["eval", "--protocol", "single", "--dataset", "synthetic:numeric", "--limit", "3", "--out", "{out}"]
TRANSFORMERS_SEAT = "type: transformers, kwargs: {model: /nonexistent/model}"
OPENAI_SEAT = "{type: openai, kwargs: {model: m, base_url: 'http://127.0.0.1:{closed}/v1'}}"


def agents(old: str = "", new: str = "") -> str:
    """GOOD_AGENTS with ``old`` replaced by ``new`` (once)."""
    return GOOD_AGENTS.replace(old, new, 1)


def ev(expected: str, *flags: str, agents_yaml: str | None = GOOD_AGENTS, **env: str) -> Case:
    """``councilzoo eval`` of the single protocol with ``agents_yaml`` as its agents file (None:
    no --agents) and ``flags`` appended."""
    files = {} if agents_yaml is None else {"agents.yaml": agents_yaml}
    at = [] if agents_yaml is None else ["--agents", "{dir}/agents.yaml"]
    return Case([*EVAL, *at, *flags], expected, files, env)


def cmd(expected: str, *argv: str) -> Case:
    return Case([*argv, "--out", "{out}"], expected)


GOOD_CORL = """\
members:
  - {name: qwen, tiny_family: qwen3}
  - {name: llama, tiny_family: llama, view: 1}
num_generations: 2
prompts_per_step: 2
max_steps: 1
max_completion_length: 4
data: {dataset: "synthetic:multiple_choice", num_problems: 8}
trainer: {learning_rate: 0.001}
"""


def tr(expected: str, *flags: str, config: str = GOOD_CORL, learner: str = "corl") -> Case:
    """``councilzoo train LEARNER`` on ``config`` (written as corl.yaml) with ``flags``."""
    return Case(
        ["train", learner, "{dir}/corl.yaml", *flags, "--out", "{out}"], expected, {"corl.yaml": config}
    )


def corl(old: str, new: str) -> str:
    return GOOD_CORL.replace(old, new, 1)


OPENAI = agents("{type: simulated, kwargs: {skill: 0.6, seed: 1}}", OPENAI_SEAT)
CASES = {
    # ---- eval: flags ---------------------------------------------------------------------------
    "eval unknown protocol": ev("--protocol 'nope': unknown ['nope']", "--protocol", "nope"),
    "eval --limit -5": ev("argument --limit: must be an integer >= 1, got -5", "--limit", "-5"),
    "eval --limit 0": ev("argument --limit: must be an integer >= 1, got 0", "--limit", "0"),
    "eval --limit ten": ev("argument --limit: expected an integer >= 1", "--limit", "ten"),
    "eval --seed -1": ev("argument --seed: must be an integer >= 0", "--seed", "-1"),
    "eval without --agents": ev("the following arguments are required: --agents", agents_yaml=None),
    "eval unknown flag": ev("unrecognized arguments: --limt 3", "--limt", "3"),
    # ---- eval: datasets ------------------------------------------------------------------------
    "eval synthetic kind": ev("kind must be one of", "--dataset", "synthetic:essay"),
    "eval unknown dataset": ev("unknown dataset 'gsm9k'", "--dataset", "gsm9k"),
    "eval offline dataset": ev("Cannot load dataset 'gsm8k'", "--dataset", "gsm8k"),
    "eval unreachable hub": ev(
        "is unreachable", "--dataset", "gsm8k", HF_HUB_OFFLINE="0", HF_DATASETS_OFFLINE="0"
    ),
    "eval jsonl without --path": ev("reads a local file: pass path=", "--dataset", "jsonl"),
    "eval missing --path file": ev(
        "none.jsonl' (--path) does not exist", "--dataset", "jsonl", "--path", "{dir}/none.jsonl"
    ),
    # ---- eval: the agents file -----------------------------------------------------------------
    "agents file missing": ev("nope.yaml' does not exist", "--agents", "{dir}/nope.yaml"),
    "agents YAML malformed": ev(
        "agents.yaml, line 3: not valid YAML", agents_yaml="models:\n  medium: {type: simulated\nanchor: x\n"
    ),
    "agents YAML a list": ev("expected a mapping for CouncilConfig", agents_yaml="- medium\n"),
    "agents unknown top-level key": ev("unknown key(s) ['modls']", agents_yaml=GOOD_AGENTS + "modls: {}\n"),
    "agents missing key": ev("verifier: missing required key", agents_yaml=agents("verifier: strong\n")),
    "agent spec unknown kwarg": ev(
        "agents.yaml, line 2: models.medium.kwargs.skil: SimulatedAgent has no keyword 'skil' "
        "(did you mean 'skill'?)",
        agents_yaml=agents("skill: 0.6", "skil: 0.6"),
    ),
    "agent spec wrong type": ev(
        "agents.yaml, line 2: models.medium: SimulatedAgent 'medium': skill must be a number in [0, 1]",
        agents_yaml=agents("skill: 0.6", "skill: high"),
    ),
    "agent spec out of range": ev(
        "skill must be a number in [0, 1], got 1.5", agents_yaml=agents("skill: 0.6", "skill: 1.5")
    ),
    "agent spec unknown field": ev(
        "line 2: models.medium: unknown key(s) ['kwarg']", agents_yaml=agents("kwargs: {", "kwarg: {")
    ),
    "agent spec unknown type": ev("model type must be one of", agents_yaml=agents("simulated", "gpt")),
    "agent class not importable": ev(
        "line 2: models.medium.type: model type 'nopkg.agents:Agent': cannot import 'Agent'",
        agents_yaml=agents("simulated", "'nopkg.agents:Agent'"),
    ),
    "anchor names no model": ev(
        "anchor names unknown model(s) ['weak']", agents_yaml=agents("anchor: medium", "anchor: weak")
    ),
    "samples wrong type": ev("line 7: samples: expected int", agents_yaml=GOOD_AGENTS + "samples: three\n"),
    "comed dev_size too small": ev(
        "dev_size must be >= 10", agents_yaml=GOOD_AGENTS + "comed: {dev_size: 5}\n"
    ),
    "transformers model missing": ev(
        "line 2: models.medium: model directory '/nonexistent/model' does not exist",
        agents_yaml=agents("type: simulated, kwargs: {skill: 0.6, seed: 1}", TRANSFORMERS_SEAT),
    ),
    "openai endpoint refused": ev(
        "line 2: models.medium.kwargs.base_url: cannot reach the OpenAI-compatible endpoint",
        agents_yaml=OPENAI,
    ),
    "openai without httpx": ev("pip install 'councilzoo[openai]'", "--no-httpx", agents_yaml=OPENAI),
    "openai unknown kwarg": ev(
        "OpenAIGenerator has no keyword 'api_key'",
        agents_yaml=OPENAI.replace("model: m,", "model: m, api_key: x,"),
    ),
    # ---- demo ----------------------------------------------------------------------------------
    "demo --limit 0": cmd("argument --limit: must be an integer >= 1", "demo", "--limit", "0"),
    "demo --limit -5": cmd("argument --limit", "demo", "--limit", "-5"),
    "demo --seed -2": cmd("argument --seed", "demo", "--seed", "-2"),
    "demo endpoint refused": cmd(
        "cannot reach the OpenAI-compatible endpoint http://127.0.0.1:",
        "demo",
        "--endpoint",
        "http://127.0.0.1:{closed}/v1",
    ),
    "demo endpoint not a URL": cmd(
        "base_url must start with http:// or https://", "demo", "--endpoint", "localhost:8000"
    ),
    "demo model missing": cmd(
        "model directory '/nonexistent/model' does not exist", "demo", "--model", "/nonexistent/model"
    ),
    # ---- repro ---------------------------------------------------------------------------------
    "repro unknown claim": cmd("argument claim: invalid choice: 'nope'", "repro", "nope"),
    "repro --seeds 0": cmd("argument --seeds", "repro", "corl", "--seeds", "0"),
    "repro --seeds x": cmd("argument --seeds", "repro", "corl", "--seeds", "x"),
    "repro --jobs 0": cmd("argument --jobs", "repro", "all", "--jobs", "0"),
    # ---- train ---------------------------------------------------------------------------------
    "train unknown learner": tr("unknown learner 'corll'; expected one of", learner="corll"),
    "train learner import path": tr("learner 'nopkg:Learner' cannot be imported", learner="nopkg:Learner"),
    "train config missing": Case(
        ["train", "corl", "{dir}/none.yaml", "--out", "{out}"], "none.yaml' does not exist"
    ),
    "train YAML malformed": tr(
        "corl.yaml (line 3, column 2): not valid YAML", config="members:\n  - {name: q\nx: 1\n"
    ),
    "train config a list": tr("expected a mapping of settings at the top level", config="- 1\n"),
    "train unknown key": tr("corl.yaml: unknown key(s) ['max_stpes']", config=GOOD_CORL + "max_stpes: 3\n"),
    "train member unknown key": tr(
        "members[1]: unknown key(s) ['tiny_famly']", config=corl("tiny_family: llama", "tiny_famly: llama")
    ),
    "train member family": tr(
        "tiny_family: expected one of", config=corl("tiny_family: llama", "tiny_family: gpt2")
    ),
    "train model path missing": tr(
        "model path '/no/such/model' does not exist",
        config=corl("tiny_family: llama", "model: /no/such/model"),
    ),
    "train model not cached": tr(
        "model 'nobody/no-model' is not a local directory",
        config=corl("tiny_family: llama", "model: nobody/no-model"),
    ),
    "train one member": tr(
        "needs >= 2 members", config=corl("  - {name: llama, tiny_family: llama, view: 1}\n", "")
    ),
    "train unknown trainer field": tr(
        "unknown GRPOConfig field(s) ['learning_rat']", config=corl("learning_rate", "learning_rat")
    ),
    "train learner-owned trainer key": tr(
        "are set by the learner's own keys", config=corl("{learning_rate: 0.001}", "{max_steps: 3}")
    ),
    "train bad trainer value": tr("trainer settings of", "--set", "trainer.lr_scheduler_type=nope"),
    "train accumulation mismatch": tr("does not divide", "--set", "trainer.gradient_accumulation_steps=3"),
    "train wrong type": tr("num_generations: expected int", "--set", "num_generations=many"),
    "train tau out of range": tr("tau must be in [0, 1]", "--set", "tau=5"),
    "train peer rule for corl": tr("reward_rule must be one of", "--set", "reward_rule=ground_truth"),
    "train baseline rule": tr(
        "learner 'grpo' needs 'ground_truth'",
        learner="grpo",
        config=corl("members:", "reward_rule: self_majority\nmembers:"),
    ),
    "train report_to": tr("report_to: unknown backend 'tensorbored'", "--set", "report_to=[tensorbored]"),
    "train offline dataset": tr("Cannot load dataset 'gsm8k'", "--set", "data.dataset=gsm8k"),
    "train --max-steps -1": tr("argument --max-steps: must be an integer >= 1, got -1", "--max-steps", "-1"),
    "train --max-steps 0": tr("argument --max-steps: must be an integer >= 1, got 0", "--max-steps", "0"),
    "train --set malformed": tr("--set 'max_steps': expected key.sub=value", "--set", "max_steps"),
    "train --set bad index": tr("not an index of one", "--set", "members.7.view=1"),
    "train --members": tr("--members: expected member indices", "--members", "one"),
    "train tracer unknown key": tr("unknown key(s) ['stpes']", learner="tracer", config="stpes: 3\n"),
}


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("name", CASES)
def test_bad_input_is_one_line_exit_2_no_traceback_no_network_no_output(name, tmp_path):
    case = CASES[name]
    fill = {"dir": str(tmp_path), "out": str(tmp_path / "out"), "closed": str(closed_port())}
    for filename, text in case.files.items():
        (tmp_path / filename).write_text(text.replace("{closed}", fill["closed"]))
    argv = [arg.format(**fill) for arg in case.argv]
    env = {k: v for k, v in os.environ.items() if k != "COUNCILZOO_TRACEBACK"}
    env |= {
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "HF_HOME": str(tmp_path / "hf"),  # an empty cache
        "HF_ENDPOINT": f"http://127.0.0.1:{fill['closed']}",
        **case.env,
    }
    done = subprocess.run(
        [sys.executable, "-c", GUARDED_CLI, *argv], capture_output=True, text=True, env=env, timeout=120
    )
    lines = done.stderr.splitlines()
    command = argv[0]
    assert done.returncode == 2, done.stderr
    assert len(lines) == 1 and lines[0].startswith(f"councilzoo {command}: error: "), done.stderr
    assert case.expected in lines[0] and "Traceback" not in done.stderr
    assert not (tmp_path / "out").exists()


def test_enough_bad_inputs_are_covered():
    assert len(CASES) >= 30
