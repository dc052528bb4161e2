"""Code problems: extraction, output-signature votes, pass@k, loaders on real-schema fixtures."""

from __future__ import annotations

import base64
import json
import pickle
import zlib
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from councilzoo.envs.rewards import compute_rewards
from councilzoo.sandbox import Limits, Sandbox, default_sandbox
from councilzoo.sandbox.values import digits_unlimited
from councilzoo.tasks import (
    DatasetUnavailableError,
    Problem,
    answers_equivalent,
    code,
    extract_answer,
    format_answer,
    load_dataset,
    plurality,
    synthetic_problems,
)
from councilzoo.tasks.code import (
    answers_for,
    canonical,
    pass_at_k,
    passes,
    program_for,
    stated_answer,
    with_reference_answers,
)

HUMANEVAL = [
    {
        "task_id": "HumanEval/0",
        "prompt": "from typing import List\n\n\n"
        "def has_close_elements(numbers: List[float], threshold: float) "
        '-> bool:\n    """ Check if in given list of numbers, are any two numbers closer to each other than\n'
        '    given threshold.\n    >>> has_close_elements([1.0, 2.0, 3.0], 0.5)\n    False\n    """\n',
        "canonical_solution": "    for idx, elem in enumerate(numbers):\n"
        "        for idx2, elem2 in enumerate(numbers):\n"
        "            if idx != idx2:\n                distance = abs(elem - elem2)\n"
        "                if distance < threshold:\n                    return True\n\n    return False\n",
        "test": "\n\nMETADATA = {\n    'author': 'jt',\n    'dataset': 'test'\n}\n\n\ndef check(candidate):\n"
        "    assert candidate([1.0, 2.0, 3.9, 4.0, 5.0, 2.2], 0.3) == True\n"
        "    assert candidate([1.0, 2.0, 3.9, 4.0, 5.0, 2.2], 0.05) == False\n"
        "    assert candidate([1.0, 2.0, 5.9, 4.0, 5.0], 0.95) == True\n"
        "    assert candidate([1.1, 2.2, 3.1, 4.1, 5.1], 1.0) == True\n\n",
        "entry_point": "has_close_elements",
    },
    {
        "task_id": "HumanEval/2",
        "prompt": "def truncate_number(number: float) -> float:\n"
        '    """ Given a positive floating point number, '
        'return its decimal part.\n    >>> truncate_number(3.5)\n    0.5\n    """\n',
        "canonical_solution": "    return number % 1.0\n",
        "test": "\n\nMETADATA = {\n    'author': 'jt',\n    'dataset': 'test'\n}\n\n\ndef check(candidate):\n"
        "    assert candidate(3.5) == 0.5\n    assert abs(candidate(1.33) - 0.33) < 1e-6\n"
        "    assert abs(candidate(123.456) - 0.456) < 1e-6\n",
        "entry_point": "truncate_number",
    },
]
MBPP = [
    {
        "source_file": "Benchmark Questions Verification V2.ipynb",
        "task_id": 2,
        "prompt": "Write a function to find the shared elements from the given two lists.",
        "code": "def similar_elements(test_tup1, test_tup2):\n"
        "  res = tuple(set(test_tup1) & set(test_tup2))\n"
        "  return (res) ",
        "test_imports": [],
        "test_list": [
            "assert set(similar_elements((3, 4, 5, 6),(5, 7, 4, 10))) == set((4, 5))",
            "assert set(similar_elements((1, 2, 3, 4),(5, 4, 3, 7))) == set((3, 4))",
            "assert set(similar_elements((11, 12, 14, 13),(17, 15, 14, 13))) == set((13, 14))",
        ],
    },
    {
        "source_file": "Benchmark Questions Verification V2.ipynb",
        "task_id": 82,
        "prompt": "Write a function to find the volume of a sphere.",
        "code": "import math\ndef volume_sphere(r):\n  volume=(4/3)*math.pi*r*r*r\n  return volume",
        "test_imports": ["import math"],
        "test_list": [
            "assert math.isclose(volume_sphere(10), 4188.790204786391, rel_tol=0.001)",
            "assert math.isclose(volume_sphere(25), 65449.84694978735, rel_tol=0.001)",
            "assert math.isclose(volume_sphere(20), 33510.32163829113, rel_tol=0.001)",
        ],
    },
]


