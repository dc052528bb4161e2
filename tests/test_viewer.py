"""``councilzoo view``: the folder index against the reports it came with, the server, and the page
as a user sees it in headless Chromium (tests marked ``browser``; skipped when it is absent)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from councilzoo.cli import main as cli_main
from councilzoo.evaluation.report import table_cells
from councilzoo.viewer import OutputFolder, ViewerServer
from councilzoo.viewer.browser import CHROMIUM, launch_chromium
from councilzoo.viewer.folder import HARMED, RESCUED, RIGHT

REPO = Path(__file__).resolve().parents[1]
AGENTS = str(REPO / "configs" / "demo_agents.yaml")


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    """One folder holding two evaluations (problems with images; code problems) and a TRACER run."""
    root = tmp_path_factory.mktemp("viewer_runs")
    evals = [("visual", "single,debate,always_verify", "16"), ("code", "single,debate", "6")]
    for kind, protocols, limit in evals:
        args = ["eval", "--protocol", protocols, "--agents", AGENTS, "--dataset", f"synthetic:{kind}",
                "--limit", limit, "--out", str(root / kind)]
        assert cli_main(args) == 0
    settings = ["max_steps=4", "problems_per_step=16", "data.eval_limit=16", "baselines=[]"]
    config = str(REPO / "configs" / "tracer_cpu_simulated.yaml")
    tracer = ["train", "tracer", config, "--out", str(root / "tracer")]
    tracer += [arg for setting in settings for arg in ("--set", setting)]
    assert cli_main(tracer) == 0
    return root


@pytest.fixture(scope="module")
def folder(runs) -> OutputFolder:
    return OutputFolder(runs)


@pytest.fixture(scope="module")
def server(folder):
    server = ViewerServer(folder, port=0).start()
    yield server
    server.shutdown()
    server.server_close()


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _count(folder: OutputFolder, run_name: str, bit: int) -> int:
    run = folder.run_names.index(run_name)
    rows = zip(folder.rows["run"], folder.rows["outcome"], strict=True)
    return sum(1 for r, outcome in rows if r == run and outcome & bit)


# -- the index ---------------------------------------------------------------------------------


def test_the_index_finds_every_run_and_agrees_with_the_reports(runs, folder):
    assert [folder.relative(s.path) for s in folder.evals] == ["code", "visual"]
    assert [(folder.relative(t.path), t.kind) for t in folder.trainings] == [("tracer", "tracer")]
    lines = sum(len(p.read_text().splitlines()) for p in runs.glob("*/episodes/*.jsonl"))
    assert len(folder.locations) == lines
    report = json.loads((runs / "visual" / "report.json").read_text())["protocols"]
    for protocol in ("single", "debate", "always_verify"):  # dense debate's from the single run
        counts = report[protocol]["counts"]
        assert _count(folder, f"visual/{protocol}", RIGHT) == counts["accuracy"]
        assert _count(folder, f"visual/{protocol}", RESCUED) == counts["rescue"]
        assert _count(folder, f"visual/{protocol}", HARMED) == counts["harm"]
    assert _count(folder, "visual/debate", RESCUED) + _count(folder, "visual/debate", HARMED) > 0


def test_an_episode_comes_back_whole_with_its_problem_and_graded_turns(runs, folder):
    index = folder.run_names.index("visual/single")
    i = folder.rows["run"].index(index)
    episode = folder.episode(i)
    record = _records(runs / "visual" / "episodes" / "single.jsonl")[0]
    assert episode["problem_id"] == record["problem_id"] and len(episode["turns"]) == len(record["turns"])
    assert episode["problem"]["question"] and episode["problem"]["answer"] is not None
    anchor = episode["turns"][0]
    assert anchor["correct"] == record["info"]["anchor_correct"]
    image = folder.image_file(i, 0)
    assert image.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_code_turns_show_their_program_and_how_its_tests_went(runs, folder):
    run = folder.run_names.index("code/single")
    for i in [k for k, r in enumerate(folder.rows["run"]) if r == run]:
        episode = folder.episode(i)
        anchor = episode["turns"][0]
        assert anchor["program"].startswith("def ")
        assert anchor["test"].startswith("passed") == bool(episode["correct"])


# -- the command and the server ----------------------------------------------------------------


def test_view_refuses_a_missing_or_unrelated_folder_in_one_line(tmp_path, capsys):
    assert cli_main(["view", str(tmp_path / "nope")]) == 2
    assert cli_main(["view", str(tmp_path)]) == 2
    errors = capsys.readouterr().err.strip().splitlines()
    assert len(errors) == 2 and "no such folder" in errors[0] and "no report.md, episodes/" in errors[1]


@pytest.mark.parametrize(
    ("report", "why"),
    [
        ('{"protocols": {"single": {"accura', "not valid JSON"),  # cut short by a full disk
        ("[1, 2]", "it is not a JSON object"),
        ('{"protocols": [1, 2]}', "'protocols' is not a mapping"),
        ('{"protocols": {"single": 5}}', "protocol 'single' is not a row"),
        ('{"protocols": {}, "frontier": [1]}', "'frontier' is not a mapping"),
    ],
)
def test_view_refuses_a_malformed_report_in_one_line(runs, tmp_path, capsys, report, why):
    """A report.json that is not eval's (it once crashed the index with an AttributeError)."""
    folder = tmp_path / "visual"
    folder.mkdir()
    (folder / "episodes").mkdir()
    episodes = (runs / "visual" / "episodes" / "single.jsonl").read_bytes()
    (folder / "episodes" / "single.jsonl").write_bytes(episodes)
    (folder / "report.json").write_text(report)
    assert cli_main(["view", str(folder), "--port", "0"]) == 2
    [error] = capsys.readouterr().err.strip().splitlines()
    assert error.startswith(f"councilzoo view: error: {folder / 'report.json'}: ") and why in error


