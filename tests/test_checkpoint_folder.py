"""Where checkpoints go, checked before the first step: a file where the folder should be, the only
checkpoint replaced by a file, a read-only folder; each with and without ``--resume``. The run stops
at once with one line naming the place and leaves every finished file as it was; with an intact
older checkpoint beside a broken newer one it resumes from the older one."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from councilzoo.cli import main as cli_main
from councilzoo.config import ConfigError
from councilzoo.learners.checkpoint import TRAINER_CHECKPOINT_RE, check_checkpoint_folder, save_checkpoint

REPO = Path(__file__).resolve().parents[1]
TRACER = str(REPO / "configs" / "tracer_cpu_simulated.yaml")
SMALL = ["max_steps=2", "save_steps=0", "problems_per_step=8", "data.eval_limit=8", "baselines=[]"]
READ_ONLY = Path("/sys/kernel")  # a folder on a read-only filesystem, even for root


def train(out: Path, *flags: str) -> int:
    argv = ["train", "tracer", TRACER, "--out", str(out), *flags]
    return cli_main(argv + [arg for setting in SMALL for arg in ("--set", setting)])


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    """A finished TRACER run whose only checkpoint is checkpoints/step-000002."""
    out = tmp_path_factory.mktemp("tracer") / "run"
    assert train(out) == 0
    assert [p.name for p in (out / "checkpoints").iterdir()] == ["step-000002"]
    return out


def snapshot(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def break_folder(out: Path) -> None:
    shutil.rmtree(out / "checkpoints")
    (out / "checkpoints").write_text("not a folder")


def break_only_checkpoint(out: Path) -> None:
    shutil.rmtree(out / "checkpoints" / "step-000002")
    (out / "checkpoints" / "step-000002").write_text("not a folder")


def read_only(out: Path) -> None:
    shutil.rmtree(out / "checkpoints")
    (out / "checkpoints").symlink_to(READ_ONLY)


HELD = "already holds checkpoints of a run: pass --resume"  # a fresh start over a run: refused as before


@pytest.mark.parametrize(
    ("fault", "resume", "expected"),
    [
        (break_folder, True, "checkpoints: a file, where this run writes its checkpoints"),
        (break_folder, False, "checkpoints: a file, where this run writes its checkpoints"),
        (break_only_checkpoint, True, "no intact checkpoint in"),
        (break_only_checkpoint, False, HELD),
        (read_only, True, "is not writable"),
        (read_only, False, HELD),
    ],
    ids=["checkpoints a file, resume", "checkpoints a file", "only checkpoint a file, resume",
         "only checkpoint a file", "read-only, resume", "read-only"],
)
def test_a_broken_checkpoint_folder_stops_the_run_at_once_and_keeps_its_work(
    finished, tmp_path, capsys, fault, resume, expected
):
    if fault is read_only and not READ_ONLY.is_dir():
        pytest.skip(f"no {READ_ONLY} here")
    out = tmp_path / "run"
    shutil.copytree(finished, out, symlinks=True)
    fault(out)
    before = snapshot(out)
    capsys.readouterr()
    assert train(out, *(["--resume"] if resume else [])) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("councilzoo train: error: ") and expected in line, line
    assert snapshot(out) == before  # metrics, summary and config as the finished run left them


def test_resume_uses_the_newest_intact_checkpoint_and_stops_without_one(tmp_path):
    root = tmp_path / "checkpoints"
    save_checkpoint(root, 1, state={})
    (root / "step-000002").write_text("a file")
    check_checkpoint_folder(root, resume=True)  # step 1 is intact: the resume starts there
    (root / "step-000001" / "state.json").write_text("{}")
    broken = r"no intact checkpoint in .*step-000002: not a folder; step-000001: state.json has 2 bytes"
    with pytest.raises(ConfigError, match=broken):
        check_checkpoint_folder(root, resume=True)
    check_checkpoint_folder(root, resume=False)  # a fresh start here is refused by the learner itself
    check_checkpoint_folder(tmp_path / "new" / "checkpoints", resume=True)  # nothing yet: a fresh start
    (tmp_path / "trl").mkdir()
    (tmp_path / "trl" / "checkpoint-10").write_text("")
    with pytest.raises(ConfigError, match="checkpoint-10: not a folder"):
        check_checkpoint_folder(tmp_path / "trl", resume=True, names=TRAINER_CHECKPOINT_RE)


CORL = str(REPO / "configs" / "corl_cpu.yaml")


@pytest.mark.parametrize(
    ("fault", "expected"),
    [("folder", "a file, where this run writes its checkpoints"), ("only", "no intact checkpoint in")],
    ids=["member folder a file", "only checkpoint a file"],
)
def test_a_cohort_resumed_over_a_broken_member_folder_stops_before_any_model_loads(
    tmp_path, capsys, fault, expected
):
    """Co-RL's launcher checks every member's checkpoint folder before data, models or worlds."""
    out = tmp_path / "run"
    member = out / "members" / "qwen"
    if fault == "folder":
        member.parent.mkdir(parents=True)
        member.write_text("not a folder")
    else:
        member.mkdir(parents=True)
        (member / "checkpoint-2").write_text("not a folder")
    before = snapshot(out)
    capsys.readouterr()
    assert cli_main(["train", "corl", CORL, "--out", str(out), "--resume"]) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("councilzoo train: error: ") and expected in line, line
    after = {name: data for name, data in snapshot(out).items() if name != ".councilzoo.lock"}  # the run lock
    assert after == before and not (out / "plan.json").exists()