def _packed(tests: list[dict]) -> str:
    """LiveCodeBench's private-test packing: base64(zlib(pickle(json text)))."""
    return base64.b64encode(zlib.compress(pickle.dumps(json.dumps(tests)))).decode()


LCB = [
    {
        "question_title": "A+B",
        "question_content": "Given two integers A and B, print A+B.",
        "platform": "atcoder",
        "question_id": "abc999_a",
        "contest_id": "abc999",
        "contest_date": "2023-08-19T00:00:00",
        "starter_code": "",
        "difficulty": "easy",
        "public_test_cases": json.dumps([{"input": "1 2\n", "output": "3\n", "testtype": "stdin"}]),
        "private_test_cases": json.dumps([{"input": "10 -4\n", "output": "6\n", "testtype": "stdin"}]),
        "metadata": "{}",
    },
    {
        "question_title": "max-pair-sum",
        "question_content": "Return the largest sum of two distinct elements of nums.",
        "platform": "leetcode",
        "question_id": "3001",
        "contest_id": "weekly-contest-400",
        "contest_date": "2024-09-01T00:00:00",
        "starter_code": "class Solution:\n    def maxPairSum(self, nums: List[int]) -> int:\n        ",
        "difficulty": "medium",
        "public_test_cases": json.dumps([{"input": "[1, 5, 3]", "output": "8", "testtype": "functional"}]),
        "private_test_cases": _packed([{"input": "[-1, -2, -3]", "output": "-3", "testtype": "functional"}]),
        "metadata": json.dumps({"func_name": "maxPairSum"}),
    },
]
LCB_SOLUTIONS = {
    "lcb-abc999_a": "a, b = map(int, input().split())\nprint(a + b)\n",
    "lcb-3001": "class Solution:\n    def maxPairSum(self, nums):\n        return sum(sorted(nums)[-2:])\n",
}
WRONG = {  # a deliberately wrong solution per fixture problem
    "HumanEval/0": "def has_close_elements(numbers, threshold):\n    return False\n",
    "HumanEval/2": "def truncate_number(number):\n    return number\n",
    "mbpp-2": "def similar_elements(a, b):\n    return tuple(a)\n",
    "mbpp-82": "def volume_sphere(r):\n    return r ** 3\n",
    "lcb-abc999_a": "a, b = map(int, input().split())\nprint(a - b)\n",
    "lcb-3001": "class Solution:\n    def maxPairSum(self, nums):\n        return max(nums)\n",
}


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(workers=2, limits=Limits(timeout_s=2.0)) as box:
        yield box


