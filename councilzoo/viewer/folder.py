"""An output folder read for the viewer: one index of everything in it, and each item in full.

What the commands write, and where ``OutputFolder`` finds it (at any depth, so a folder holding
several runs opens too):

- ``eval`` and ``demo``: ``report.json`` (the protocols' rows and the accuracy-cost frontier),
  ``episodes/<run>.jsonl`` (one episode record a line; runs named after a protocol, plus the
  auxiliary ``dev_*`` and ``test_single_*`` runs the fitted protocols used) and
  ``problems.jsonl`` (question, gold answer and metadata of every problem the records name);
- ``train``: ``metrics.jsonl`` (TRACER: one row a step, its controllers' average speak
  probability per information state under ``regret/<role>/<state>/speak_avg``) or
  ``members/<name>/metrics.jsonl`` and ``eval.jsonl`` (cohorts: Co-RL and its baselines);
- ``repro``: one folder per claim with ``report.md`` and its figures; Co-RL's training runs are
  under ``corl/runs/``.

The index holds one compact row per episode (its run, problem, outcome, escalation path and
cost) and where its line starts, so the page filters 10,000 episodes at once and asks for one
conversation at a time. A folder may come from anyone: a line that is not an episode record (cut
short by a crash, a field missing or of the wrong type) is skipped and named in ``skipped`` with
its file and line, a log with no episode is not listed, and no file outside the folder is served,
whatever path a record names.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from markdown_it import MarkdownIt

from councilzoo.envs.council_env import grade
from councilzoo.learners.logging import read_metrics
from councilzoo.tasks.grading import ERROR_PREFIX, SIGNATURE_PREFIX, extract_program
from councilzoo.tasks.problem import Problem

__all__ = ["MAX_DEPTH", "MalformedRecord", "OutputFolder", "outcome"]

# Outcome bits of an episode (an episode may be right and rescued, wrong and harmed).
RIGHT, WRONG, RESCUED, HARMED = 1, 2, 4, 8
SKIPPED_FOLDERS = {"checkpoints", "final", "tensorboard", "wandb", "members", "episodes", "__pycache__"}
MAX_DEPTH = 6
POLICY_KEY = "speak_avg"  # regret/<role>/<state>/speak_avg: the average strategy TRACER evaluates
AGENT_COSTS_MARK, TURNS_MARK, INFO_MARK = ', "cost_by_agent": ', ', "turns": [', ', "info": '
TURN_MARK = '{"agent": '
_DECODER = json.JSONDecoder()
HEAVY_TURN_FIELDS = ("prompt_token_ids", "token_ids", "logprobs")  # token lists the page never shows
FILE_SUFFIXES = {".md", ".png", ".jpg", ".jpeg", ".gif", ".svg", ".webp", ".json"}  # what /files/ sends
SKIPPED_SHOWN = 20  # malformed lines named one by one; the rest are counted
# What the index and the page read of a record and of a turn (``EpisodeRecord.to_dict`` writes them)
_NONE = type(None)
RECORD_SHAPE = {"problem_id": (str,), "final_answer": (str, _NONE), "correct": (bool, _NONE), "cost": (dict,),
                "info": (dict, _NONE)}
TURN_SHAPE = {"agent": (str,), "role": (str,), "mode": (str,), "text": (str,), "answer": (str, _NONE),
              "cost": (dict,)}
COST_SHAPE = {"calls": (int, float), "completion_tokens": (int, float)}
# report.md as HTML: raw HTML in it is escaped, links are checked (no javascript: URLs)
_MARKDOWN = MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])


@dataclass
class _EvalSection:
    """A folder written by ``eval`` or ``demo``: its report and its episode logs."""

    path: Path
    report: dict[str, Any]
    runs: list[int] = field(default_factory=list)  # its episode logs, as indices of the folder's runs

    @cached_property
    def problems(self) -> dict[str, dict[str, Any]]:
        """The problems by id (read when an episode is first opened; empty for folders written
        before ``problems.jsonl`` existed)."""
        path = self.path / "problems.jsonl"
        return {row["id"]: row for row in read_metrics(path)} if path.is_file() else {}


@dataclass
class _TrainingRun:
    """A folder written by ``train``: ``kind`` is "tracer" or "cohort" (members, each a curve)."""

    path: Path
    kind: str
    members: list[str]


def _skipped(name: str) -> bool:
    return name.startswith(".") or name.startswith("checkpoint") or name in SKIPPED_FOLDERS


def _walk(root: Path) -> Iterator[Path]:
    """``root`` and its folders, breadth first, skipping checkpoints and other bulky leaves."""
    level = [root]
    for _ in range(MAX_DEPTH):
        following = []
        for folder in level:
            yield folder
            try:
                children = sorted(p for p in folder.iterdir() if p.is_dir() and not _skipped(p.name))
            except OSError:
                continue
            following += children
        level = following


def _eval_report(path: Path) -> dict[str, Any]:
    """The ``report.json`` of eval or demo at ``path`` ({} when there is none yet: a run that has
    not finished); a ``ValueError`` in one line for one that is not such a report (cut short by a
    full disk, edited by hand), naming what is wrong."""
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text())
    except ValueError as err:
        raise ValueError(f"{path}: not valid JSON ({err}); rerun the command that wrote it") from None
    if isinstance(data, dict) and "protocols" not in data:
        return {}  # another command's report (repro's claims): no protocols' table
    shape = {"protocols": dict, "frontier": dict, "run": dict}
    wrong = [
        f"{key!r} is not a mapping" for key, kind in shape.items() if not isinstance(data.get(key, {}), kind)
    ] if isinstance(data, dict) else ["it is not a JSON object"]
    if not wrong:
        wrong = [f"protocol {name!r} is not a row" for name, row in data.get("protocols", {}).items()
                 if not isinstance(row, dict)]
    if wrong:
        raise ValueError(
            f"{path}: not a report of eval or demo ({'; '.join(wrong)}); rerun the command that wrote it"
        )
    return data


def _is_tracer(metrics_file: Path) -> bool:
    with open(metrics_file) as file:
        first = file.readline()
    return "regret/" in first or "speak_rate/" in first


class OutputFolder:
    """Everything ``councilzoo view`` shows of one folder; built once, then read per request."""

    def __init__(self, root: str | os.PathLike) -> None:
        self.root = Path(root).resolve()
        if not self.root.is_dir():
            raise FileNotFoundError(f"{root}: no such folder (give the --out of eval, demo, train or repro)")
        self.evals: list[_EvalSection] = []
        self.trainings: list[_TrainingRun] = []
        self.reports: list[Path] = []
        for folder in _walk(self.root):
            self._add(folder)
        if not (self.evals or self.trainings or self.reports):
            raise ValueError(
                f"{root}: no report.md, episodes/ or metrics.jsonl found in it or below it "
                "(give the --out folder of eval, demo, train or repro, e.g. demo-out)"
            )
        self._index_episodes()

    def _add(self, folder: Path) -> None:
        if (folder / "report.md").is_file():
            self.reports.append(folder)
        if any((folder / "episodes").glob("*.jsonl")):
            self.evals.append(_EvalSection(folder, _eval_report(folder / "report.json")))
        members = sorted(p.parent.name for p in (folder / "members").glob("*/metrics.jsonl"))
        if members:
            self.trainings.append(_TrainingRun(folder, "cohort", members))
        elif (folder / "metrics.jsonl").is_file() and _is_tracer(folder / "metrics.jsonl"):
            self.trainings.append(_TrainingRun(folder, "tracer", ["controllers"]))

    def relative(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix() or "."

    # -- episodes ----------------------------------------------------------------------------

    def _index_episodes(self) -> None:
        """One compact row per episode line (columns of ``rows``; problems and escalation paths
        as indices into ``problem_ids`` and ``paths``), and where to read it back in full."""
        self.run_names: list[str] = []  # "<section>/<run>" labels, the page's protocol filter
        self.run_section: list[int] = []
        self.run_files: list[Path] = []
        self.problem_ids: list[str] = []
        self.paths: list[str] = []
        self._problem_index: dict[str, int] = {}
        self._path_index: dict[str, int] = {}
        columns = ("run", "problem", "outcome", "path", "calls", "tokens", "turns", "final")
        self.rows: dict[str, list[Any]] = {name: [] for name in columns}
        self.locations: list[tuple[int, int, int]] = []  # (run, byte offset of the line, line number)
        self.skipped: list[str] = []  # "<file>, line <n>: <what is wrong>", once each
        malformed = 0
        for s, section in enumerate(self.evals):
            malformed += self._index_section(s, section)
        if malformed > SKIPPED_SHOWN:
            self.skipped.append(f"{malformed - SKIPPED_SHOWN:,} more malformed episode lines")

    def _index_section(self, s: int, section: _EvalSection) -> int:
        """The section's runs, the report's protocols first (in its order), then the others; a log
        with no episode (a run interrupted before its first) is left out. Returns how many lines
        were not episode records."""
        prefix = "" if section.path == self.root else self.relative(section.path) + "/"
        records, malformed = {}, 0
        for file in sorted((section.path / "episodes").glob("*.jsonl")):
            records[file.stem] = []
            for number, offset, record in self._lines(file):
                if isinstance(record, str):
                    malformed += 1
                    if len(self.skipped) < SKIPPED_SHOWN:
                        self.skipped.append(f"{file}, line {number}: {record}")
                else:
                    records[file.stem].append((number, offset, record))
        records = {name: lines for name, lines in records.items() if lines}
        protocols = list(section.report.get("protocols", {}))
        order = sorted(records, key=lambda r: (protocols.index(r) if r in protocols else len(protocols), r))
        anchor = {rec["problem_id"]: bool(rec["correct"]) for _, _, rec in records.get("single", [])}
        for name in order:
            run = len(self.run_names)
            self.run_names.append(prefix + name)
            self.run_section.append(s)
            self.run_files.append(section.path / "episodes" / f"{name}.jsonl")
            section.runs.append(run)
            for number, offset, record in records[name]:
                problem = _intern(record["problem_id"], self.problem_ids, self._problem_index)
                path = (record.get("info") or {}).get("path")
                path = None if path is None else _intern(path, self.paths, self._path_index)
                cost = record["cost"]
                self.rows["run"].append(run)
                self.rows["problem"].append(problem)
                self.rows["outcome"].append(outcome(record, anchor))
                self.rows["path"].append(path)
                self.rows["calls"].append(cost.get("calls", 0))
                self.rows["tokens"].append(cost.get("completion_tokens", 0))
                self.rows["turns"].append(record["turn_count"])
                self.rows["final"].append(_short(record.get("final_answer")))
                self.locations.append((run, offset, number))
        return malformed

    @staticmethod
    def _lines(path: Path) -> Iterator[tuple[int, int, dict[str, Any] | str]]:
        """(line number, byte offset, summary) of each line that is not blank; in place of the
        summary, what is wrong with a line that is not an episode record."""
        offset = 0
        with open(path, "rb") as file:
            for number, line in enumerate(file, start=1):
                if line.strip():
                    yield number, offset, _summary(line)
                offset += len(line)

    def _record(self, index: int) -> tuple[dict[str, Any], str]:
        """Episode ``index``'s record as written, and where it is (``<file>, line <n>``)."""
        run, offset, number = _item(self.locations, index, "episode")
        with open(self.run_files[run], "rb") as file:
            file.seek(offset)
            return json.loads(file.readline()), f"{self.run_files[run]}, line {number}"

    def episode(self, index: int) -> dict[str, Any]:
        """Episode ``index`` in full, with its problem and what the page shows per turn: whether
        its answer is right and, for code, the program it states and how its tests went."""
        record, where = self._record(index)
        turns = record.get("turns")
        wrong = ["turns: expected a list"] if not isinstance(turns, list) else [
            problem for k, turn in enumerate(turns) for problem in
            _wrong_fields(turn, TURN_SHAPE, f"turns[{k}]")
        ]
        if wrong:
            raise MalformedRecord(f"{where}: not an episode the page can show ({'; '.join(wrong[:3])})")
        images = record.get("images") if isinstance(record.get("images"), list) else []  # else: none shown
        run = self.locations[index][0]
        section = self.evals[self.run_section[run]]
        data = section.problems.get(record["problem_id"])
        problem = Problem.from_dict({**data, "images": ()}) if data else None
        for turn in turns:
            for name in HEAVY_TURN_FIELDS:
                turn.pop(name, None)
            graded = problem is not None and turn.get("answer") is not None
            turn["correct"] = grade(turn["answer"], problem) if graded else None
            if problem is not None and problem.kind == "code" and turn.get("text"):
                turn["program"] = extract_program(turn["text"], problem.metadata.get("entry_point"))
                turn["test"] = _code_test_result(turn.get("answer"), problem)
        record.update(
            index=index,
            run=self.run_names[run],
            outcome=self.rows["outcome"][index],
            problem=data,
            image_urls=[f"/api/image/{index}/{k}" for k in range(len(images))],
        )
        return record

    def image_file(self, index: int, k: int) -> Path | None:
        """Episode ``index``'s k-th image on disk: its recorded path, else the same file name in
        the run's image folder (a folder moved after the run)."""
        images = self._record(index)[0].get("images")
        if not isinstance(images, list) or not 0 <= k < len(images) or not isinstance(images[k], str):
            return None
        recorded = Path(images[k])
        beside = self.run_files[self.locations[index][0]].parent / recorded.parent.name / recorded.name
        for candidate in (recorded, beside):
            inside = self.file_inside(candidate)
            if inside is not None:
                return inside
        return None

    def file_inside(self, path: Path) -> Path | None:
        """``path`` when it is a file of a kind the page shows inside the folder (links resolved):
        a folder someone sent may name any file on this machine in its records."""
        try:
            resolved = (self.root / path).resolve()
        except (OSError, ValueError):  # a loop of links, a NUL byte
            return None
        inside = resolved.is_relative_to(self.root) and resolved.suffix.lower() in FILE_SUFFIXES
        return resolved if inside and resolved.is_file() else None

    def report(self, index: int) -> dict[str, Any]:
        """``report.md`` number ``index`` as HTML (markdown-it: raw HTML escaped, links checked)."""
        folder = _item(self.reports, index, "report")
        return {"path": self.relative(folder), "html": _MARKDOWN.render((folder / "report.md").read_text())}

    # -- training runs -----------------------------------------------------------------------

    def training(self, index: int) -> dict[str, Any]:
        """Run ``index``'s curves, read now (a run still training shows its latest steps):
        per member each metric as [step, value] pairs; TRACER's policies per role and state."""
        run = _item(self.trainings, index, "training run")
        if run.kind == "tracer":
            rows = read_metrics(run.path / "metrics.jsonl")
            return {"kind": "tracer", "members": {"controllers": _curves(rows)}, "policies": _policies(rows)}
        members = {}
        for name in run.members:
            folder = run.path / "members" / name
            curves = _curves(read_metrics(folder / "metrics.jsonl"))
            if (folder / "eval.jsonl").is_file():
                held_out = _curves(read_metrics(folder / "eval.jsonl"))
                curves.update({f"eval/{key}": points for key, points in held_out.items()})
            members[name] = curves
        return {"kind": "cohort", "members": members}

    # -- the page's index --------------------------------------------------------------------

    def index(self) -> dict[str, Any]:
        return {
            "title": self.root.name,
            "folder": str(self.root),
            "evals": [
                {
                    "path": self.relative(s.path),
                    "protocols": list(s.report.get("protocols", {}).values()),
                    "frontier": s.report.get("frontier", {}),
                    "run": s.report.get("run", {}),
                    "runs": s.runs,
                }
                for s in self.evals
            ],
            "runs": self.run_names,
            "problems": self.problem_ids,
            "paths": self.paths,
            "episodes": self.rows,
            "trainings": [
                {"path": self.relative(t.path), "kind": t.kind, "members": t.members} for t in self.trainings
            ],
            "reports": [self.relative(r) for r in self.reports],
            "skipped": self.skipped,
        }


