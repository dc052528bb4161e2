"""The unit of work: one question with an optional gold answer."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

KINDS = ("math", "numeric", "multiple_choice", "code")


@dataclass
class Problem:
    """One item of a benchmark or synthetic task.

    ``answer`` is None for unlabeled data (label-free learners never need it). For
    ``multiple_choice`` items, ``choices`` holds the option texts in display order and
    ``answer`` is the correct letter ("A", "B", ...). ``metadata`` carries anything else a
    consumer may use, e.g. ``difficulty`` in [0, 1], ``paraphrases`` (tuple of alternative
    question texts with the same id and answer) or ``distractors`` (plausible wrong answers).

    ``code`` items (see ``councilzoo.tasks.code``) keep everything needed to run a program in
    JSON-serialisable metadata: ``entry_point`` (None: a stdin program), ``test_inputs``, and for
    labelled data ``test_script`` or ``expected_outputs``; ``answer`` is the output signature of the
    reference solution on the test inputs, so equivalence to it means "same outputs".
    """

    id: str
    question: str
    answer: str | None
    kind: str = "math"
    choices: tuple[str, ...] = ()
    source: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"Problem {self.id!r}: kind must be one of {KINDS}, got {self.kind!r}")
        self.choices = tuple(self.choices)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Problem:
        return cls(**data)