@pytest.fixture(scope="module")
def fixtures(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("code_fixtures")
    paths = {}
    for name, rows in (("humaneval", HUMANEVAL), ("mbpp", MBPP), ("livecodebench", LCB)):
        paths[name] = folder / f"{name}.jsonl"
        paths[name].write_text("".join(json.dumps(row) + "\n" for row in rows))
    return paths


@pytest.fixture(scope="module")
def problems(fixtures) -> dict[str, Problem]:
    loaded = [p for name, path in fixtures.items() for p in load_dataset(name, path=path)]
    return {p.id: p for p in loaded}


# --- extraction -----------------------------------------------------------------------------------

EXTRACTION = [
    ("Here:\n```python\ndef f(x):\n    return x\n```\nDone.", "def f(x):\n    return x"),
    ("```python\ndef f(): return 1\n```\nBetter:\n```\ndef f(): return 2\n```", "def f(): return 2"),
    (
        "```python\ndef f(): return 1\n```\n```python\ndef broken(:\n```",
        "def f(): return 1",
    ),  # last that parses
    ("def f(x):\n    return x + 1\n", "def f(x):\n    return x + 1"),  # bare text defining a function
    ("```js\nfunction f() {}\n```", None),
    ("The answer is 42.", None),
    ("Hello", None),  # parses as Python, defines nothing
    ("```python\ndef f(x):\n    return x", None),  # truncated block, and the text does not parse
    ("", None),
    (None, None),
]


@pytest.mark.parametrize(("text", "expected"), EXTRACTION)
def test_extract_program(text, expected):
    assert extract_answer(text, "code") == expected


def test_format_answer_round_trips_a_program():
    program = "def g():\n    return 1"
    assert extract_answer(format_answer(program, "code"), "code") == program


def test_humaneval_body_completion_is_read_after_the_prompt(problems, sandbox):
    p = problems["HumanEval/2"]
    program = program_for(p, "    return number % 1.0\n")
    assert program is not None and "def truncate_number" in program
    assert passes(p, [program], sandbox=sandbox) == [True]


# --- votes over outputs ---------------------------------------------------------------------------

NAMES = st.sampled_from(["x", "n", "value", "arg"])


@given(a=st.integers(-9, 9), b=st.integers(-9, 9), name=NAMES, other=NAMES, pad=st.integers(0, 3))
def test_different_text_same_outputs_agree(sandbox, a, b, name, other, pad):
    problem = _linear_problem()
    first = f"```python\ndef f({name}):\n    return {a} * {name} + {b}\n```"
    second = (
        f"Sure.\n```python\n{'# note' + chr(10)}{chr(10) * pad}def f({other}):\n    y = {b}\n"
        f"    for _ in range({abs(a)}):\n        y = y {'+' if a >= 0 else '-'} {other}\n    return y\n```"
    )
    one, two = answers_for(problem, [first, second], sandbox=sandbox)
    assert one is not None and answers_equivalent(one, two, "code")
    assert plurality([one, two], "code") == (one, 1.0)


@given(k=st.integers(0, 4), message=st.sampled_from(["ValueError", "ZeroDivisionError", "KeyError"]))
def test_an_erroring_program_agrees_with_no_one(sandbox, k, message):
    problem = _linear_problem()
    good = "```python\ndef f(x):\n    return x\n```"
    bad = f"```python\ndef f(x):\n    if x == {k}:\n        raise {message}\n    return x\n```"
    twin = bad.replace("return x", "return x  # same failure, other text")
    answers = answers_for(problem, [good, bad, bad, twin], sandbox=sandbox)
    error = answers[1]
    assert error.startswith("error:")
    assert not any(answers_equivalent(error, other, "code") for other in answers)  # itself included
    assert plurality(answers, "code")[0] == answers[0]


def _linear_problem() -> Problem:
    return Problem(
        id="linear",
        question="Write f(x).",
        answer=None,
        kind="code",
        metadata={"entry_point": "f", "test_inputs": [repr((x,)) for x in range(5)]},
    )


def test_peer_rewards_come_from_output_votes(sandbox):
    problem = synthetic_problems("code", 1, seed=3)[0]
    right = format_answer(problem.metadata["solution"], "code")
    wrong = format_answer(problem.metadata["distractors"][0], "code")
    texts = [[right, right, wrong], [right, wrong, "no code"]]
    answers = [answers_for(problem, t, sandbox=sandbox) for t in texts]
    result = compute_rewards("ring", answers, "code")
    assert result.labels == [problem.answer, problem.answer]
    assert result.rewards == [[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]]


# --- labelled grading -----------------------------------------------------------------------------


def test_pass_at_k_unbiased_estimator():
    assert pass_at_k(10, 0, 1) == 0.0 and pass_at_k(10, 10, 5) == 1.0
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)
    assert pass_at_k(5, 2, 2) == pytest.approx(1 - 3 / 10)  # 1 - C(3,2)/C(5,2)
    assert pass_at_k(4, 2, 3) == 1.0  # fewer failures than k
    with pytest.raises(ValueError):
        pass_at_k(3, 4, 1)


