"""The command line turns bad user input into a one-line error and exit status 2, before work."""

from __future__ import annotations

import pytest

from councilzoo.cli import main

BAD_EVAL = ["eval", "--protocol", "nope", "--agents", "configs/demo_agents.yaml",
            "--dataset", "synthetic:numeric"]


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (BAD_EVAL, "unknown ['nope']"),
        (["train", "corl", "configs/does_not_exist.yaml"], "does not exist"),
    ],
)
def test_bad_input_exits_2_with_a_message(argv, expected, capsys, monkeypatch, tmp_path):
    monkeypatch.delenv("COUNCILZOO_TRACEBACK", raising=False)
    assert main([*argv, "--out", str(tmp_path)]) == 2
    assert expected in capsys.readouterr().err


def test_traceback_on_request(monkeypatch, tmp_path):
    monkeypatch.setenv("COUNCILZOO_TRACEBACK", "1")
    with pytest.raises(ValueError, match="unknown"):
        main([*BAD_EVAL, "--out", str(tmp_path)])
