"""What a graded program can reach outside its own folder, on a kernel with every layer and on one
without some: the metadata of the user's files (extended attributes, timestamps, ``stat``), objects
jobs share, and, where a layer is missing, the refusal and the opt-in that accepts weaker isolation.

A missing layer is made missing the way a kernel or container makes it: a seccomp filter,
installed in a separate Python process before the pool starts and inherited by its workers, makes
``landlock_create_ruleset`` return ENOSYS (a kernel without Landlock) or ``unshare`` return EPERM
(Docker's default profile), so the sandbox's own probes find the layer absent.
"""

from __future__ import annotations

import ast
import errno
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from councilzoo.sandbox import Job, Limits, Sandbox

LIMITS = Limits(timeout_s=5.0, memory_mb=512)
REPO = Path(__file__).resolve().parents[1]
NOTE = "user.councilzoo-note"
METADATA_ATTACK = """
import os
def attack(path):
    done = []
    for name, call in (("xattr", lambda: os.setxattr(path, "user.mark", b"job")),
                       ("utime", lambda: os.utime(path, (0, 0)))):
        try:
            call()
            done.append(name)
        except OSError:
            pass
    return done
"""
STAT_PROBE = """
import os
def probe(path):
    try:
        return os.stat(path).st_size
    except OSError as err:
        return type(err).__name__
"""
FOLDERS_ABOVE = f"""
import os, tempfile
def folders_above():  # its own folder is its own
    folder, found = os.path.dirname(os.getcwd()), {{tempfile.gettempdir(), "/"}} - {{os.getcwd()}}
    while folder != "/":
        found.add(folder)
        folder = os.path.dirname(folder)
    return sorted(found)
def mark():
    marked = 0
    for folder in folders_above():
        try:
            os.setxattr(folder, "{NOTE}", b"from an earlier job")
            marked += 1
        except OSError:
            pass
    return marked
def read():
    found = 0
    for folder in folders_above():
        try:
            found += os.getxattr(folder, "{NOTE}") == b"from an earlier job"
        except OSError:
            pass
    return found
"""


def output(result) -> object:
    assert result.ok, result.error
    return ast.literal_eval(result.outputs[0])


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(workers=2, limits=LIMITS) as box:
        yield box


def test_the_users_files_keep_their_extended_attributes_and_timestamps(sandbox, tmp_path):
    user_file = tmp_path / "notes.txt"
    user_file.write_text("mine")
    before = user_file.stat().st_mtime_ns
    (result,) = sandbox.run([Job(METADATA_ATTACK, "call", "attack", (repr((str(user_file),)),))])
    assert output(result) == []
    assert os.listxattr(user_file) == [] and user_file.stat().st_mtime_ns == before


def test_stat_outside_the_folder_tells_nothing_of_existence_or_size(sandbox, tmp_path):
    hidden = tmp_path / "hidden_tests.json"
    hidden.write_text("x" * 1234)
    paths = [hidden, tmp_path / "absent.json", Path.home() / ".cache"]
    results = sandbox.run([Job(STAT_PROBE, "call", "probe", (repr((str(p),)),)) for p in paths])
    assert [output(r) for r in results] == ["FileNotFoundError"] * len(paths)


@pytest.fixture
def notes_cleanup():
    """Removes the note from the host's folders where an earlier sandbox let a program set it."""
    yield
    for folder in ("/", tempfile.gettempdir()):
        try:
            os.removexattr(folder, NOTE)
        except OSError as err:
            assert err.errno in (errno.ENODATA, errno.ENOTSUP, errno.EPERM)


def test_no_job_leaves_data_for_a_later_job_on_another_worker(notes_cleanup):
    """An extended attribute on a folder above the pool (the pool's own, $TMPDIR, /) was a channel
    from one job to later jobs on other workers."""
    with Sandbox(workers=2, limits=LIMITS) as box:
        (marked,) = box.run([Job(FOLDERS_ABOVE, "call", "mark", ("()",))])
        reads = box.run([Job(FOLDERS_ABOVE, "call", "read", ("()",)) for _ in range(2)])  # both workers
    assert output(marked) == 0
    assert [output(r) for r in reads] == [0, 0]


# --- without a layer: the refusal, and what the opt-in still contains ----------------------------