class NotInFolder(LookupError):
    """An episode or training run the folder does not hold (a link from an earlier run of it)."""


class MalformedRecord(ValueError):
    """An episode line whose turns the page cannot show; the message names its file and line."""


def _item(items: list, index: int, noun: str) -> Any:
    """``items[index]`` for ``0 <= index < len(items)``, else ``NotInFolder`` saying what there is."""
    if not 0 <= index < len(items):
        held = f"{noun}s 0 to {len(items) - 1}" if items else f"no {noun}"
        raise NotInFolder(f"no {noun} {index} in this folder: it holds {held} (a link from an earlier run?)")
    return items[index]


def _summary(line: bytes) -> dict[str, Any] | str:
    """What the index needs of a record: the fields before ``cost_by_agent``, the ``info`` after
    the turns, and how many turns there are. Decoding only these is 3-10x faster than decoding
    the whole line (the turns' text is most of its bytes). ``EpisodeRecord.to_dict`` writes the
    keys in this order, and a quote inside a string is escaped, so the markers cannot occur in
    the text; any other layout is decoded whole. For a line that is not a record: what is wrong."""
    text = line.decode("utf-8", errors="replace")
    head_end = text.find(AGENT_COSTS_MARK)
    turns_at = text.find(TURNS_MARK, max(head_end, 0))
    info_at = text.find(INFO_MARK, max(turns_at, 0))
    try:
        if min(head_end, turns_at, info_at) < 0:
            record = json.loads(text)
            turns = record.get("turns") if isinstance(record, dict) else None
            if not isinstance(turns, list):
                return "not an episode record (no list of turns)"
            record["turn_count"] = len(turns)
        else:
            record = json.loads(text[:head_end] + "}")
            record["info"], _ = _DECODER.raw_decode(text, info_at + len(INFO_MARK))
            record["turn_count"] = text.count(TURN_MARK, turns_at, info_at)
    except ValueError:
        return "not valid JSON (cut short by a crash?)"
    wrong = [w.removeprefix(".") for w in _wrong_fields(record, RECORD_SHAPE)]
    if not wrong:
        wrong = _wrong_fields(record["cost"], COST_SHAPE, "cost")
        path = (record["info"] or {}).get("path")
        if not isinstance(path, (str, _NONE)):
            wrong.append(f"info.path: expected str, got {type(path).__name__}")
    return "; ".join(wrong[:3]) if wrong else record