def test_pass_at_1_of_reference_solutions_is_1_and_of_wrong_ones_0(problems, sandbox):
    assert set(problems) == set(WRONG)
    for pid, p in problems.items():
        reference = p.metadata.get("solution") or LCB_SOLUTIONS[pid]
        verdicts = passes(p, [program_for(p, format_answer(reference, "code"))], sandbox=sandbox)
        wrong = passes(p, [program_for(p, format_answer(WRONG[pid], "code"))], sandbox=sandbox)
        assert pass_at_k(1, sum(verdicts), 1) == 1.0, pid
        assert pass_at_k(1, sum(wrong), 1) == 0.0, pid


def test_reference_signature_labels_the_problem(problems, sandbox):
    for pid, p in problems.items():
        reference = p.metadata.get("solution") or LCB_SOLUTIONS[pid]
        (answer,) = answers_for(p, [format_answer(reference, "code")], sandbox=sandbox)
        (wrong,) = answers_for(p, [format_answer(WRONG[pid], "code")], sandbox=sandbox)
        assert p.answer is not None and answers_equivalent(answer, p.answer, "code"), pid
        assert not answers_equivalent(wrong, p.answer, "code"), pid


# --- loaders --------------------------------------------------------------------------------------


def test_loaders_read_the_real_schemas(problems):
    he, mbpp, lcb_stdin, lcb_fn = (
        problems[k] for k in ("HumanEval/0", "mbpp-82", "lcb-abc999_a", "lcb-3001")
    )
    assert he.kind == "code" and he.metadata["entry_point"] == "has_close_elements"
    assert he.metadata["test_inputs"][0] == repr(([1.0, 2.0, 3.9, 4.0, 5.0, 2.2], 0.3))
    assert he.metadata["preamble"] == "from typing import List"
    assert mbpp.metadata["entry_point"] == "volume_sphere" and mbpp.metadata["test_inputs"] == [
        "(10,)",
        "(25,)",
        "(20,)",
    ]
    assert lcb_stdin.metadata["entry_point"] is None and lcb_stdin.metadata["test_inputs"] == [
        "1 2\n",
        "10 -4\n",
    ]
    assert lcb_fn.metadata["entry_point"] == "maxPairSum"
    assert lcb_fn.metadata["test_inputs"] == ["([1, 5, 3],)", "([-1, -2, -3],)"]  # private tests unpacked
    for p in problems.values():
        assert Problem.from_dict(json.loads(json.dumps(p.to_dict()))) == p


def test_test_inputs_never_hold_expected_outputs(problems):
    he = problems["HumanEval/0"]
    assert all("True" not in text and "False" not in text for text in he.metadata["test_inputs"])
    assert problems["lcb-abc999_a"].metadata["test_inputs"] == ["1 2\n", "10 -4\n"]  # no "3\n", "6\n"


def test_livecodebench_window_and_release(fixtures):
    recent = load_dataset("livecodebench", path=fixtures["livecodebench"], window=("2024-01-01", None))
    assert [p.id for p in recent] == ["lcb-3001"]
    old = load_dataset("livecodebench", path=fixtures["livecodebench"], window=(None, "2024-01-01"))
    assert [p.id for p in old] == ["lcb-abc999_a"]
    with pytest.raises(ValueError, match="release"):
        load_dataset("livecodebench", release="release_v99")
    with pytest.raises(ValueError, match="window"):
        load_dataset("humaneval", path=fixtures["humaneval"], window=("2024-01-01", None))