RUN_WITHOUT = """
import json, sys
import pyseccomp as seccomp
deny = json.loads(sys.argv[1])
filt = seccomp.SyscallFilter(seccomp.ALLOW)
for name, code in deny.items():
    filt.add_rule(seccomp.ERRNO(code), name)
filt.load()
"""
WITHOUT_LANDLOCK = {"landlock_create_ruleset": errno.ENOSYS}
WITHOUT_NAMESPACES = {"unshare": errno.EPERM}


def run_without(deny: dict[str, int], scenario: str, tmp_path: Path, *args: str, accept_weaker: bool) -> dict:
    """Run ``scenario`` (it prints one JSON line last) with ``args`` in a Python process whose
    kernel calls in ``deny`` fail, as on a kernel or in a container without them."""
    environment = {**os.environ, "PYTHONPATH": str(REPO), "TMPDIR": str(tmp_path)}
    environment["COUNCILZOO_SANDBOX_ACCEPT_WEAKER"] = "1" if accept_weaker else ""
    code = RUN_WITHOUT + textwrap.dedent(scenario)
    done = subprocess.run(
        [sys.executable, "-c", code, json.dumps(deny), *args], capture_output=True, text=True,
        env=environment, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2_000:]
    return json.loads(done.stdout.splitlines()[-1])


REFUSAL = """
from councilzoo.sandbox import Job, Sandbox, SandboxRefused
try:
    Sandbox(workers=1).run([Job("def f():\\n    return 1\\n", "call", "f", ("()",))])
    print(json.dumps({"refused": None}))
except SandboxRefused as err:
    print(json.dumps({"refused": str(err)}))
"""


@pytest.mark.parametrize(
    ("deny", "layers"),
    [(WITHOUT_LANDLOCK, ["landlock"]), (WITHOUT_NAMESPACES, ["network_namespace", "minimal_root"])],
    ids=["without Landlock", "without namespaces"],
)
def test_a_missing_layer_is_refused_in_one_line_naming_it_and_the_opt_in(tmp_path, deny, layers):
    refused = run_without(deny, REFUSAL, tmp_path, accept_weaker=False)["refused"]
    assert refused is not None and "\n" not in refused
    assert all(layer in refused for layer in layers)
    assert "COUNCILZOO_SANDBOX_ACCEPT_WEAKER=1" in refused and "accept_weaker_isolation=True" in refused


WITHOUT_NAMESPACES_OPTED_IN = """
from councilzoo.config import run_metadata
from councilzoo.sandbox import Job, Sandbox
add = "def add(a, b):\\n    return a + b\\n"
with Sandbox(workers=1) as box:
    (graded,) = box.run([Job(add, "call", "add", ("(2, 3)",))])
    isolation = box.isolation
    (metadata,) = box.run([Job(sys.argv[2], "call", "attack", (repr((sys.argv[3],)),))])
print(json.dumps({"graded": graded.outputs, "isolation": isolation, "metadata": metadata.outputs,
                  "recorded": run_metadata()["sandbox"]}))
"""


def test_without_namespaces_the_opt_in_grades_records_the_choice_and_refuses_metadata_calls(tmp_path):
    """Without a minimal root, seccomp refuses the extended-attribute and timestamp calls."""
    user_file = tmp_path / "notes.txt"
    user_file.write_text("mine")
    before = user_file.stat().st_mtime_ns
    seen = run_without(
        WITHOUT_NAMESPACES, WITHOUT_NAMESPACES_OPTED_IN, tmp_path, METADATA_ATTACK, str(user_file),
        accept_weaker=True,
    )  # fmt: skip
    assert seen["graded"] == ["5"]
    assert not seen["isolation"]["minimal_root"] and seen["isolation"]["landlock"]
    assert seen["recorded"] == {"accept_weaker_isolation": True}
    assert seen["metadata"] == ["[]"]
    assert os.listxattr(user_file) == [] and user_file.stat().st_mtime_ns == before