def _status_and_json(url: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_an_episode_or_run_the_folder_does_not_hold_is_404_with_a_message(server, folder):
    n, runs = len(folder.locations), len(folder.trainings)
    assert _status_and_json(server.url + f"api/episode/{n - 1}")[0] == 200
    for route, message in [
        (f"api/episode/{n}", f"no episode {n} in this folder: it holds episodes 0 to {n - 1}"),
        ("api/episode/-1", "no episode -1 in this folder"),  # once served the last episode
        (f"api/training/{runs}", f"no training run {runs} in this folder"),
        ("api/image/999999/0", "no episode 999999"),
        ("api/episode/abc", "api/episode/abc: not found in this folder"),
    ]:
        status, body = _status_and_json(server.url + route)
        assert status == 404 and message in body["error"], (route, body)


def test_the_command_serves_the_folder(runs):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-m", "councilzoo.cli", "view", str(runs), "--port", "0"]
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env) as process:
        try:
            process.stdout.readline()
            url = process.stdout.readline().split()[1]
            index = json.loads(urllib.request.urlopen(url + "api/index", timeout=30).read())
        finally:
            process.terminate()
    assert sorted(e["path"] for e in index["evals"]) == ["code", "visual"]


def test_the_server_sends_files_inside_the_folder_only(runs, server):
    report = urllib.request.urlopen(server.url + "files/visual/report.md", timeout=10).read().decode()
    assert report.startswith("#")
    (runs.parent / "beside.md").write_text("# not in the folder")
    for outside in ("files/../beside.md", "files/%2e%2e/beside.md", "files/visual/episodes/single.jsonl",
                    "static/../folder.py"):
        with pytest.raises(urllib.error.HTTPError, match="404"):
            urllib.request.urlopen(server.url + outside, timeout=10)


# -- the page in a real browser ----------------------------------------------------------------