@pytest.mark.parametrize("name", ["humaneval", "mbpp", "livecodebench"])
def test_offline_error_names_the_code_dataset(tmp_path, monkeypatch, name):
    import datasets.config

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True, raising=False)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_OFFLINE", True, raising=False)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf" / "datasets", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    with pytest.raises(DatasetUnavailableError) as info:
        load_dataset(name)
    assert name in str(info.value) and "path=" in str(info.value)


# --- synthetic ------------------------------------------------------------------------------------


def test_synthetic_code_problems_are_seeded_labelled_and_self_consistent(sandbox):
    first = synthetic_problems("code", 12, seed=5, difficulty=0.3)
    assert first == synthetic_problems("code", 12, seed=5, difficulty=0.3)
    assert first[:4] == synthetic_problems("code", 4, seed=5, difficulty=0.3)
    for p in first:
        assert p.kind == "code" and len(p.metadata["paraphrases"]) == 2 and p.metadata["distractors"]
        assert Problem.from_dict(json.loads(json.dumps(p.to_dict()))) == p
    texts = [[format_answer(p.metadata["solution"], "code")] for p in first]
    distractors = [[format_answer(w, "code") for w in p.metadata["distractors"]] for p in first]
    for p, right, wrong in zip(first, texts, distractors, strict=True):
        assert answers_for(p, right, sandbox=sandbox) == [p.answer]
        assert not any(
            answers_equivalent(a, p.answer, "code") for a in answers_for(p, wrong, sandbox=sandbox)
        )
    hard = synthetic_problems("code", 12, seed=5, difficulty=0.9)
    mean_inputs = [sum(len(p.metadata["test_inputs"]) for p in ps) / 12 for ps in (first, hard)]
    assert mean_inputs[1] > mean_inputs[0]  # the difficulty knob adds test inputs


def test_cohort_env_peer_rewards_on_code_come_from_output_votes():
    from councilzoo.envs import cohort_v0
    from councilzoo.envs.types import Action, Mode

    problem = synthetic_problems("code", 1, seed=1)[0]
    right = format_answer(problem.metadata["solution"], "code")
    renamed = right.replace(
        f"def {problem.metadata['entry_point']}(",
        "def _unused():\n    pass\n\n\ndef " + problem.metadata["entry_point"] + "(",
    )
    wrong = format_answer(problem.metadata["distractors"][0], "code")
    env = cohort_v0.parallel_env(num_agents=2, reward_rule="ring", problems=[problem])
    env.reset(seed=0)
    actions = {
        "member_0": Action(Mode.ANSWER, samples=(right, wrong, wrong)),
        "member_1": Action(Mode.ANSWER, samples=(renamed, renamed, wrong)),  # other text, same outputs
    }
    _, rewards, _, _, infos = env.step(actions)
    assert infos["member_0"]["label"] == problem.answer and infos["member_0"]["label_correct"] is True
    assert infos["member_0"]["sample_rewards"] == [1.0, 0.0, 0.0]
    assert infos["member_1"]["label_correct"] is False  # member 0's own plurality is the wrong program
    assert infos["member_1"]["sample_rewards"] == [0.0, 0.0, 1.0]


@pytest.mark.parametrize("env_id", ["councilzoo/debate-v0", "councilzoo/review-v0",
                                    "councilzoo/escalation-v0"])
def test_turn_based_games_grade_programs_by_their_outputs(env_id):
    """An agent stating the solution (in other words) is graded right, a wrong program wrong;
    answers in the transcript are output signatures, so votes and verdicts compare outputs."""
    from councilzoo.envs import make
    from councilzoo.envs.types import Action, Mode

    problem = synthetic_problems("code", 1, seed=3)[0]
    right = format_answer(problem.metadata["solution"], "code")
    wrong = format_answer(problem.metadata["distractors"][0], "code")
    for program, correct in ((right, True), (wrong, False)):
        env = make(env_id, problems=[problem])
        env.reset(seed=0)
        for agent in env.agent_iter():
            if env.terminations[agent] or env.truncations[agent]:
                env.step(None)
                continue
            legal = env.unwrapped.legal_modes(agent)
            preferred = (Mode.ANSWER, Mode.SPEAK, Mode.ACCEPT, Mode.KEEP)
            mode = next((m for m in preferred if m in legal), legal[0])
            verdict = "RIGHT" if env.unwrapped.turn_context(agent).role == "reviewer" else None
            env.step(Action(mode, text=f"Here it is.\n{program}", verdict=verdict))
        record = env.unwrapped.episode_record()
        assert record.correct is correct, (env_id, record.final_answer)
        assert all(t.answer is None or t.answer.startswith(("out:", "error:")) for t in record.turns)