READ = """
def read(path):
    try:
        return open(path).read()
    except OSError as err:
        return type(err).__name__
"""
WRITE = """
def write(path):
    try:
        open(path, "w").write("overwritten")
    except OSError as err:
        return type(err).__name__
"""
COPY = """
import os
def copy(pool):
    needle = "ANSWER-" + "7f3a"
    for folder, _, files in os.walk(pool):
        for name in files:
            try:
                with open(os.path.join(folder, name), errors="replace") as handle:
                    if needle in handle.read(65_536):
                        return "copied"
            except OSError:
                pass
    return "nothing"
"""
LINK = """
import glob, os
def link(pool):
    for path in glob.glob(os.path.join(pool, "*", "*", "std*")):
        try:
            os.unlink(path)
            os.symlink("/dev/null", path)
        except OSError:
            pass
"""
STDIN_ADD = "import sys\na, b = map(int, sys.stdin.read().split())\nprint(a + b)\n"
WITHOUT_LANDLOCK_OPTED_IN = """
from councilzoo.sandbox import Job, Sandbox
cache, user, programs = sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
with Sandbox(workers=2) as box:
    isolation, pool = box.isolation, box._root
    read, write = box.run([
        Job(programs["read"], "call", "read", (repr((cache,)),)),
        Job(programs["write"], "call", "write", (repr((user,)),)),
    ])
    box.run([Job("print('ANSWER-' + '7f3a')", "stdin", None, ("",))])  # on one worker, then
    (copied,) = box.run([Job(programs["copy"], "call", "copy", (repr((pool,)),))])  # on the other
    box.run([Job(programs["link"], "call", "link", (repr((pool,)),))])
    later = box.run([Job(programs["add"], "stdin", None, ("2 3",)) for _ in range(4)])
print(json.dumps({"isolation": isolation, "read": read.outputs, "write": write.outputs,
                  "copy": copied.outputs, "later": [r.outputs for r in later]}))
"""


@pytest.fixture(scope="module")
def without_landlock(tmp_path_factory) -> dict:
    """The attacks that Landlock alone stopped before, run opted in on a kernel without it."""
    tmp_path = tmp_path_factory.mktemp("without-landlock")
    cache = tmp_path / "datasets-cache" / "hidden_answers.json"
    cache.parent.mkdir()
    cache.write_text('{"answer": "SECRET-ANSWER"}')
    user = tmp_path / "user_code.py"
    user.write_text("print('mine')\n")
    programs = json.dumps({"read": READ, "write": WRITE, "copy": COPY, "link": LINK, "add": STDIN_ADD})
    seen = run_without(
        WITHOUT_LANDLOCK, WITHOUT_LANDLOCK_OPTED_IN, tmp_path, str(cache), str(user), programs,
        accept_weaker=True,
    )  # fmt: skip
    return {**seen, "user_after": user.read_text()}


def test_without_landlock_the_isolation_says_so(without_landlock):
    assert not without_landlock["isolation"]["landlock"] and without_landlock["isolation"]["minimal_root"]


def test_without_landlock_a_program_cannot_read_the_hidden_answers_in_the_dataset_cache(without_landlock):
    assert without_landlock["read"] == ["'FileNotFoundError'"]


def test_without_landlock_a_program_cannot_overwrite_the_users_files(without_landlock):
    assert without_landlock["user_after"] == "print('mine')\n"
    assert without_landlock["write"] == ["'FileNotFoundError'"]


def test_without_landlock_a_program_cannot_copy_another_workers_printed_answer(without_landlock):
    assert without_landlock["copy"] == ["'nothing'"]


def test_without_landlock_no_program_can_turn_later_outputs_into_failures_with_a_link(without_landlock):
    assert without_landlock["later"] == [["5"]] * 4


def test_an_eval_report_shows_that_weaker_isolation_was_accepted(tmp_path, monkeypatch):
    from councilzoo.config import run_metadata
    from councilzoo.evaluation import report

    for accepted, out in ((False, tmp_path / "strict"), (True, tmp_path / "weaker")):
        monkeypatch.setenv("COUNCILZOO_SANDBOX_ACCEPT_WEAKER", "1" if accepted else "0")
        report.write([], out, run_metadata(0))
        shown = "weaker isolation accepted" in (out / "report.md").read_text()
        recorded = json.loads((out / "report.json").read_text())["run"]["sandbox"]
        assert shown == accepted and recorded == {"accept_weaker_isolation": accepted}
