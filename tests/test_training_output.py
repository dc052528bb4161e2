"""What training tells its user and how fast it starts: tiny models cached by their settings,
progress as plain lines outside a terminal, the final table's member names."""

from __future__ import annotations

import subprocess
import sys

import pytest

import councilzoo.tiny_members as tiny_members
from councilzoo.config import cached_build, load_config
from councilzoo.learners.corl import CoRLConfig
from councilzoo.learners.data import load_items
from councilzoo.learners.train import print_summary


def _config(out, warmup_steps=2, **extra) -> CoRLConfig:
    data = {
        "members": [
            {"name": "qwen", "tiny_family": "qwen3", "tiny_warmup_steps": warmup_steps},
            {"name": "llama", "tiny_family": "llama", "view": 1, "tiny_warmup_steps": warmup_steps},
        ],
        "output_dir": str(out),
        "data": {"dataset": "synthetic:multiple_choice", "num_problems": 16},
        **extra,
    }
    return load_config(data, CoRLConfig)


@pytest.mark.slow
def test_a_second_run_reuses_the_cached_warm_models_and_a_changed_setting_rebuilds(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv("COUNCILZOO_CACHE", str(tmp_path / "cache"))
    steps_run = []
    teach = tiny_members.teach_answer_format

    def counting_teach(*args, **kwargs):  # the real warm-up, counted
        steps_run.append(args[4])
        return teach(*args, **kwargs)

    monkeypatch.setattr(tiny_members, "teach_answer_format", counting_teach)
    first = _config(tmp_path / "out1")
    tiny_members.build_tiny_models(first, load_items(first.data, first.seed))
    assert steps_run == [2, 2]
    dirs = [first.tiny_model_dir(i) for i in range(2)]
    assert all(d.parent == tmp_path / "cache" / "cohort_members" for d in dirs)
    weights = [(d / "model.safetensors").read_bytes() for d in dirs]
    assert "warming up tiny model qwen" in capsys.readouterr().out

    second = _config(tmp_path / "out2")
    tiny_members.build_tiny_models(second, load_items(second.data, second.seed))
    assert steps_run == [2, 2]  # no SFT step ran
    assert [second.tiny_model_dir(i) for i in range(2)] == dirs
    assert [(d / "model.safetensors").read_bytes() for d in dirs] == weights
    assert "cached at" in capsys.readouterr().out

    changed = _config(tmp_path / "out3", warmup_steps=3)
    tiny_members.build_tiny_models(changed, load_items(changed.data, changed.seed))
    assert steps_run == [2, 2, 3, 3]
    assert all(changed.tiny_model_dir(i) not in dirs for i in range(2))
    leftovers = [p.name for p in (tmp_path / "cache" / "cohort_members").iterdir() if ".tmp-" in p.name]
    assert leftovers == []  # every build was renamed into place


def test_the_cache_folder_follows_the_environment(monkeypatch, tmp_path):
    from councilzoo.config import cache_home

    monkeypatch.delenv("COUNCILZOO_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_home() == tmp_path / "xdg" / "councilzoo"
    assert _config(tmp_path).tiny_model_dir(0).parent == tmp_path / "xdg" / "councilzoo" / "cohort_members"
    monkeypatch.setenv("COUNCILZOO_CACHE", str(tmp_path / "mine"))
    assert cache_home() == tmp_path / "mine"


def test_progress_in_a_log_file_is_one_plain_line_per_step():
    script = (
        "from councilzoo.progress import Progress, phase\n"
        "phase('warming up')\n"
        "p = Progress('qwen', 3)\n"
        "for step in (1, 2, 3):\n"
        "    p.update(step, {'reward': 0.5 * step, 'label_accuracy': 0.25})\n"
        "p.close()\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert "\x1b" not in done.stdout + done.stderr and "\r" not in done.stdout + done.stderr
    assert done.stdout.splitlines() == [
        "councilzoo: warming up",
        "qwen step 1/3 reward=0.500 label_accuracy=0.250",
        "qwen step 2/3 reward=1.000 label_accuracy=0.250",
        "qwen step 3/3 reward=1.500 label_accuracy=0.250",
    ]


def test_the_final_table_names_the_members_that_ran(tmp_path, capsys):
    cfg = _config(tmp_path)
    print_summary("corl", cfg, [{"reward": 0.75}], members=[1])
    table = capsys.readouterr().out
    assert "llama" in table and "qwen" not in table


def test_two_builders_of_one_model_build_it_once(tmp_path):
    """The second builder waits on the lock, then finds the model in place (no rename clash)."""
    import threading
    import time

    builds = []

    def build(out):
        builds.append(out)
        out.mkdir()
        time.sleep(0.3)  # both builders are inside cached_build by now
        (out / "model.safetensors").write_bytes(b"weights")

    target = tmp_path / "qwen3-0123"
    threads = [
        threading.Thread(target=cached_build, args=(target, {"family": "qwen3"}, build))
        for _ in range(2)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(builds) == 1
    assert (target / "model.safetensors").read_bytes() == b"weights"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["qwen3-0123", "qwen3-0123.lock"]
