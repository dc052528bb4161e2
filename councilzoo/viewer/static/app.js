// councilzoo view: the page. It loads the folder's index once (/api/index), then each
// conversation (/api/episode/<i>) and training run (/api/training/<i>) when it is opened.
// Views are addressed by the URL's hash (#episodes?run=3&outcome=rescued), so links and the
// back button work and any view can be bookmarked.
"use strict";

const OUTCOME = {right: 1, wrong: 2, rescued: 4, harmed: 8};
const PAGE_SIZE = 100;
const COHORT_CHARTS = [["reward", "reward"], ["label_accuracy", "label accuracy (label vs gold)"],
                       ["eval/accuracy", "held-out accuracy"], ["loss", "loss"], ["kl", "KL to the reference model"],
                       ["distinct_answers", "distinct answers per group"], ["answer_entropy", "answer entropy per group (nats)"]];
const MISSING = {"kl": "not logged in this run (TRL logs it when beta > 0)",
                 "eval/accuracy": "not logged in this run (the config's eval: section adds it)"};
const TRACER_CHARTS = [["train/accuracy", "accuracy (training problems)"], ["train/objective", "objective"],
                       ["train/calls_per_question", "model calls / question"],
                       ["max_regret_over_bound", "max regret / bound"]];
const POLICY_TITLE = {proposer: "proposer: P(REFRESH)", reviewer: "reviewer: P(SPEAK)"};
let INDEX = null;
const cache = new Map();

// -- small helpers ---------------------------------------------------------------------------