def _wrong_fields(data: Any, shape: dict[str, tuple[type, ...]], where: str = "") -> list[str]:
    """What is missing or of the wrong type in ``data`` against ``shape`` (key -> allowed types)."""
    if not isinstance(data, dict):
        return [f"{where or 'the line'}: expected an object, got {type(data).__name__}"]
    return [
        f"{where}.{key}: missing" if key not in data else
        f"{where}.{key}: expected {' or '.join('null' if t is _NONE else t.__name__ for t in kinds)}, "
        f"got {type(data[key]).__name__}"
        for key, kinds in shape.items()
        if key not in data or not isinstance(data[key], kinds)
    ]


def outcome(record: dict[str, Any], anchor_correct: dict[str, bool]) -> int:
    """The episode's outcome bits. Rescued: the anchor (or the first proposal) was wrong and the
    final answer is right; harmed: the reverse. Escalation and review records say so themselves
    (``rescue``/``harm``, ``correction``/``harmful_flip``); a dense debate is compared with the
    ``single`` run on the same problem, as its rescue and harm in the report are."""
    info = record.get("info") or {}
    bits = {True: RIGHT, False: WRONG}.get(record.get("correct"), 0)
    rescued = info.get("rescue", info.get("correction"))
    harmed = info.get("harm", info.get("harmful_flip"))
    if rescued is None and harmed is None and record.get("problem_id") in anchor_correct:
        before = anchor_correct[record["problem_id"]]
        rescued, harmed = (not before and bits == RIGHT), (before and bits == WRONG)
    return bits | (RESCUED if rescued else 0) | (HARMED if harmed else 0)


