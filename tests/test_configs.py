"""Every shipped config loads and validates; bad configs fail before any work, naming the key.

Data-driven: ``REGISTRY`` maps a file-name prefix of ``configs/*.yaml`` to its config class
(``module:Class``). Add a row when you add a config family; an unregistered file fails the test.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from councilzoo.config import ConfigError, dump_config, load_config, read_yaml

CONFIGS = Path(__file__).resolve().parents[1] / "configs"
REGISTRY = {
    "corl_": "councilzoo.learners.corl:CoRLConfig",
    "grpo_": "councilzoo.learners.baselines:BaselineConfig",
    "ttrl_": "councilzoo.learners.baselines:BaselineConfig",
    "rent_": "councilzoo.learners.baselines:BaselineConfig",
    "intuitor_": "councilzoo.learners.baselines:BaselineConfig",
    "tracer_": "councilzoo.learners.tracer.config:TracerConfig",
    "demo_": "councilzoo.evaluation.council:CouncilConfig",
    "eval_": "councilzoo.evaluation.council:CouncilConfig",
}


def _config_class(path: Path):
    matches = [target for prefix, target in REGISTRY.items() if path.name.startswith(prefix)]
    assert matches, f"{path.name}: no config class registered in tests/test_configs.py REGISTRY"
    module, name = matches[0].split(":")
    return getattr(importlib.import_module(module), name)


@pytest.mark.parametrize("path", sorted(CONFIGS.glob("*.yaml")), ids=lambda p: p.name)
def test_shipped_config_loads_and_round_trips(path, tmp_path):
    cls = _config_class(path)
    cfg = load_config(path, cls)
    assert load_config(dump_config(cfg, tmp_path / "again.yaml"), cls) == cfg


@dataclass
class _Inner:
    rate: float = field(default=0.1, metadata={"help": "a rate"})


@dataclass
class _Outer:
    path: str = field(metadata={"help": "where the model lives"})
    steps: int = 3
    inner: _Inner = field(default_factory=_Inner)
    tags: list[str] = field(default_factory=list)
    mode: str | None = None


@pytest.mark.parametrize(
    "data, message",
    [
        ({"path": "x", "stepz": 3}, "stepz: unknown key for"),
        ({"steps": 3}, "path: missing required key (where the model lives)"),
        ({"path": "x", "steps": "3"}, "steps: expected int"),
        ({"path": "x", "steps": True}, "steps: expected int"),
        ({"path": "x", "inner": {"rate": "fast"}}, "inner.rate: expected float"),
        ({"path": "x", "tags": [1]}, "tags[0]: expected str"),
    ],
)
def test_bad_configs_name_the_key(data, message):
    with pytest.raises(ConfigError) as err:
        load_config(data, _Outer)
    assert message in str(err.value)


def test_ints_widen_to_floats_and_optional_accepts_none():
    cfg = load_config({"path": "x", "inner": {"rate": 1}, "mode": None}, _Outer)
    assert cfg.inner.rate == 1.0 and isinstance(cfg.inner.rate, float) and cfg.mode is None


@pytest.mark.parametrize(
    "member, message",
    [
        ({"name": "a", "model": "/no/such/model"}, "does not exist"),
        ({"name": "a"}, "exactly one of 'model' and 'tiny_family'"),
        ({"name": "a", "tiny_family": "gpt2"}, "tiny_family: expected one of"),
    ],
)
def test_corl_member_errors_before_any_work(member, message):
    from councilzoo.learners.corl import CoRLConfig

    data = {"members": [member, {"name": "b", "tiny_family": "llama"}]}
    with pytest.raises(ConfigError) as err:
        load_config(data, CoRLConfig)
    assert message in str(err.value)


def test_corl_needs_two_members_and_a_peer_rule():
    from councilzoo.learners.corl import CoRLConfig

    one = {"members": [{"name": "a", "tiny_family": "qwen3"}]}
    with pytest.raises(ConfigError, match="needs >= 2 members"):
        load_config(one, CoRLConfig)
    two = {
        "members": [{"name": "a", "tiny_family": "qwen3"}, {"name": "b", "tiny_family": "llama"}],
        "reward_rule": "ground_truth",
    }
    with pytest.raises(ConfigError, match="reward_rule must be one of"):
        load_config(two, CoRLConfig)


def test_missing_config_file_and_unknown_backend():
    from councilzoo.learners.corl import CoRLConfig

    with pytest.raises(ConfigError, match="does not exist"):
        load_config("no/such.yaml", CoRLConfig)
    data = {
        "members": [{"name": "a", "tiny_family": "qwen3"}, {"name": "b", "tiny_family": "llama"}],
        "report_to": ["mlflow"],
    }
    with pytest.raises(ConfigError, match="unknown backend 'mlflow'"):
        load_config(data, CoRLConfig)


# ---- every mistake at once, with its line -------------------------------------------------------
def test_every_mistake_of_a_config_is_one_line_naming_its_key(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("stepz: 3\ninner: {rate: fast}\ntags: [a, 1]\n")
    with pytest.raises(ConfigError) as failure:
        load_config(path, _Outer)
    assert failure.value.problems == [
        f"{path}, line 1: stepz: unknown key for _Outer (did you mean 'steps'?); expected some of "
        "['inner', 'mode', 'path', 'steps', 'tags']",
        f"{path}, line 2: inner.rate: expected float, got str 'fast'",
        f"{path}, line 3: tags[1]: expected str, got int 1",
        f"{path}: path: missing required key (where the model lives)",
    ]


def test_a_key_given_twice_is_refused_at_every_depth_with_both_lines(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("path: a\ninner:\n  rate: 0.1\n  rate: 0.2\npath: b\n")
    merged = tmp_path / "merged.yaml"  # YAML merge keys override, they do not repeat
    merged.write_text("base: &base {rate: 0.1}\ninner:\n  <<: *base\n  rate: 0.2\n")
    assert read_yaml(merged)["inner"] == {"rate": 0.2}
    with pytest.raises(ConfigError) as failure:
        load_config(path, _Outer)
    assert failure.value.problems == [
        f"{path}, line 4: rate: key given twice in one mapping (first on line 3); YAML would keep only the "
        "last, so remove one",
        f"{path}, line 5: path: key given twice in one mapping (first on line 1); YAML would keep only the "
        "last, so remove one",
    ]


def test_overrides_apply_to_the_file_and_a_mistake_names_its_flag_before_the_files_in_line_order(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("path: a\ntags: [x, y]\ninner: {rate: 0.1}\n")
    cfg = load_config(path, _Outer, ["inner.rate=1e-6", "tags.1=z", "mode=fast"])
    assert (cfg.inner.rate, cfg.tags, cfg.mode) == (1e-6, ["x", "z"], "fast")
    path.write_text("path: a\npath: b\nsteps: many\n")
    with pytest.raises(ConfigError) as failure:
        load_config(path, _Outer, ["inner.rate=fast"])
    assert failure.value.problems == [
        "--set inner.rate=fast: inner.rate: expected float, got str 'fast'",
        f"{path}, line 2: path: key given twice in one mapping (first on line 1); YAML would keep only the "
        "last, so remove one",
        f"{path}, line 3: steps: expected int, got str 'many'",
    ]


def test_yaml_11_exponents_without_a_dot_are_floats():
    assert load_config({"path": "x", "inner": {"rate": "1e-6"}}, _Outer).inner.rate == 1e-6


def test_trainer_values_are_checked_against_grpoconfigs_own_field_types():
    import dataclasses
    import typing

    from trl import GRPOConfig

    from councilzoo.config import check_fields

    defaults = {
        f.name: f.default if f.default is not dataclasses.MISSING else f.default_factory()
        for f in dataclasses.fields(GRPOConfig)
        if f.init and (f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING)
    }
    assert len(defaults) > 150
    check_fields(defaults, GRPOConfig, "trainer")  # TRL's own defaults pass: no false alarm
    assert typing.get_type_hints(GRPOConfig)["learning_rate"] is float
    with pytest.raises(ConfigError) as failure:
        wrong = {"learning_rate": "fast", "bf16": "maybe", "learning_rat": 1, "beta": 0}
        check_fields(wrong, GRPOConfig, "trainer")
    assert failure.value.problems == [
        "trainer.learning_rat: not a GRPOConfig field (did you mean 'learning_rate'?) "
        "(see trl.trainer.grpo_config.GRPOConfig)",
        "trainer.learning_rate: expected float, got str 'fast'",
        "trainer.bf16: expected bool, got str 'maybe'",
    ]


def test_a_cohort_member_may_name_a_real_model_before_it_is_converted():
    """``smollm2-135m-instruct`` is converted on first use (``resolve_model_path``), not a folder
    that must already exist; another name without a folder is still refused."""
    from councilzoo.learners.corl.config import MemberConfig

    assert MemberConfig(name="smol", model="smollm2-135m-instruct").model == "smollm2-135m-instruct"
    with pytest.raises(ValueError, match="does not exist"):
        MemberConfig(name="smol", model="smollm2-135m-instruc")


def test_cohort_prompt_style_is_checked_before_work():
    from councilzoo.learners.corl import CoRLConfig

    members = [{"name": "a", "tiny_family": "qwen3"}, {"name": "b", "tiny_family": "llama"}]
    assert load_config({"members": members, "prompt_style": "concise"}, CoRLConfig).prompt_style == "concise"
    with pytest.raises(ConfigError, match="prompt style must be one of"):
        load_config({"members": members, "prompt_style": "chatty"}, CoRLConfig)


def test_a_member_has_its_own_prompt_style_and_its_stop_strings_need_seeded_sampling():
    """A base model beside an instruction model: its own style over the cohort's, and stop strings,
    which only the cohort's seeded sampling applies."""
    from councilzoo.learners.corl import CoRLConfig

    base = {"name": "b", "tiny_family": "llama", "prompt_style": "few_shot", "stop": ["\nQuestion:"]}
    members = [{"name": "a", "tiny_family": "qwen3"}, base]
    cfg = load_config({"members": members, "prompt_style": "concise", "seeded_sampling": True}, CoRLConfig)
    assert (cfg.member_style(0), cfg.member_style(1)) == ("concise", "few_shot")
    with pytest.raises(ConfigError, match="stop strings need seeded_sampling"):
        load_config({"members": members}, CoRLConfig)
    with pytest.raises(ConfigError, match="prompt style must be one of"):
        load_config({"members": [members[0], {**base, "prompt_style": "fewshot"}]}, CoRLConfig)