function h(tag, props, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props || {})) {
    if (value == null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat(Infinity)) {
    if (child != null && child !== false) node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

function getJSON(url) {
  if (!cache.has(url)) {
    cache.set(url, fetch(url).then(async (r) => {
      if (!r.ok) {  // the server says what is missing in {"error": ...}
        const body = await r.json().catch(() => ({}));
        throw new Error(body.error || `${url}: HTTP ${r.status}`);
      }
      return r.json();
    }));
  }
  return cache.get(url);
}

// Numbers as report.md writes them (Python's format): the exact binary value rounded to the
// nearest, a tie to the even digit. toFixed breaks a tie away from zero, so 1/16 = 0.0625 would
// read 0.063 here and 0.062 in the report.
function fixed(v, digits) {
  const x = Number(v);
  const exact = Math.abs(x).toFixed(100);  // every digit of a double's value this side of 1e-100
  const point = exact.indexOf(".");
  if (!/^50*$/.test(exact.slice(point + 1 + digits))) return x.toFixed(digits);
  const kept = exact.slice(0, point + 1 + digits).replace(/\.$/, "");
  return Number(kept.at(-1)) % 2 ? x.toFixed(digits) : (x < 0 ? "-" : "") + kept;
}

const fmt = (v, digits = 3) => (v == null ? "–" : fixed(v, digits));
const signed = (v) => (v == null ? "–" : (v >= 0 ? "+" : "") + fixed(v, 3));
const count = (n) => Number(n).toLocaleString("en");

function route() {
  const [name, query] = location.hash.slice(1).split("?");
  return {name: name || defaultView(), params: new URLSearchParams(query || "")};
}

function link(name, params) {
  const query = new URLSearchParams(Object.entries(params || {}).filter(([, v]) => v !== "" && v != null));
  return `#${name}${String(query) ? "?" + query : ""}`;
}

function go(name, params) { location.hash = link(name, params); }

function defaultView() {
  if (INDEX.evals.some((e) => e.protocols.length)) return "protocols";
  if (INDEX.episodes.run.length) return "episodes";
  if (INDEX.trainings.length) return "training";
  return "reports";
}

function outcomeBadges(bits) {
  const badges = [];
  if (bits & OUTCOME.right) badges.push(h("span", {class: "badge right"}, "right"));
  if (bits & OUTCOME.wrong) badges.push(h("span", {class: "badge wrong"}, "wrong"));
  if (bits & OUTCOME.rescued) badges.push(h("span", {class: "badge rescued"}, "rescued"));
  if (bits & OUTCOME.harmed) badges.push(h("span", {class: "badge harmed"}, "harmed"));
  if (!(bits & (OUTCOME.right | OUTCOME.wrong))) badges.push(h("span", {class: "badge"}, "ungraded"));
  return badges;
}

// -- protocols -------------------------------------------------------------------------------

function viewProtocols(view) {
  const sections = INDEX.evals.filter((e) => e.protocols.length);
  if (!sections.length) { view.append(h("p", {class: "empty"}, "No protocol report (report.json) in this folder.")); return; }
  for (const section of sections) {
    const runByName = Object.fromEntries(section.runs.map((r) => [INDEX.runs[r].split("/").pop(), r]));
    const meta = section.run;
    const where = section.path === "." ? "" : section.path + ": ";
    const about = [meta.dataset, meta.split, meta.n && `${meta.n} problems`, meta.seed != null && `seed ${meta.seed}`];
    const protocols = new Set(section.protocols.map((p) => p.protocol));
    const others = section.runs.filter((r) => !protocols.has(INDEX.runs[r].split("/").pop()));
    const auxiliary = others.filter((r) => /^(dev_|test_single_)/.test(INDEX.runs[r].split("/").pop()));
    const unreported = others.filter((r) => !auxiliary.includes(r));
    const runLinks = (runs) => runs.map((r) => [h("a", {href: link("episodes", {run: r})}, INDEX.runs[r].split("/").pop()), " "]);
    view.append(h("section", {"data-section": section.path},
      h("h2", {}, where + (about.filter(Boolean).join(" · ") || "protocols")),
      protocolTable(section, runByName), frontierChart(section, runByName),
      auxiliary.length ? h("p", {class: "others"}, "Auxiliary runs (the dev fits and single models): ", runLinks(auxiliary)) : null,
      unreported.length ? h("p", {class: "others unreported"},
        "Runs with no row in report.json (played after it was written, or interrupted): ", runLinks(unreported)) : null));
  }
}

function protocolTable(section, runByName) {
  const head = ["protocol", "accuracy", "95% CI", "calls/q", "tokens/q", "anchor acc", "rescue", "harm", "net",
                "escalation", "episodes"];
  const rows = section.protocols.map((p) => {
    const run = runByName[p.protocol];
    const open = run == null ? null : () => go("episodes", {run});
    return h("tr", {class: open ? "clickable" : "oracle", "data-protocol": p.protocol, onclick: open,
                    title: open ? "list its episodes" : "an oracle: read off the other runs, no episodes of its own"},
      h("td", {}, p.protocol + (p.oracle ? " (oracle)" : "")), h("td", {}, fmt(p.accuracy)),
      h("td", {}, `[${fmt(p.accuracy_ci[0])}, ${fmt(p.accuracy_ci[1])}]`), h("td", {}, fmt(p.calls, 2)),
      h("td", {}, count(fmt(p.tokens, 0))), h("td", {}, fmt(p.anchor_accuracy)), h("td", {}, fmt(p.rescue)),
      h("td", {}, fmt(p.harm)), h("td", {}, signed(p.net)), h("td", {}, fmt(p.escalation_rate, 2)),
      h("td", {}, run == null ? "–" : count(INDEX.episodes.run.filter((r) => r === run).length)));
  });
  return h("table", {class: "protocols"}, h("thead", {}, h("tr", {}, head.map((c) => h("th", {}, c)))),
    h("tbody", {}, rows));
}

function frontierChart(section, runByName) {
  const box = h("div", {class: "frontier-box"});
  const axes = {calls: "model calls / question", tokens: "decoded tokens / question"};
  const draw = (axis) => {
    box.querySelector(".chart").replaceChildren();
    box.querySelectorAll("button").forEach((b) => b.classList.toggle("on", b.dataset.axis === axis));
    const points = section.protocols.map((p) => {
      const run = runByName[p.protocol];
      return {
        label: p.protocol, x: p[axis], y: p.accuracy, hollow: p.oracle,
        tip: [p.protocol + (p.oracle ? " (oracle)" : ""), `accuracy ${fmt(p.accuracy)} [${fmt(p.accuracy_ci[0])}, ${fmt(p.accuracy_ci[1])}]`,
              `${fmt(p.calls, 2)} calls/q · ${count(fmt(p.tokens, 0))} tokens/q`,
              `rescue ${fmt(p.rescue)} · harm ${fmt(p.harm)}`],
        onClick: run == null ? null : () => go("episodes", {run}),
      };
    });
    Plot.scatter(box.querySelector(".chart"), {points, path: (section.frontier || {})[axis], xLabel: axes[axis],
                                               yLabel: "accuracy", width: 760, height: 340});
  };
  box.append(h("div", {class: "toolbar"}, "Accuracy-cost frontier (hollow: oracles; line: the non-oracle frontier) against ",
    Object.entries(axes).map(([axis, label]) => h("button", {"data-axis": axis, onclick: () => draw(axis)}, label))),
  h("div", {class: "chart"}));
  queueMicrotask(() => draw("calls"));
  return box;
}

// -- episodes --------------------------------------------------------------------------------

function matching(params) {
  const e = INDEX.episodes;
  const run = params.get("run"), outcome = OUTCOME[params.get("outcome")], path = params.get("path");
  const problem = (params.get("problem") || "").trim();
  const pathIndex = path === "none" ? null : INDEX.paths.indexOf(path);
  const problemOk = problem ? INDEX.problems.map((id) => id.includes(problem)) : null;
  const out = [];
  for (let i = 0; i < e.run.length; i++) {
    if (run && e.run[i] !== +run) continue;
    if (outcome && !(e.outcome[i] & outcome)) continue;
    if (path && e.path[i] !== pathIndex) continue;
    if (problemOk && !problemOk[e.problem[i]]) continue;
    out.push(i);
  }
  return out;
}

function select(id, label, options, value, onchange) {
  return h("label", {}, label, h("select", {id, onchange: (ev) => onchange(ev.target.value)},
    options.map(([v, text]) => h("option", {value: v, selected: String(v) === String(value ?? "")}, text))));
}

function viewEpisodes(view, params) {
  const state = Object.fromEntries(params);
  const update = (changes) => go("episodes", {...state, page: "", open: "", ...changes});
  const runOptions = [["", "all runs"], ...INDEX.runs.map((name, i) => [i, name])];
  const paths = [["", "any path"], ...INDEX.paths.map((p) => [p, p]), ["none", "(no escalation path)"]];
  const outcomes = [["", "any outcome"], ...Object.keys(OUTCOME).map((o) => [o, o])];
  const problem = h("input", {id: "f-problem", type: "search", placeholder: "problem id contains…", value: state.problem || "",
                              onchange: (ev) => update({problem: ev.target.value})});
  const found = matching(params);
  const pages = Math.max(1, Math.ceil(found.length / PAGE_SIZE));
  const page = Math.min(Math.max(1, +(state.page || 1)), pages);
  view.append(h("div", {class: "filters"},
    select("f-run", "protocol ", runOptions, state.run, (v) => update({run: v})),
    select("f-outcome", "outcome ", outcomes, state.outcome, (v) => update({outcome: v})),
    select("f-path", "escalation path ", paths, state.path, (v) => update({path: v})),
    h("label", {}, "problem ", problem),
    h("span", {id: "match-count"}, `${count(found.length)} of ${count(INDEX.episodes.run.length)} episodes`)));
  const pager = h("div", {class: "pager"},
    h("button", {disabled: page <= 1, onclick: () => go("episodes", {...state, page: page - 1})}, "‹ previous"),
    h("span", {}, ` page ${page} of ${pages} `),
    h("button", {disabled: page >= pages, onclick: () => go("episodes", {...state, page: page + 1})}, "next ›"));
  const e = INDEX.episodes;
  const rows = found.slice((page - 1) * PAGE_SIZE, page * PAGE_SIZE).map((i) =>
    h("tr", {class: String(i) === state.open ? "clickable open" : "clickable", "data-episode": i,
             onclick: () => go("episodes", {...state, page, open: i})},
      h("td", {}, INDEX.runs[e.run[i]]), h("td", {}, INDEX.problems[e.problem[i]]), h("td", {}, outcomeBadges(e.outcome[i])),
      h("td", {}, e.path[i] == null ? "–" : INDEX.paths[e.path[i]]), h("td", {class: "num"}, e.calls[i]),
      h("td", {class: "num"}, count(e.tokens[i])), h("td", {class: "num"}, e.turns[i]), h("td", {class: "answer"}, e.final[i] ?? "–")));
  const list = h("div", {class: "list"}, pager, h("table", {class: "episodes"},
    h("thead", {}, h("tr", {}, ["run", "problem", "outcome", "path", "calls", "tokens", "turns", "final answer"].map((c) => h("th", {}, c)))),
    h("tbody", {}, rows)));
  const detail = h("div", {class: "detail"});
  view.append(h("div", {class: "split"}, list, detail));
  if (state.open != null && state.open !== "") {
    detail.append(h("p", {class: "loading"}, "Loading the conversation…"));
    getJSON(`/api/episode/${state.open}`).then((ep) => detail.replaceChildren(conversation(ep, false)))
      .catch((err) => detail.replaceChildren(failure(err)));
  } else {
    detail.append(h("p", {class: "empty"}, "Click an episode to read its conversation."));
  }
}

// -- one conversation ------------------------------------------------------------------------

function richText(text) {
  // Fenced code blocks (``` and a language on their own line) as code, the rest as wrapped text.
  const out = [];
  let last = 0;
  for (const m of String(text).matchAll(/```[\w+-]*\n([\s\S]*?)```/g)) {
    out.push(h("span", {}, text.slice(last, m.index)), h("pre", {class: "code"}, m[1].replace(/\n$/, "")));
    last = m.index + m[0].length;
  }
  out.push(h("span", {}, String(text).slice(last)));
  return out;
}

const plural = (n, word) => `${count(n)} ${word}${n === 1 ? "" : "s"}`;

function problemBox(ep) {
  const p = ep.problem;
  const box = h("div", {class: "problem"});
  if (!p) {
    box.append(h("p", {class: "empty"}, `${ep.problem_id}: question not recorded (folders written before problems.jsonl).`));
  } else {
    box.append(h("div", {class: "question"}, richText(p.question)));
    if (p.choices && p.choices.length) {
      box.append(h("ol", {class: "choices", type: "A"}, p.choices.map((c) => h("li", {}, c))));
    }
  }
  if (ep.image_urls.length) box.append(h("div", {class: "images"}, ep.image_urls.map((src) => h("img", {src, alt: "problem image"}))));
  if (p && p.kind === "code") {
    const m = p.metadata || {};
    const tests = (m.test_inputs || []).map((input, k) => h("tr", {}, h("td", {}, input), h("td", {}, (m.expected_outputs || [])[k] ?? "")));
    if (tests.length) {
      box.append(h("details", {}, h("summary", {}, `${tests.length} test inputs`),
        h("table", {class: "tests"}, h("tr", {}, h("th", {}, "input"), h("th", {}, "expected output")), tests)));
    }
    if (m.solution) box.append(h("details", {}, h("summary", {}, "reference solution"), h("pre", {class: "code"}, m.solution)));
  } else if (p && p.answer != null) {
    box.append(h("div", {class: "gold"}, "gold answer: ", h("b", {}, p.answer)));
  }
  return box;
}

function turnCard(turn) {
  const cost = turn.cost || {};
  const head = h("div", {class: "turn-head"}, h("b", {}, turn.agent), ` · ${turn.role} · `, h("span", {class: "mode"}, turn.mode),
    turn.round != null ? ` · round ${turn.round}` : "");
  if (!turn.text) {
    return h("div", {class: `turn decision role-${turn.role}`}, head);
  }
  const chips = [];
  if (turn.answer != null && !turn.program) {
    const mark = turn.correct === true ? " ✓" : turn.correct === false ? " ✗" : "";
    chips.push(h("span", {class: `chip ${turn.correct === true ? "right" : turn.correct === false ? "wrong" : ""}`}, `answer: ${turn.answer}${mark}`));
  }
  if (turn.verdict != null) chips.push(h("span", {class: "chip"}, `verdict: ${turn.verdict}`));
  if (turn.test) chips.push(h("span", {class: `chip test ${turn.test.startsWith("passed") ? "right" : "wrong"}`}, `tests: ${turn.test}`));
  chips.push(h("span", {class: "chip cost"}, `${plural(cost.calls ?? 0, "call")} · ${plural(cost.completion_tokens ?? 0, "token")}`));
  if (turn.truncated) chips.push(h("span", {class: "chip wrong"}, "truncated"));
  const body = [h("div", {class: "text"}, richText(turn.text))];
  if (turn.program && !turn.text.includes("```")) body.push(h("div", {class: "program"}, "program:", h("pre", {class: "code"}, turn.program)));
  if (turn.samples && turn.samples.length > 1) {
    body.push(h("details", {}, h("summary", {}, `${turn.samples.length} samples`), turn.samples.map((s) => h("div", {class: "sample"}, richText(s)))));
  }
  return h("div", {class: `turn role-${turn.role}`}, head, body, h("div", {class: "chips"}, chips));
}

function conversation(ep, compact) {
  const info = ep.info || {};
  const title = compact
    ? h("a", {href: link("episodes", {run: INDEX.runs.indexOf(ep.run), open: ep.index}), title: "open in the episode list"}, ep.run)
    : [h("b", {}, ep.run), " · ", h("a", {href: link("problem", {id: ep.problem_id}), title: "this problem in every run"}, ep.problem_id)];
  const header = h("div", {class: "episode-head"}, h("div", {}, title),
    h("div", {}, outcomeBadges(ep.outcome), info.path ? h("span", {class: "badge path"}, info.path) : null,
      ` final: ${ep.final_answer ?? "–"} · ${plural(ep.cost.calls, "call")} · ${plural(ep.cost.completion_tokens, "token")}`));
  const turns = h("div", {class: "turns"}, ep.turns.map(turnCard));
  const details = h("details", {class: "info"}, h("summary", {}, "episode info"), h("pre", {}, JSON.stringify(info, null, 1)));
  return h("div", {class: "conversation", "data-episode": ep.index}, header, compact ? null : problemBox(ep), turns, details);
}

// -- one problem across runs -----------------------------------------------------------------

function failure(err) {
  return h("p", {class: "error"}, err.message);
}

function viewProblem(view, params) {
  const id = params.get("id");
  const p = INDEX.problems.indexOf(id);
  if (p < 0) {
    view.append(h("p", {class: "error"}, `No problem ${JSON.stringify(id)} in this folder: it holds ` +
      `${plural(INDEX.problems.length, "problem")} (a link from an earlier run?)`));
    return;
  }
  const e = INDEX.episodes;
  const episodes = [];
  for (let i = 0; i < e.run.length; i++) if (e.problem[i] === p) episodes.push(i);
  view.append(h("h2", {}, `Problem ${id}: ${episodes.length} episodes`));
  if (!episodes.length) return;
  const columns = h("div", {class: "side-by-side"});
  const top = h("div");
  view.append(top, columns);
  Promise.all(episodes.map((i) => getJSON(`/api/episode/${i}`))).then((eps) => {
    top.append(problemBox(eps[0]));
    for (const ep of eps) columns.append(h("div", {class: "column"}, conversation(ep, true)));
  }).catch((err) => top.append(failure(err)));
}

// -- training --------------------------------------------------------------------------------

function lineChart(title, series, yDomain, missing) {
  const box = h("div", {class: "chart-box", "data-metric": title}, h("h3", {}, title));
  if (!series.length) {
    box.append(h("p", {class: "empty"}, missing || "not logged in this run"));
  } else {
    Plot.lines(box, {series, xLabel: "step", yLabel: "", yDomain, width: 420, height: 230});
  }
  return box;
}

function memberSeries(data, key) {
  return Object.entries(data.members).filter(([, curves]) => curves[key])
    .map(([name, curves]) => ({name, points: curves[key]}));
}

function viewTraining(view, params) {
  if (!INDEX.trainings.length) { view.append(h("p", {class: "empty"}, "No training run in this folder.")); return; }
  const index = +(params.get("run") || 0);
  const run = INDEX.trainings[index];
  if (!run) {
    view.append(h("p", {class: "error"}, `No training run ${params.get("run")} in this folder: it holds ` +
      `${plural(INDEX.trainings.length, "training run")} (a link from an earlier run?)`));
    return;
  }
  view.append(h("div", {class: "filters"}, select("f-training", "training run ",
    INDEX.trainings.map((t, i) => [i, `${t.path === "." ? INDEX.title : t.path} (${t.kind === "tracer" ? "TRACER" : t.members.length + " members"})`]),
    index, (v) => go("training", {run: v}))));
  getJSON(`/api/training/${index}`).then((data) => {
    const keys = [...new Set(Object.values(data.members).flatMap((c) => Object.keys(c)))].sort();
    if (run.kind === "tracer") {  // the controllers' policies first: what TRACER learns
      view.append(h("h2", {}, "Controller policies: speak probability per information state (average strategy)"));
      const policies = h("div", {class: "charts"});
      view.append(policies);
      for (const [role, states] of Object.entries(data.policies)) {
        const series = Object.entries(states).map(([state, points]) => ({name: state, points}));
        policies.append(lineChart(POLICY_TITLE[role] || role, series, [0, 1]));
      }
      view.append(h("h2", {}, "Training metrics"));
    }
    const charts = h("div", {class: "charts"});
    view.append(charts);
    const shown = run.kind === "tracer" ? TRACER_CHARTS : COHORT_CHARTS;
    for (const [key, title] of shown) charts.append(lineChart(title, memberSeries(data, key), null, MISSING[key]));
    if (run.kind === "tracer") {  // GSPO's, when the utterance layer trains
      for (const key of keys.filter((k) => /(^|\/)(reward|loss|kl)$/.test(k))) charts.append(lineChart(key, memberSeries(data, key)));
    }
    const more = h("div", {class: "charts"});
    view.append(h("div", {class: "filters"}, select("f-metric", "another metric ", [["", "choose…"], ...keys.map((k) => [k, k])], "",
      (key) => key && more.prepend(lineChart(key, memberSeries(data, key))))), more);
  }).catch((err) => view.append(failure(err)));
}

// -- reports ---------------------------------------------------------------------------------

function viewReports(view, params) {
  if (!INDEX.reports.length) { view.append(h("p", {class: "empty"}, "No report.md in this folder.")); return; }
  const index = +(params.get("r") || 0);
  const folder = INDEX.reports[index];
  view.append(h("div", {class: "filters"}, select("f-report", "report ", INDEX.reports.map((r, i) => [i, `${r}/report.md`]),
    index, (v) => go("reports", {r: v}))));
  const body = h("article", {class: "markdown"});
  view.append(body);
  const base = folder === "." ? "/files/" : `/files/${folder}/`;
  getJSON(`/api/report/${index}`).then((report) => {
    body.innerHTML = report.html;  // the server's markdown-it output: the report's own HTML escaped
    for (const img of body.querySelectorAll("img")) {
      const src = img.getAttribute("src");
      if (!/^(\/|[a-z]+:)/i.test(src)) img.src = base + src;
    }
  }).catch((err) => body.replaceChildren(failure(err)));
}

// -- the page --------------------------------------------------------------------------------

const VIEWS = {protocols: viewProtocols, episodes: viewEpisodes, problem: viewProblem, training: viewTraining, reports: viewReports};

function render() {
  const {name, params} = route();
  const tabs = [["protocols", "Protocols", INDEX.evals.some((e) => e.protocols.length)],
                ["episodes", "Episodes", INDEX.episodes.run.length > 0], ["problem", "Problem", name === "problem"],
                ["training", "Training", INDEX.trainings.length > 0], ["reports", "Reports", INDEX.reports.length > 0]];
  document.getElementById("tabs").replaceChildren(...tabs.filter((t) => t[2]).map(([key, label]) =>
    h("a", {href: link(key), class: key === name ? "on" : null}, label)));
  const view = document.getElementById("view");
  view.replaceChildren();
  view.dataset.view = name;
  if (INDEX.skipped.length) {  // lines of the episode logs that are not records: said, not hidden
    view.append(h("details", {class: "skipped error"}, h("summary", {}, "Episode lines skipped: not records the page can show"), h("ul", {}, INDEX.skipped.map((s) => h("li", {}, s)))));
  }
  (VIEWS[name] || viewProtocols)(view, params);
}

getJSON("/api/index").then((index) => {
  INDEX = index;
  document.getElementById("folder").textContent = index.folder;
  document.title = `${index.title} · councilzoo view`;
  window.addEventListener("hashchange", render);
  render();
}).catch((err) => {
  document.getElementById("view").textContent = `Could not load the folder: ${err.message}`;
});
