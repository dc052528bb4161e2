"""Inputs checked together and outputs that cannot be corrupted: every mistake of a run's inputs in
one report (one line each, with file and line), the output folder's lock, a rerun into a folder
with no finished episode, differences named in words, a full disk (a real small tmpfs where this
process may mount one, and the write site failing with ENOSPC everywhere), and ``--resume`` with
changed training settings."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from test_cli_errors import GOOD_AGENTS

from councilzoo.cli import main as cli_main
from councilzoo.config import ConfigError, run_lock
from councilzoo.learners.logging import MetricsLogger, read_metrics
from councilzoo.rollout.log import EpisodeLog

REPO = Path(__file__).resolve().parents[1]
AGENTS = GOOD_AGENTS  # the CLI tests' simulated council
PROBLEM = '{"id": "p%d", "question": "What is %d + 1?", "answer": "%d", "kind": "numeric"}\n'


def _eval(out: Path, agents: Path, *flags: str) -> list[str]:
    return ["eval", "--protocol", "single", "--agents", str(agents), "--out", str(out), *flags]


def _synthetic(limit: int) -> list[str]:
    return ["--dataset", "synthetic:numeric", "--limit", str(limit)]


def _episode_keys(out: Path) -> list[tuple[str, int]]:
    """The finished episodes: whole lines (a write cut off by a full disk is not one; the next run's
    load cuts it)."""
    lines = (out / "episodes" / "single.jsonl").read_text().splitlines(keepends=True)
    rows = [json.loads(line) for line in lines if line.endswith("\n")]
    return [(row["problem_id"], row["episode"]) for row in rows]


@pytest.fixture
def agents(tmp_path) -> Path:
    path = tmp_path / "agents.yaml"
    path.write_text(AGENTS)
    return path


# ---- every mistake at once ----------------------------------------------------------------------
def test_an_agents_file_with_three_mistakes_reports_all_three_with_their_lines(tmp_path, capsys):
    agents = tmp_path / "agents.yaml"
    agents.write_text(AGENTS.replace("skill: 0.6", "skil: 0.6") + "samples: many\nanchor: strong\n")
    data = tmp_path / "data.jsonl"
    data.write_text(PROBLEM % (0, 0, 1) + '{"id": "p1", "question": "What is 1 + 1?"}\n')

    def errors(protocol: str) -> list[str]:
        argv = ["eval", "--protocol", protocol, "--agents", str(agents), "--dataset", "jsonl",
                "--path", str(data), "--out", str(tmp_path / "out")]
        assert cli_main(argv) == 2
        lines = capsys.readouterr().err.strip().splitlines()
        assert all(line.startswith("councilzoo eval: error: ") for line in lines)
        return lines

    # a flag's mistake is reported before the agents file is read (reading it imports model classes)
    assert len(errors("single,single")) == 1
    expected = [
        f"{agents}, line 2: models.medium.kwargs.skil: SimulatedAgent has no keyword 'skil' (did you mean",
        f"{agents}, line 7: samples: expected int, got str 'many'",
        f"{agents}, line 8: anchor: key given twice in one mapping (first on line 4)",
        f"{data}, line 2: problem 'p1' has no answer",
    ]
    lines = errors("single")
    assert len(lines) == len(expected)
    for line, piece in zip(lines, expected, strict=True):
        assert piece in line, (piece, line)
    assert not (tmp_path / "out").exists()


def test_a_missing_train_config_is_reported_before_torch_is_imported(tmp_path):
    probe = textwrap.dedent(f"""
        import sys
        from councilzoo.cli import main
        status = main(["train", "corl", {str(tmp_path / "none.yaml")!r}])
        print(status, "torch" in sys.modules)
    """)
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.stdout.split() == ["2", "False"], done.stderr
    assert "none.yaml' does not exist" in done.stderr


# ---- the lock ---------------------------------------------------------------------------------
HOLD = """
import sys, time
from councilzoo.config import run_lock
with run_lock(sys.argv[1]):
    print("held", flush=True)
    time.sleep(300)
