"""Metrics logging: a JSONL file always, plus TensorBoard, Weights & Biases or Trackio on request.

``MetricsLogger(out_dir, report_to=[...])`` appends one JSON object per step to
``out_dir/metrics.jsonl`` (or ``file_name``; flushed each step, so a crashed run keeps its
curve) and forwards the same numbers to each named backend. Backends are imported lazily;
naming one whose package is missing is a clear error at construction, before any training.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["check_report_to", "MetricsLogger", "read_metrics"]

_REPORT_TO = ("none", "tensorboard", "wandb", "trackio")
_PACKAGES = {"tensorboard": "tensorboard", "wandb": "wandb", "trackio": "trackio"}


def _require(backend: str) -> Any:
    import importlib

    try:
        return importlib.import_module(_PACKAGES[backend])
    except ImportError as exc:
        package = _PACKAGES[backend]
        raise ImportError(
            f"report_to={backend!r} needs the {package!r} package (pip install {package})"
        ) from exc


def check_report_to(report_to: str | Sequence[str]) -> list[str]:
    """Validate backend names (and that their packages import); 'none' alone disables them."""
    names = [report_to] if isinstance(report_to, str) else list(report_to)
    for name in names:
        if name not in _REPORT_TO:
            raise ValueError(f"report_to: unknown backend {name!r}; expected some of {_REPORT_TO}")
    names = [n for n in names if n != "none"]
    for name in names:
        _require(name)
    return names


class MetricsLogger:
    """Per-step scalars to JSONL and the chosen backends; use as a context manager or call close()."""

    def __init__(
        self,
        out_dir: str | Path,
        report_to: str | Sequence[str] = "none",
        *,
        project: str = "councilzoo",
        run_name: str | None = None,
        config: Mapping[str, Any] | None = None,
        resume: bool = False,
        file_name: str = "metrics.jsonl",
    ) -> None:
        self.out_dir = Path(out_dir)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.backends = check_report_to(report_to)
        if resume:
            cut_partial_line(self.out_dir / file_name)
        self._file = open(self.out_dir / file_name, "a" if resume else "w")  # noqa: SIM115
        self._tb = self._wandb = self._trackio = None
        name = run_name or self.out_dir.name
        if "tensorboard" in self.backends:
            from torch.utils.tensorboard import SummaryWriter

            self._tb = SummaryWriter(log_dir=str(self.out_dir / "tensorboard"))
        if "wandb" in self.backends:
            self._wandb = _require("wandb")
            self._wandb.init(project=project, name=name, config=dict(config or {}), dir=str(self.out_dir))
        if "trackio" in self.backends:
            self._trackio = _require("trackio")
            self._trackio.init(project=project, name=name, config=dict(config or {}))

    def log(self, step: int, metrics: Mapping[str, float]) -> None:
        """Record ``metrics`` for ``step`` (non-finite values are written as null in JSONL)."""
        clean = {k: (float(v) if math.isfinite(float(v)) else None) for k, v in metrics.items()}
        self._file.write(json.dumps({**clean, "step": step}) + "\n")  # the step argument wins
        self._file.flush()
        finite = {k: v for k, v in clean.items() if v is not None}
        if self._tb is not None:
            for key, value in finite.items():
                self._tb.add_scalar(key, value, step)
        if self._wandb is not None:
            self._wandb.log(finite, step=step)
        if self._trackio is not None:
            self._trackio.log(finite, step=step)

    def close(self) -> None:
        self._file.close()
        if self._tb is not None:
            self._tb.close()
        if self._wandb is not None:
            self._wandb.finish()
        if self._trackio is not None:
            self._trackio.finish()

    def __enter__(self) -> MetricsLogger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def cut_partial_line(path: str | Path) -> None:
    """Cut a last line that a crash or a full disk left unfinished from an append-only JSONL
    file, so that the next appended line is not glued to it."""
    path = Path(path)
    if not path.is_file():
        return
    with path.open("r+b") as file:
        data = file.read()
        if data and not data.endswith(b"\n"):
            file.truncate(data.rfind(b"\n") + 1)


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    """The rows of a ``metrics.jsonl`` file (a last line cut off by a crash is dropped)."""
    rows = []
    for line in Path(path).read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows
