"""Where a cohort runs (devices, processes, machines, ports) versus what it learns: the launcher's
checks at each member's real world size, the config fingerprint, and how a world is started."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from councilzoo.config import ConfigError, load_config
from councilzoo.learners.corl import CoRLConfig
from councilzoo.learners.corl.launch import member_command

ROOT = Path(__file__).resolve().parents[1]


def _config(tmp_path: Path, **changes) -> CoRLConfig:
    data = yaml.safe_load((ROOT / "configs" / "corl_gpu_qwen_llama.yaml").read_text())
    for member, family in zip(data["members"], ("qwen3", "llama"), strict=True):
        del member["model"], member["accelerate_config"]
        member["tiny_family"] = family
    data["output_dir"] = str(tmp_path / "run")
    data.update(changes)
    return load_config(data, CoRLConfig)


def test_batch_settings_are_checked_at_the_members_world_size(tmp_path):
    cfg = _config(tmp_path)
    cfg.members[0].num_processes = 3
    with pytest.raises(ConfigError) as err:
        cfg.member_args(0, world_size=cfg.members[0].world_size())
    assert str(err.value) == (
        "members.0 (qwen): generation_batch_size 512 (prompts_per_step 64 x num_generations 8) is not "
        "divisible by the global batch 24 (per_device_train_batch_size 8 x 3 processes); use num_processes 2 "
        "or prompts_per_step 60"
    )
    cfg.members[0].num_processes = 8
    cfg.trainer = {**cfg.trainer, "gradient_accumulation_steps": 16}  # one update per 512-completion round
    wrong = "makes 8 micro-steps .* gradient_accumulation_steps=16 does not divide; "
    wrong += "use per_device_train_batch_size 4 "
    with pytest.raises(ConfigError, match=wrong + "or num_processes 4 or gradient_accumulation_steps 8"):
        cfg.member_args(0, world_size=8)
    cfg.member_args(0, world_size=1)  # the same settings pass at world size 1, where TRL checks them
    for fix in ({"prompts_per_step": 60}, {"trainer": {**cfg.trainer, "gradient_accumulation_steps": 8}}):
        fixed = _config(tmp_path, **fix)
        fixed.member_args(0, world_size=3 if "prompts_per_step" in fix else 8)  # the suggestion works


def test_the_fingerprint_ignores_placement_but_not_training(tmp_path):
    base = _config(tmp_path).fingerprint()
    placed = _config(tmp_path / "elsewhere", distributed={"host": "10.0.0.1", "port": 1234})
    placed.members[0].devices, placed.members[0].num_processes = "0,1,2,3,4,5,6,7", 8
    placed.members[1].trainer = {"vllm_server_base_url": "http://127.0.0.1:8001", "vllm_group_port": 5}
    assert placed.fingerprint() == base
    changed = _config(tmp_path)
    changed.members[1].trainer = {"learning_rate": 2e-6}
    assert changed.fingerprint() != base


def test_each_member_gets_its_own_vllm_group_port_unless_set(tmp_path):
    cfg = _config(tmp_path)
    assert [cfg.member_args(i, world_size=4).vllm_group_port for i in range(2)] == [51216, 51217]
    cfg.members[1].trainer = {"vllm_group_port": 60000}
    assert cfg.member_args(1, world_size=4).vllm_group_port == 60000


def test_a_world_spanning_machines_keeps_its_configs_port(tmp_path):
    cfg = _config(tmp_path)
    member = cfg.members[0]
    member.accelerate_config = str(ROOT / "configs" / "accelerate" / "zero3.yaml")
    one_machine = member_command(tmp_path / "c.yaml", "corl", 0, member, resume=False)
    assert "--main_process_port" in one_machine
    member.accelerate_config = str(ROOT / "configs" / "accelerate" / "two_nodes.yaml")
    spanning = member_command(tmp_path / "c.yaml", "corl", 0, member, resume=False)
    assert "--main_process_port" not in spanning
    assert spanning[spanning.index("--num_processes") + 1] == "8"  # 4 per machine x 2 machines