@pytest.fixture(scope="module")
def page():
    sync_api = pytest.importorskip("playwright.sync_api", reason="the viewer's browser tests need playwright")
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"no Chromium at {CHROMIUM} (make browser installs it)")
    with sync_api.sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        errors = []
        page.on("pageerror", lambda error: errors.append(error))
        yield page
        browser.close()
    assert not errors, errors


def _open(page, server, view: str):
    """Load the page afresh at ``view``: a new document has no view until the app draws this one
    (a goto that changes only the hash would keep the last test's view until hashchange fires)."""
    page.goto("about:blank")
    page.goto(server.url + view)
    page.wait_for_selector("#view[data-view]")


def _redrawn(page, action) -> None:
    """Do ``action`` (one that changes the route), then wait until the view is drawn again: the app
    draws on hashchange, a task after the hash is set, so the old view is still there at first."""
    old = page.query_selector("#view > *")
    action()
    page.wait_for_function("old => !old.isConnected", arg=old)


@pytest.mark.browser
def test_the_protocols_table_and_frontier_show_the_report(page, server, runs):
    _open(page, server, "")
    report = json.loads((runs / "visual" / "report.json").read_text())["protocols"]
    section = page.locator("section[data-section='visual']")
    for protocol, row in report.items():
        cells = section.locator(f"tr[data-protocol='{protocol}'] td").all_inner_texts()
        assert cells[0] == protocol and float(cells[1]) == pytest.approx(row["accuracy"], abs=5e-4)
        assert cells[-1] == str(row["n"])  # its episodes
    debate = section.locator("tr[data-protocol='debate'] td").all_inner_texts()
    section.locator("circle.point[data-label='debate']").hover()
    assert page.inner_text("#tooltip").splitlines()[:2] == ["debate", f"accuracy {debate[1]} {debate[2]}"]
    _redrawn(page, section.locator("circle.point[data-label='debate']").click)
    assert set(page.locator("table.episodes tbody td:first-child").all_inner_texts()) == {"visual/debate"}


@pytest.mark.browser
def test_an_episode_reads_as_a_conversation_turn_by_turn(page, server, runs, folder):
    i = folder.rows["run"].index(folder.run_names.index("visual/debate"))
    _open(page, server, f"#episodes?open={i}")
    page.wait_for_selector(".conversation .turn")
    record = _records(runs / "visual" / "episodes" / "debate.jsonl")[0]
    heads = page.locator(".conversation .turn-head b").all_inner_texts()
    assert heads == [t["agent"] for t in record["turns"]]
    assert page.locator(".conversation .turn .chip.right, .conversation .turn .chip.wrong").count() >= 1
    # the image loads after the turns are drawn: wait for it, then check that it decoded
    page.wait_for_function("document.querySelector('.problem img')?.complete")
    assert page.evaluate("document.querySelector('.problem img').naturalWidth") > 0


@pytest.mark.browser
def test_filters_narrow_the_list(page, server, folder):
    _open(page, server, "#episodes")
    total = len(folder.locations)
    assert page.inner_text("#match-count") == f"{total:,} of {total:,} episodes"
    _redrawn(page, lambda: page.select_option("#f-run", label="visual/debate"))
    _redrawn(page, lambda: page.select_option("#f-outcome", "harmed"))  # the redrawn select keeps the run
    harmed = _count(folder, "visual/debate", HARMED)
    assert page.inner_text("#match-count").startswith(f"{harmed} of")
    badges = page.locator("table.episodes tbody tr").evaluate_all("rows => rows.map(r => r.innerText)")
    assert len(badges) == harmed and all("harmed" in row for row in badges)
    page.fill("#f-problem", "visual-s0-0000")
    _redrawn(page, lambda: page.press("#f-problem", "Enter"))
    assert "problem=" in page.evaluate("location.hash")
    problems = page.locator("table.episodes tbody td:nth-child(2)").all_inner_texts()
    assert problems and all(p.startswith("visual-s0-0000") for p in problems)