"""


def _holder(out: Path) -> subprocess.Popen:
    process = subprocess.Popen([sys.executable, "-c", HOLD, str(out)], stdout=subprocess.PIPE, text=True,
                               env={**os.environ, "PYTHONPATH": str(REPO)})
    assert process.stdout.readline().strip() == "held"
    return process


def test_a_second_run_into_the_same_out_is_refused_in_one_line_and_writes_nothing(tmp_path, agents, capsys):
    out = tmp_path / "out"
    holder = _holder(out)
    try:
        assert cli_main(_eval(out, agents, *_synthetic(5))) == 2
        [line] = capsys.readouterr().err.strip().splitlines()
        assert line == (f"councilzoo eval: error: --out {out}: another councilzoo run is writing into this "
                        "folder now; wait for it to end, or choose another --out")
        assert not (out / "episodes").exists() and not (out / "settings.json").exists()
    finally:
        holder.kill()
        holder.wait()
    # the kernel's lock ended with its killed process: the same command now runs
    assert cli_main(_eval(out, agents, *_synthetic(5))) == 0
    assert len(_episode_keys(out)) == 5


def test_the_lock_is_refused_within_one_process_and_taken_after_release(tmp_path):
    with run_lock(tmp_path / "out"):
        with pytest.raises(ConfigError, match="another councilzoo run is writing into this folder"):
            with run_lock(tmp_path / "out"):
                pass
    with run_lock(tmp_path / "out"):
        pass


def test_a_run_that_fails_before_writing_leaves_no_folder(tmp_path):
    with pytest.raises(RuntimeError), run_lock(tmp_path / "new"):
        raise RuntimeError("a model that does not load")
    assert not (tmp_path / "new").exists()


# ---- reruns -------------------------------------------------------------------------------------
def test_a_rerun_into_a_folder_with_no_finished_episode_is_not_refused(tmp_path, agents):
    """A first run stopped before its first episode (a bad row): the fixed rerun starts."""
    out = tmp_path / "out"
    (out / "episodes").mkdir(parents=True)
    (out / "episodes" / "single.jsonl").write_text("")
    (out / "settings.json").write_text(json.dumps({"command": "eval", "dataset": "other", "seed": 7}))
    (out / "problems.jsonl").write_text('{"id": "synthetic-stale", "question": "old"}\n')
    assert cli_main(_eval(out, agents, *_synthetic(4))) == 0
    assert len(_episode_keys(out)) == 4
    assert "synthetic-stale" not in (out / "problems.jsonl").read_text()  # the old run's problems went


def test_a_refused_rerun_names_each_difference_in_words(tmp_path, agents, capsys):
    data = tmp_path / "data.jsonl"
    data.write_text("".join(PROBLEM % (i, i, i + 1) for i in range(4)))
    out = tmp_path / "out"
    assert cli_main(_eval(out, agents, "--dataset", "jsonl", "--path", str(data))) == 0
    capsys.readouterr()
    data.write_text("".join(PROBLEM % (i, i, i + 2) for i in range(4)))
    agents.write_text(AGENTS + "samples: 3\n")
    assert cli_main(_eval(out, agents, "--dataset", "jsonl", "--path", str(data))) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert [line.split("other settings: ")[1].split(";")[0] for line in lines] == [
        "agents.samples: 5 -> 3", "the data file (--path) changed"
    ]
    assert not any("sha256" in line for line in lines)


# ---- a full disk --------------------------------------------------------------------------------
def _mount_tmpfs(where: Path, size: str) -> None:
    where.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here ({done.stderr.strip()}); the ENOSPC test below runs")


def test_a_full_disk_ends_in_one_line_and_the_rerun_resumes_on_a_real_small_disk(tmp_path, agents, capsys):
    disk = tmp_path / "disk"
    _mount_tmpfs(disk, "300k")
    try:
        argv = _eval(disk / "run", agents, *_synthetic(200))
        assert cli_main(argv) == 2
        err = capsys.readouterr().err
        line = err.strip().splitlines()[-1]  # after the progress bar
        assert "Traceback" not in err and line == (
            "councilzoo eval: error: no space left on the device; the finished work is kept: "
            "free some space, then rerun the same command to resume"
        )
        finished = _episode_keys(disk / "run")
        assert 0 < len(finished) < 200
        subprocess.run(["mount", "-o", "remount,size=8m", str(disk)], check=True)
        assert cli_main(argv) == 0
        keys = _episode_keys(disk / "run")
        assert len(keys) == len(set(keys)) == 200 and keys[: len(finished)] == finished
        assert len(read_metrics(disk / "run" / "problems.jsonl")) == 200
    finally:
        subprocess.run(["umount", str(disk)], check=False)


def test_a_full_disk_at_the_episode_write_ends_in_one_line_and_the_rerun_resumes(
    tmp_path, agents, capsys, monkeypatch
):
    """The same where no tmpfs can be mounted: the episode log's write fails with ENOSPC half-way
    through a line, as a full disk makes it."""
    real_append = EpisodeLog.append
    written = []

    def append(self, key, record):
        if len(written) == 30:
            self._file.write('{"episode": 0, "problem_id": "cut sh')  # what fits before the disk fills
            self._file.flush()
            raise OSError(errno.ENOSPC, "No space left on device")
        written.append(key)
        real_append(self, key, record)

    monkeypatch.setattr(EpisodeLog, "append", append)
    argv = _eval(tmp_path / "run", agents, *_synthetic(60))
    assert cli_main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.strip().splitlines()[-1] == (
        "councilzoo eval: error: no space left on the device; the finished work is kept: free some space, "
        "then rerun the same command to resume"
    )
    monkeypatch.setattr(EpisodeLog, "append", real_append)
    assert cli_main(argv) == 0
    keys = _episode_keys(tmp_path / "run")
    assert len(keys) == len(set(keys)) == 60 and keys[:30] == written


def test_a_metrics_line_cut_by_a_crash_is_not_glued_to_the_next(tmp_path):
    (tmp_path / "metrics.jsonl").write_text('{"step": 1, "reward": 0.5}\n{"step": 2, "rew')
    with MetricsLogger(tmp_path, resume=True) as logger:
        logger.log(2, {"reward": 0.25})
    assert [row["step"] for row in read_metrics(tmp_path / "metrics.jsonl")] == [1, 2]


# ---- --resume with changed settings ---------------------------------------------------------------
def _tracer(out: Path, *flags: str) -> list[str]:
    settings = ["problems_per_step=8", "data.eval_limit=8", "baselines=[]", "save_steps=2"]
    return ["train", "tracer", str(REPO / "configs" / "tracer_cpu_simulated.yaml"), "--out", str(out),
            *[arg for s in settings for arg in ("--set", s)], *flags]


def test_resume_refuses_changed_settings_unless_allowed_and_records_them(tmp_path, capsys):
    out = tmp_path / "tracer"
    assert cli_main(_tracer(out, "--max-steps", "2")) == 0
    capsys.readouterr()
    new_settings = ("--set", "env.lam=0.1", "--set", "controller.variant=rm")
    changed = _tracer(out, "--max-steps", "4", "--resume", *new_settings)
    assert cli_main(changed) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert [line.split("--resume: ")[1].split(" since")[0] for line in lines] == [
        "env.lam: 0.05 -> 0.1", 'controller.variant: "rm+" -> "rm"'
    ]
    assert "--allow-changed-settings" in lines[0] and not (out / "settings_changes.jsonl").exists()
    assert cli_main(changed + ["--allow-changed-settings"]) == 0
    [record] = read_metrics(out / "settings_changes.jsonl")
    assert record["resumed_after_step"] == 2
    assert record["changed"] == ["env.lam: 0.05 -> 0.1", 'controller.variant: "rm+" -> "rm"']
    # a longer run is no change of settings
    assert cli_main(_tracer(out, "--max-steps", "6", "--resume", *new_settings)) == 0
    assert len(read_metrics(out / "settings_changes.jsonl")) == 1


def test_the_lock_file_is_what_a_killed_run_leaves_and_it_blocks_nothing(tmp_path, agents):
    out = tmp_path / "out"
    holder = _holder(out)
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()
    assert (out / ".councilzoo.lock").exists()
    assert cli_main(_eval(out, agents, *_synthetic(3))) == 0