def test_a_cohort_configs_member_mistakes_come_together_with_file_and_line(tmp_path):
    """Three mistakes in two members and one at the top: one run names all four, each with the line
    of the member (or key) it concerns."""
    from councilzoo.learners.corl import CoRLConfig

    path = tmp_path / "corl.yaml"
    path.write_text(
        "members:\n"
        "  - name: a\n"
        "    tiny_family: qwen3\n"
        "    trainer: {learning_rat: 1.0e-6, bf16: maybe}\n"
        "  - name: b\n"
        f"    model: {tmp_path / 'absent'}\n"
        "max_stpes: 3\n"
    )
    with pytest.raises(ConfigError) as failure:
        load_config(path, CoRLConfig)
    lines = failure.value.problems
    assert len(lines) == 4, lines
    assert lines[0].startswith(f"{path}, line 2: members[0]: trainer.learning_rat: not a GRPOConfig field "
                               "(did you mean 'learning_rate'?)")
    assert lines[1] == f"{path}, line 2: members[0]: trainer.bf16: expected bool, got str 'maybe'"
    absent = tmp_path / "absent"
    assert lines[2] == f"{path}, line 5: members[1]: member 'b': model path '{absent}' does not exist"
    assert lines[3].startswith(f"{path}, line 7: max_stpes: unknown key for CoRLConfig (did you mean "
                               "'max_steps'?)")