@pytest.mark.browser
def test_one_problem_side_by_side_across_protocols(page, server, folder):
    _open(page, server, "#problem?id=visual-s0-00003")
    page.wait_for_selector(".side-by-side .column")
    problem = folder.problem_ids.index("visual-s0-00003")
    rows = zip(folder.rows["run"], folder.rows["problem"], strict=True)
    played = {folder.run_names[r] for r, p in rows if p == problem}
    page.wait_for_function(f"document.querySelectorAll('.side-by-side .column').length === {len(played)}")
    titles = page.locator(".side-by-side .episode-head a").all_inner_texts()
    assert set(titles) == played


@pytest.mark.browser
def test_a_stale_link_shows_what_is_missing_instead_of_loading_forever(page, server, folder):
    n = len(folder.locations)
    _open(page, server, f"#episodes?open={n + 5}")
    page.wait_for_selector(".detail .error")
    assert page.inner_text(".detail .error").startswith(f"no episode {n + 5} in this folder")
    assert not page.query_selector(".detail .loading")
    _open(page, server, "#problem?id=visual-s9-99999")
    assert page.inner_text("#view .error").startswith('No problem "visual-s9-99999" in this folder')
    _open(page, server, f"#training?run={len(folder.trainings)}")
    assert page.inner_text("#view .error").startswith(f"No training run {len(folder.trainings)}")


@pytest.mark.browser
def test_tracer_training_curves_and_controller_policies(page, server, folder):
    _open(page, server, "#training")
    page.wait_for_selector(".chart-box svg path.line", state="attached")
    policies = folder.training(0)["policies"]
    for role, states in policies.items():
        chart = page.locator(".chart-box", has=page.locator("h3", has_text=f"{role}:"))
        assert chart.locator("path.line").count() == len(states)
        assert set(chart.locator(".legend span").all_inner_texts()) == set(states)
    box = page.locator(".chart-box[data-metric='accuracy (training problems)'] rect.overlay").bounding_box()
    page.mouse.move(box["x"] + box["width"] - 2, box["y"] + box["height"] / 2)
    assert page.inner_text("#tooltip").startswith("step 4")


@pytest.mark.browser
def test_cohort_curves_and_reports_of_a_repro_folder(page, quick_repro):
    server = ViewerServer(OutputFolder(quick_repro), port=0).start()
    try:
        page.goto(server.url + "#training")
        # attached, not visible: a constant curve is a flat path whose box has no height
        page.wait_for_selector(".chart-box[data-metric='reward'] path.line", state="attached")
        first_run = sorted((quick_repro / "corl" / "runs").iterdir())[0]
        members = {p.name for p in (first_run / "members").iterdir()}
        reward = page.locator(".chart-box[data-metric='reward']")
        assert set(reward.locator(".legend span").all_inner_texts()) == members
        diversity = ("distinct answers per group", "answer entropy per group (nats)")
        for metric in ("label accuracy (label vs gold)", "held-out accuracy", "loss", *diversity):
            assert page.locator(f".chart-box[data-metric='{metric}'] path.line").count() >= 1
        page.goto(server.url + "#reports")
        page.wait_for_selector(".markdown h1")
        assert page.inner_text(".markdown h1").startswith("Claim")
        page.wait_for_function("[...document.querySelectorAll('.markdown img')].every(i => i.complete)")
        assert page.evaluate("[...document.querySelectorAll('.markdown img')].every(i => i.naturalWidth > 0)")
    finally:
        server.shutdown()
        server.server_close()


# -- a folder someone sent you ----------------------------------------------------------------


@pytest.fixture(scope="module")
def small_eval(tmp_path_factory) -> Path:
    """One protocol on six problems with images: seconds, for the tests that tamper with it."""
    out = tmp_path_factory.mktemp("viewer_small") / "visual"
    args = ["eval", "--protocol", "single", "--agents", AGENTS, "--dataset", "synthetic:visual",
            "--limit", "6", "--out", str(out)]
    assert cli_main(args) == 0
    return out