def _code_test_result(answer: str | None, problem: Problem) -> str:
    """How a stated program did on the problem's tests, read from its recorded output signature
    (``councilzoo.tasks.code``): the programs ran when the episode was played, not now."""
    if answer is None:
        return "no program"
    if answer.startswith(ERROR_PREFIX):
        status = answer[len(ERROR_PREFIX):].split(":")[0]
        return f"failed: {status}"
    if not answer.startswith(SIGNATURE_PREFIX):
        return "not run"
    n = len(problem.metadata.get("test_inputs") or ())
    if problem.answer is None:
        return f"ran on {n} test inputs (no reference to compare)"
    if answer == problem.answer:
        return f"passed: {n} of {n} outputs match the reference"
    return f"failed: outputs differ from the reference on {n} test inputs"


def _curves(rows: list[dict[str, Any]]) -> dict[str, list[list[float]]]:
    """Each numeric metric as [step, value] pairs (rows without a step are numbered from 1)."""
    curves: dict[str, list[list[float]]] = {}
    for number, row in enumerate(rows, start=1):
        step = row.get("step", number)
        for key, value in row.items():
            if key != "step" and isinstance(value, (int, float)) and not isinstance(value, bool):
                curves.setdefault(key, []).append([step, value])
    return curves


def _policies(rows: list[dict[str, Any]]) -> dict[str, dict[str, list[list[float]]]]:
    """TRACER's speak probability (average strategy) per role and information state over steps."""
    policies: dict[str, dict[str, list[list[float]]]] = {}
    for key, points in _curves(rows).items():
        parts = key.split("/")
        if len(parts) == 4 and parts[0] == "regret" and parts[3] == POLICY_KEY:
            policies.setdefault(parts[1], {})[parts[2]] = points
    return policies


def _intern(key: str, keys: list[str], index: dict[str, int]) -> int:
    """``key``'s position in ``keys``, appended on first sight."""
    if key not in index:
        index[key] = len(keys)
        keys.append(key)
    return index[key]


def _short(answer: Any, limit: int = 40) -> str | None:
    """A final answer as the list shows it (programs and signatures are cut)."""
    if answer is None:
        return None
    text = " ".join(str(answer).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