def test_one_data_config_serves_corl_and_tracer_and_tracers_older_keys_still_read():
    """Co-RL's and TRACER's ``data:`` are the one ``DataConfig``; TRACER's older names read as the
    fields they name (the same resolved config), its own synthetic default stays 0.5, and a key
    given under both names is one line naming the older."""
    from councilzoo.config import config_to_dict
    from councilzoo.learners.corl import CoRLConfig
    from councilzoo.learners.data import DataConfig
    from councilzoo.learners.tracer.config import TracerConfig

    older = {"train": "synthetic:word_problems", "train_split": "train", "train_limit": 9,
             "synthetic_size": 32, "synthetic_difficulty": 0.25, "eval_limit": 8}
    newer = {"dataset": "synthetic:word_problems", "split": "train", "limit": 9,
             "num_problems": 32, "difficulty": 0.25, "eval_limit": 8}
    tracer = load_config({"data": older}, TracerConfig)
    assert tracer == load_config({"data": newer}, TracerConfig)
    assert isinstance(tracer.data, DataConfig)
    members = [{"name": "a", "tiny_family": "qwen3"}, {"name": "b", "tiny_family": "llama"}]
    assert isinstance(load_config({"members": members}, CoRLConfig).data, DataConfig)
    assert config_to_dict(tracer)["data"]["dataset"] == "synthetic:word_problems"  # written as the newer name
    assert load_config({"data": {"synthetic_size": 8}}, TracerConfig).data.difficulty == 0.5
    with pytest.raises(ConfigError) as err:
        load_config({"data": {"train": "gsm8k", "dataset": "gsm8k"}}, TracerConfig)
    assert str(err.value) == "data.train: the older name of 'dataset'; give one of them"
    with pytest.raises(ConfigError, match=r"^data.synthetic_size: must be >= 1"):
        load_config({"data": {"synthetic_size": 0}}, TracerConfig)
