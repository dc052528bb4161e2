"""The unit of work: one question with an optional gold answer."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from councilzoo.tasks.images import ImageInput, image_ref, is_image_input

__all__ = ["KINDS", "Problem", "answer_text"]

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

    ``images`` are the figures the question refers to, in order (PIL images or image file paths;
    see ``councilzoo.tasks.images``). Grading never looks at them; text-only agents see the
    question alone.
    """

    id: str
    question: str
    answer: str | None
    kind: str = "math"
    choices: tuple[str, ...] = ()
    source: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)
    images: tuple[ImageInput, ...] = ()

    def __post_init__(self) -> None:
        self.answer = answer_text(self.answer, self.id)
        if self.kind not in KINDS:
            raise ValueError(f"Problem {self.id!r}: kind must be one of {KINDS}, got {self.kind!r}")
        self.choices = tuple(self.choices)
        self.images = tuple(self.images)
        for image in self.images:
            if not is_image_input(image):
                raise TypeError(
                    f"Problem {self.id!r}: each image must be a PIL image or a file path, "
                    f"got {type(image).__name__}"
                )

    def to_dict(self, image_dir=None) -> dict[str, Any]:
        """JSON-serialisable fields; images become paths (in-memory ones saved under ``image_dir``,
        or written as their content hash when it is None), never pickled pixels."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["choices"] = list(self.choices)
        out["metadata"] = dict(self.metadata)
        out["images"] = [image_ref(image, image_dir) for image in self.images]
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Problem:
        return cls(**data)


def answer_text(value: Any, problem_id: Any = None) -> str | None:
    """A gold answer as the text graders compare: a JSON number ``2`` or ``27.0`` reads as "2" and
    "27" (files and hub releases store numeric answers as numbers), so it grades like its text."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if isinstance(value, float) and value.is_integer():
            return str(int(value))
        return str(value)
    raise TypeError(
        f"Problem {problem_id!r}: answer must be a string, a number or null, got {type(value).__name__}"
    )
