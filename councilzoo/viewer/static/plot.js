// The viewer's two charts, drawn as SVG: lines over training steps and the labelled
// accuracy-cost scatter. Hovering shows the values in a tooltip (a DOM element, so it can be
// read and tested like the rest of the page); clicking a scatter point calls its onClick.
"use strict";

const Plot = (() => {
  const NS = "http://www.w3.org/2000/svg";
  const COLORS = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                  "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#7f7f7f"];
  const MARGIN = {top: 14, right: 18, bottom: 40, left: 56};

  function el(tag, attrs, parent) {
    const node = document.createElementNS(NS, tag);
    for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, value);
    if (parent) parent.append(node);
    return node;
  }

  function format(v) {
    if (v == null || Number.isNaN(v)) return "–";
    const a = Math.abs(v);
    if (a >= 1000) return Math.round(v).toLocaleString("en");
    if (a >= 100) return v.toFixed(1);
    if (a === 0 || a >= 0.01) return v.toFixed(3);
    return v.toExponential(2);
  }

  // Round tick values covering [lo, hi] (steps of 1, 2 or 5 times a power of ten), as
  // [value, text] with as many decimals as the step needs.
  function ticks(lo, hi, count, integers) {
    const span = hi - lo;
    const power = 10 ** Math.floor(Math.log10(span / count));
    let step = [1, 2, 5, 10].map((m) => m * power).find((s) => span / s <= count) || 10 * power;
    if (integers) step = Math.max(1, step);
    const decimals = Math.max(0, -Math.floor(Math.log10(step) + 1e-9));
    const text = (t) => (decimals > 4 ? t.toExponential(1)
      : Math.abs(t) >= 1e4 ? Math.round(t).toLocaleString("en") : t.toFixed(decimals));
    const out = [];
    for (let t = Math.ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) out.push([t, text(t)]);
    return out;
  }

  function domain(values, padShare) {
    let lo = Math.min(...values), hi = Math.max(...values);
    if (!Number.isFinite(lo)) return [0, 1];
    if (lo === hi) { const d = Math.abs(lo) * 0.1 || 0.5; lo -= d; hi += d; }
    const pad = (hi - lo) * padShare;
    return [lo - pad, hi + pad];
  }

  // Axes, ticks and labels in a new <svg> inside container; returns the scales.
  function frame(container, xs, ys, opts) {
    const width = opts.width || 560, height = opts.height || 260;
    const w = width - MARGIN.left - MARGIN.right, h = height - MARGIN.top - MARGIN.bottom;
    const [x0, x1] = opts.xDomain || domain(xs, 0.04);
    const [y0, y1] = opts.yDomain || domain(ys, 0.08);
    const root = el("svg", {viewBox: `0 0 ${width} ${height}`, width, height, class: "plot"}, container);
    const g = el("g", {transform: `translate(${MARGIN.left},${MARGIN.top})`}, root);
    const x = (v) => ((v - x0) / (x1 - x0)) * w;
    const y = (v) => h - ((v - y0) / (y1 - y0)) * h;
    for (const [t, text] of ticks(y0, y1, 5)) {
      el("line", {x1: 0, x2: w, y1: y(t), y2: y(t), class: "grid"}, g);
      el("text", {x: -6, y: y(t) + 4, class: "tick", "text-anchor": "end"}, g).textContent = text;
    }
    for (const [t, text] of ticks(x0, x1, 6, xs.every(Number.isInteger))) {
      el("line", {x1: x(t), x2: x(t), y1: h, y2: h + 4, class: "axis"}, g);
      el("text", {x: x(t), y: h + 16, class: "tick", "text-anchor": "middle"}, g).textContent = text;
    }
    el("line", {x1: 0, x2: w, y1: h, y2: h, class: "axis"}, g);
    el("line", {x1: 0, x2: 0, y1: 0, y2: h, class: "axis"}, g);
    el("text", {x: w / 2, y: h + 34, class: "label", "text-anchor": "middle"}, g).textContent = opts.xLabel || "";
    el("text", {transform: `translate(${-42},${h / 2}) rotate(-90)`, class: "label", "text-anchor": "middle"}, g)
      .textContent = opts.yLabel || "";
    return {root, g, x, y, w, h};
  }

  const tooltip = () => document.getElementById("tooltip");

  function showTip(event, lines) {
    const tip = tooltip();
    tip.replaceChildren(...lines.map((line) => Object.assign(document.createElement("div"), {textContent: line})));
    tip.hidden = false;
    tip.style.left = `${Math.min(event.clientX + 14, window.innerWidth - tip.offsetWidth - 8)}px`;
    tip.style.top = `${event.clientY + 14}px`;
  }

  function hideTip() { tooltip().hidden = true; }

  // series: [{name, points: [[x, y], ...]}]; one colour each, a legend below, and on hover the
  // value of every series at the nearest x.
  function lines(container, {series, xLabel, yLabel, yDomain, width, height}) {
    const all = series.flatMap((s) => s.points);
    const f = frame(container, all.map((p) => p[0]), all.map((p) => p[1]), {xLabel, yLabel, yDomain, width, height});
    series.forEach((s, i) => {
      const color = COLORS[i % COLORS.length];
      const d = s.points.map((p, k) => `${k ? "L" : "M"}${f.x(p[0]).toFixed(1)},${f.y(p[1]).toFixed(1)}`).join("");
      el("path", {d, class: "line", stroke: color, "data-series": s.name}, f.g);
      if (s.points.length <= 60) {
        for (const p of s.points) el("circle", {cx: f.x(p[0]), cy: f.y(p[1]), r: 2.5, fill: color}, f.g);
      }
    });
    const steps = [...new Set(all.map((p) => p[0]))].sort((a, b) => a - b);
    const rule = el("line", {y1: 0, y2: f.h, class: "rule", visibility: "hidden"}, f.g);
    const overlay = el("rect", {width: f.w, height: f.h, class: "overlay"}, f.g);
    overlay.addEventListener("mousemove", (event) => {
      const box = overlay.getBoundingClientRect();
      const at = ((event.clientX - box.left) / box.width) * f.w;
      const step = steps.reduce((best, s) => (Math.abs(f.x(s) - at) < Math.abs(f.x(best) - at) ? s : best), steps[0]);
      rule.setAttribute("x1", f.x(step));
      rule.setAttribute("x2", f.x(step));
      rule.setAttribute("visibility", "visible");
      const rows = series.map((s) => {
        const point = s.points.find((p) => p[0] === step);
        return point ? `${s.name}: ${format(point[1])}` : null;
      }).filter(Boolean);
      showTip(event, [`${xLabel || "step"} ${format(step)}`, ...rows]);
    });
    overlay.addEventListener("mouseleave", () => { rule.setAttribute("visibility", "hidden"); hideTip(); });
    const legend = document.createElement("div");
    legend.className = "legend";
    legend.style.maxWidth = `${width || 560}px`;
    series.forEach((s, i) => {
      const item = document.createElement("span");
      item.innerHTML = `<i style="background:${COLORS[i % COLORS.length]}"></i>`;
      item.append(s.name);
      legend.append(item);
    });
    container.append(legend);
  }

  // points: [{label, x, y, hollow, tip: [lines], onClick}]; path: labels joined by a line (the
  // frontier). Labels go right of their point, or above, below or left when that one is taken.
  function scatter(container, {points, path, xLabel, yLabel, width, height}) {
    const f = frame(container, points.map((p) => p.x), points.map((p) => p.y), {xLabel, yLabel, width, height});
    const byLabel = Object.fromEntries(points.map((p) => [p.label, p]));
    const line = (path || []).map((name) => byLabel[name]).filter(Boolean);
    if (line.length > 1) {
      const d = line.map((p, k) => `${k ? "L" : "M"}${f.x(p.x).toFixed(1)},${f.y(p.y).toFixed(1)}`).join("");
      el("path", {d, class: "frontier"}, f.g);
    }
    const taken = [];
    const overlaps = (a) => taken.some((b) => a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h);
    points.forEach((p, i) => {
      const color = COLORS[i % COLORS.length];
      const cx = f.x(p.x), cy = f.y(p.y);
      const dot = el("circle", {cx, cy, r: 6, class: p.onClick ? "point clickable" : "point", "data-label": p.label,
        fill: p.hollow ? "white" : color, stroke: color, "stroke-width": 2}, f.g);
      taken.push({x: cx - 6, y: cy - 6, w: 12, h: 12});
      const text = el("text", {class: "point-label"}, f.g);
      text.textContent = p.label;
      const width = text.getComputedTextLength() || p.label.length * 6.5, height = 12;
      const places = [[cx + 9, cy + 4], [cx - width / 2, cy - 10], [cx - width / 2, cy + 18], [cx - width - 9, cy + 4],
                      [cx + 9, cy - 10], [cx + 9, cy + 18], [cx - width - 9, cy - 10], [cx - width - 9, cy + 18]];
      const [tx, ty] = places.find(([x, y]) => !overlaps({x, y: y - height + 2, w: width, h: height})) || places[0];
      text.setAttribute("x", tx);
      text.setAttribute("y", ty);
      taken.push({x: tx, y: ty - height + 2, w: width, h: height});
      dot.addEventListener("mousemove", (event) => showTip(event, p.tip || [p.label]));
      dot.addEventListener("mouseleave", hideTip);
      if (p.onClick) dot.addEventListener("click", () => { hideTip(); p.onClick(); });
    });
  }

  return {lines, scatter, format, COLORS};
})();