@pytest.fixture(scope="module")
def small_server(small_eval):
    server = ViewerServer(OutputFolder(small_eval), port=0).start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture()
def sent(small_eval, tmp_path) -> Path:
    """A copy of a small evaluation, to be tampered with as a folder someone sent might be."""
    copy = tmp_path / "sent"
    shutil.copytree(small_eval, copy)
    return copy


def _get(server, route: str, host: str | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(server.url + route, headers={"Host": host} if host else {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


def _rewrite(path: Path, edits: dict[int, Callable[[dict], object]]) -> None:
    """Apply ``edits`` (line number -> change of the parsed record) to a JSONL file."""
    lines = path.read_text().splitlines()
    for number, edit in edits.items():
        record = json.loads(lines[number - 1])
        edit(record)
        lines[number - 1] = json.dumps(record)
    path.write_text("\n".join(lines) + "\n")


def test_an_image_path_outside_the_folder_is_never_served(sent, tmp_path):
    secret = tmp_path / "secret.json"
    secret.write_text('{"token": "s3cret"}')
    log = sent / "episodes" / "single.jsonl"
    _rewrite(log, {1: lambda r: r.update(images=[str(secret), "../secret.json"])})
    server = ViewerServer(OutputFolder(sent), port=0).start()
    try:
        assert [_get(server, f"api/image/0/{k}")[0] for k in (0, 1)] == [404, 404]
        record = json.loads(log.read_text().splitlines()[1])  # an image inside the folder still comes
        picture = Path(record["images"][0])
        _rewrite(log, {1: lambda r: r.update(images=[str(picture)])})
        assert _get(server, "api/image/0/0") == (200, picture.read_bytes())
    finally:
        server.shutdown()
        server.server_close()


def test_only_requests_for_its_own_host_and_port_are_answered(small_server):
    port = small_server.server_address[1]
    for host in (f"localhost:{port}", f"127.0.0.1:{port}"):
        assert _get(small_server, "api/index", host)[0] == 200
    for host in (f"evil.example:{port}", "127.0.0.1", f"127.0.0.1:{port + 1}", f"rebind.example.com:{port}"):
        for route in ("api/index", "", "files/report.md"):  # DNS rebinding: the page's own origin
            status, body = _get(small_server, route, host)
            assert status == 421 and b'"episodes"' not in body and b"<script" not in body, (host, route)


def test_malformed_episode_lines_are_named_once_and_the_rest_shown(sent):
    log = sent / "episodes" / "single.jsonl"
    n = len(log.read_text().splitlines())
    _rewrite(log, {2: lambda r: r.update(correct="yes"), 3: lambda r: r.pop("problem_id"),
                   4: lambda r: r.update(cost="free"), 5: lambda r: r["info"].update(path=[1])})
    log.write_text(log.read_text() + '{"env_id": "councilzoo/escalation-v0", "problem_id": "vis')  # cut short
    folder = OutputFolder(sent)
    assert folder.skipped == [
        f"{log}, line 2: correct: expected bool or null, got str",
        f"{log}, line 3: problem_id: missing",
        f"{log}, line 4: cost: expected dict, got str",
        f"{log}, line 5: info.path: expected str, got list",
        f"{log}, line {n + 1}: not valid JSON (cut short by a crash?)",
    ]
    single = folder.run_names.index("single")
    assert folder.rows["run"].count(single) == n - 4
    assert folder.index()["skipped"] == folder.skipped


def test_an_episode_the_page_cannot_show_answers_with_its_file_and_line(sent):
    log = sent / "episodes" / "single.jsonl"
    _rewrite(log, {1: lambda r: r["turns"][0].update(answer=["a", "list"]), 2: lambda r: r.update(images=7)})
    server = ViewerServer(OutputFolder(sent), port=0).start()
    try:
        status, body = _get(server, "api/episode/0")
        assert status == 422 and json.loads(body)["error"] == f"{log}, line 1: not an episode the page can " \
            "show (turns[0].answer: expected str or null, got list)"
        assert _get(server, "api/episode/1")[0] == 200  # the server goes on; a bad images field shows none
        assert json.loads(_get(server, "api/episode/1")[1])["image_urls"] == []
    finally:
        server.shutdown()
        server.server_close()


def test_an_interrupted_empty_log_is_not_listed_as_a_run(sent):
    (sent / "episodes" / "comed.jsonl").write_text("")  # interrupted before its first episode
    (sent / "episodes" / "debate.jsonl").write_text("\n")
    folder = OutputFolder(sent)
    assert "comed" not in folder.run_names and "debate" not in folder.run_names and folder.skipped == []


@pytest.fixture()
def hostile(tmp_path) -> Path:
    """A folder whose report.md holds live HTML and a javascript: link."""
    (tmp_path / "hostile").mkdir()
    (tmp_path / "hostile" / "report.md").write_text(HOSTILE_REPORT)
    return tmp_path / "hostile"


def test_report_md_is_rendered_with_its_html_escaped(small_server, hostile):
    report = json.loads(_get(small_server, "api/report/0")[1])
    assert report["path"] == "." and report["html"].startswith("<h1>") and "<table>" in report["html"]
    html = OutputFolder(hostile).report(0)["html"]
    assert "<img" not in html and "<script" not in html and "&lt;img src=x onerror" in html
    assert "<a " not in html and "<table>" in html  # no link to javascript:, the table still a table


HOSTILE_REPORT = """# Claim

<img src=x onerror="window.pwned = 1">

<script>window.pwned = 2</script>

[x](javascript:window.pwned=3)

| a | b |
|---|---|
| 1 | 2 |
"""


@pytest.mark.browser
def test_the_page_rounds_numbers_as_report_md_does(page, server, runs):
    _open(page, server, "")
    report = json.loads((runs / "visual" / "report.json").read_text())["protocols"]
    section = page.locator("section[data-section='visual']")
    for protocol, row in report.items():
        cells = section.locator(f"tr[data-protocol='{protocol}'] td").all_inner_texts()
        accuracy, ci, calls, tokens, anchor, rescue, harm, net, escalation = table_cells(row)
        assert cells[1:10] == [accuracy, ci, calls, f"{int(tokens):,}", anchor, rescue, harm, net, escalation]
    values = [1 / 16, 3 / 16, 0.125, 0.375, 2.5, -0.0625, 1 / 3, 0.1, 0.0005, 0.9995]
    for digits in (0, 2, 3):
        page_says = page.evaluate(f"{values}.map((v) => fmt(v, {digits}))")
        assert page_says == [f"{v:.{digits}f}" for v in values], digits


@pytest.mark.browser
def test_the_final_answer_column_is_in_view_at_1400_px(page, server):
    _open(page, server, "#episodes")
    page.wait_for_selector("table.episodes tbody td.answer")
    right_edge = page.evaluate("document.querySelector('.list').getBoundingClientRect().right")
    answers = page.locator("table.episodes tbody td.answer").evaluate_all(
        "cells => cells.map(c => c.getBoundingClientRect().right)")
    assert answers and max(answers) <= right_edge + 0.5


@pytest.mark.browser
def test_a_hostile_report_runs_nothing_in_the_page(page, hostile):
    server = ViewerServer(OutputFolder(hostile), port=0).start()
    try:
        page.goto(server.url + "#reports")
        page.wait_for_selector(".markdown h1")
        assert page.evaluate("window.pwned") is None
        assert '<img src=x onerror="window.pwned = 1">' in page.inner_text(".markdown")
        assert page.locator(".markdown img, .markdown script, .markdown a").count() == 0
    finally:
        server.shutdown()
        server.server_close()