def test_eval_grades_humaneval_programs(fixtures, tmp_path):
    """``councilzoo eval --dataset humaneval`` on a local copy in the hub's schema: every
    protocol runs, and the report grades by the programs' outputs."""
    from councilzoo.cli import main

    agents = Path(__file__).resolve().parents[1] / "configs" / "demo_agents.yaml"
    dev = tmp_path / "humaneval_dev.jsonl"  # 10 rows under other task ids: dev and test never share one
    rows = [{**row, "task_id": f"{row['task_id']}-dev{k}"} for k in range(5) for row in HUMANEVAL]
    dev.write_text("".join(json.dumps(row) + "\n" for row in rows))
    argv = ["eval", "--protocol", "all", "--agents", str(agents), "--dataset", "humaneval",
            "--path", str(fixtures["humaneval"]), "--dev-path", str(dev), "--out", str(tmp_path / "out")]
    assert main(argv) == 0
    protocols = json.loads((tmp_path / "out" / "report.json").read_text())["protocols"]
    assert protocols["single"]["n"] == len(HUMANEVAL)
    assert any(row["accuracy"] > 0 for row in protocols.values())


# --- hardening: references apart, integers of any size, answers only from running ---------------


def test_references_run_in_a_pool_of_their_own_closed_after(fixtures, monkeypatch):
    """The answer key never runs where candidates are graded: the loader's references get a pool
    that is closed before any candidate runs."""
    pools = []
    run = Sandbox.run

    def spy(self, jobs, limits=None):
        pools.append(self)
        return run(self, jobs, limits)

    monkeypatch.setattr(Sandbox, "run", spy)
    monkeypatch.setattr(code, "_CACHE", code._Cache(code.CACHE_SIZE))  # earlier tests ran these references
    problems = load_dataset("humaneval", path=fixtures["humaneval"])
    assert all(p.answer is not None for p in problems)
    assert pools and default_sandbox() not in pools
    assert all(pool._pool == [] for pool in pools)  # closed


def _decimal(n: int) -> str:
    with digits_unlimited():
        return str(n)


def test_integers_of_any_size_are_carried_exactly(sandbox):
    """``3 ** 10000`` (4,772 digits, past the interpreter's default limit of 4,300) returned,
    printed and tested: the references label their problems and the right programs pass."""
    big, returning = 3**10_000, "def f():\n    return 3 ** 10_000\n"
    returned = Problem("big-call", "3 ** 10000", None, "code",
                       metadata={"entry_point": "f", "test_inputs": ["()"], "solution": returning})
    printed = Problem("big-stdin", "3 ** 10000", None, "code",
                      metadata={"entry_point": None, "test_inputs": [""], "solution": "print(3 ** 10_000)\n"})
    labelled = with_reference_answers([returned, printed])
    assert all(p.answer is not None and p.answer.startswith("out:") for p in labelled)  # the references ran
    other_text = ("def f():\n    return pow(3, 10_000)\n", "print(pow(3, 10_000))\n")
    off_by_one = ("def f():\n    return 3 ** 10_000 + 1\n", "print(3 ** 10_000 + 1)\n")
    for p, right, wrong in zip(labelled, other_text, off_by_one, strict=True):
        texts = [format_answer(right, "code"), format_answer(wrong, "code")]
        answers = answers_for(p, texts, sandbox=sandbox)
        assert answers_equivalent(answers[0], p.answer, "code")
        assert answers[1].startswith("out:") and not answers_equivalent(answers[1], p.answer, "code")
    by_value = {**returned.metadata, "expected_outputs": [canonical(big)]}
    by_text = {**printed.metadata, "expected_outputs": [_decimal(big)]}
    tests = f"assert f() == 3 ** 10_000\nassert str(f()) == {_decimal(big)!r}\n"
    by_tests = {"entry_point": "f", "test_script": tests, "solution": returning}
    for metadata in (by_value, by_text, by_tests):
        problem = Problem("big", "3 ** 10000", None, "code", metadata=metadata)
        assert passes(problem, [metadata["solution"]], sandbox=sandbox) == [True], metadata


def test_livecodebench_values_of_any_size_label_their_problem(tmp_path, sandbox):
    """A functional LiveCodeBench row whose input and output have 5,001 digits loads, and grades
    a right program right and a wrong one wrong."""
    big = 10**5_000 + 7
    case = {"input": _decimal(big), "output": _decimal(2 * big), "testtype": "functional"}
    row = {**LCB[1], "question_id": "big", "public_test_cases": json.dumps([case]), "private_test_cases": "",
           "metadata": json.dumps({"func_name": "double"})}  # fmt: skip
    path = tmp_path / "lcb.jsonl"
    path.write_text(json.dumps(row) + "\n")
    (problem,) = load_dataset("livecodebench", path=path)
    assert problem.answer is not None and problem.metadata["expected_outputs"] == [canonical(2 * big)]
    right, wrong = ("class Solution:\n    def double(self, x):\n        return 2 * x\n",
                    "class Solution:\n    def double(self, x):\n        return 2 * x + 1\n")  # fmt: skip
    assert passes(problem, [right, wrong], sandbox=sandbox) == [True, False]


def _problem_whose_label_parses_as_python() -> Problem:
    """A synthetic code problem whose output signature ``out:<hex>`` is also a valid program (an
    annotated name: its hex starts with a letter)."""
    return next(
        p for seed in range(100) for p in synthetic_problems("code", 1, seed=seed) if p.answer[4] in "abcdef"
    )


def test_text_that_looks_like_an_output_signature_is_no_answer():
    problem = _problem_whose_label_parses_as_python()
    stated = format_answer(problem.answer, "code")  # the label itself, fenced like a program
    assert extract_answer(stated, "code") is None
    assert stated_answer(problem, extract_answer(stated, "code")) is None
    assert stated_answer(problem, problem.answer) == problem.answer  # a label stated as data stays one


def test_a_program_that_starts_like_a_signature_is_run():
    problem = _problem_whose_label_parses_as_python()
    broken = f"out: None\ndef {problem.metadata['entry_point']}(*args):\n    raise ValueError\n"
    program = extract_answer(format_answer(broken, "code"), "code")
    answers = [stated_answer(problem, program) for _ in range(2)]
    assert all(a.startswith("error:") for a in answers)
    assert not answers_equivalent(answers[0], answers[1], "code")  # two turns do not agree on it
    assert not answers_equivalent(program, program, "code")  # nor does the program's text, unrun


def test_agents_stating_the_label_as_text_are_graded_wrong():
    from councilzoo.envs import make
    from councilzoo.envs.types import Action, Mode

    problem = _problem_whose_label_parses_as_python()
    env = make("councilzoo/debate-v0", problems=[problem])
    env.reset(seed=0)
    for agent in env.agent_iter():
        if env.terminations[agent] or env.truncations[agent]:
            env.step(None)
            continue
        legal = env.unwrapped.legal_modes(agent)
        mode = next((m for m in (Mode.ANSWER, Mode.SPEAK) if m in legal), legal[0])
        env.step(Action(mode, text=f"Computed already:\n{format_answer(problem.answer, 'code')}"))
    assert env.unwrapped.episode_record().correct is False
