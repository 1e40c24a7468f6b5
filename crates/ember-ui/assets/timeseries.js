// The time-series chart of the selection's totals: bars per step on a canvas, time and value
// axes, and drag-to-select to narrow the time range. The individual profiles of a narrow
// range are drawn as points; a click on one opens it.

import { formatTime, formatValue } from "./format.js";

const PAD = { left: 64, right: 10, top: 8, bottom: 20 };
// Series shown one by one when grouped; the others are added up.
const TOP_SERIES = 6;
// Distinct in both themes (Tableau 10), and grey for the rest.
const PALETTE = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948"];
const REST = "#9aa0a6";

export class TimeSeriesChart {
  // `onSelect(fromMs, untilMs)` is called when the user drags across the chart; `tip` shows
  // the values of the bucket under the pointer.
  constructor(canvas, tip, onSelect) {
    this.canvas = canvas;
    this.tip = tip;
    this.ctx = canvas.getContext("2d");
    this.onSelect = onSelect;
    this.data = null;
    this.drag = null;
    this.points = [];
    this.onPoint = null;
    this.geom = null;
    canvas.addEventListener("mousedown", (e) => {
      const x = this.localX(e);
      this.drag = { x0: x, x1: x, point: this.pointNear(e) };
    });
    canvas.addEventListener("mousemove", (e) => {
      if (!this.drag) { this.hover(e); return; }
      this.tip.hidden = true;
      this.drag.x1 = this.localX(e);
      this.draw();
    });
    canvas.addEventListener("mouseleave", () => { this.tip.hidden = true; });
    window.addEventListener("mouseup", () => {
      if (!this.drag) return;
      const { x0, x1, point } = this.drag;
      this.drag = null;
      this.draw();
      if (Math.abs(x1 - x0) < 4 && point && this.onPoint) this.onPoint(point);
      else if (Math.abs(x1 - x0) >= 4 && this.data) {
        const a = this.timeAt(Math.min(x0, x1)), b = this.timeAt(Math.max(x0, x1));
        this.onSelect(Math.floor(a), Math.ceil(b));
      }
    });
    new ResizeObserver(() => this.draw()).observe(canvas);
  }

  localX(e) {
    const r = this.canvas.getBoundingClientRect();
    return Math.min(Math.max(e.clientX - r.left, PAD.left), r.width - PAD.right);
  }

  // The profile point within a few pixels of the pointer, if any.
  pointNear(e) {
    if (!this.geom || !this.points.length) return null;
    const r = this.canvas.getBoundingClientRect();
    const x = e.clientX - r.left, y = e.clientY - r.top;
    let best = null, bestD = 7 * 7;
    for (const p of this.points) {
      const dx = this.geom.xOf(p.timeMs) - x, dy = this.geom.yOf(p.total) - y;
      if (dx * dx + dy * dy <= bestD) { best = p; bestD = dx * dx + dy * dy; }
    }
    return best;
  }

  // Individual profiles to draw as points (`[{timeMs, total, series, labels}]`); a click on
  // one calls `onPoint(profile)`.
  setPoints(points, onPoint) {
    this.points = points || [];
    this.onPoint = onPoint;
    this.draw();
  }

  // Shows the bucket under the pointer: its time and each series' value; or the profile
  // point under it.
  hover(e) {
    const tip = this.tip;
    tip.hidden = true;
    if (!this.data) return;
    const point = this.pointNear(e);
    this.canvas.style.cursor = point ? "pointer" : "";
    if (point) {
      tip.replaceChildren();
      const head = document.createElement("div");
      head.className = "tip-name";
      head.textContent = `profile at ${formatTime(point.timeMs)}`;
      const series = document.createElement("div");
      // The series' own labels (the profile type's `__…__` ones are the page's type).
      series.textContent = Object.entries(point.labels || {}).filter(([k]) => !k.startsWith("__"))
        .map(([k, v]) => `${k}=${v}`).join(", ");
      const total = document.createElement("div");
      total.textContent = `${formatValue(point.total, this.data.unit)} — click to open`;
      tip.append(head, series, total);
      tip.hidden = false;
      tip.style.left = Math.min(e.clientX + 14, window.innerWidth - tip.offsetWidth - 4) + "px";
      tip.style.top = e.clientY + 14 + "px";
      return;
    }
    const { groups, times, stepMs, unit } = this.data;
    const at = this.timeAt(this.localX(e));
    const t = times.find((b) => b <= at && at < b + stepMs);
    if (t === undefined) return;
    tip.replaceChildren();
    const head = document.createElement("div");
    head.className = "tip-name";
    head.textContent = formatTime(t);
    tip.append(head);
    for (const g of groups) {
      const v = g.values.get(t);
      if (!v) continue;
      const row = document.createElement("div");
      row.textContent = `${g.label}: ${formatValue(v, unit)}`;
      tip.append(row);
    }
    tip.hidden = false;
    tip.style.left = Math.min(e.clientX + 14, window.innerWidth - tip.offsetWidth - 4) + "px";
    tip.style.top = e.clientY + 14 + "px";
  }

  timeAt(x) {
    const { fromMs, untilMs } = this.data;
    const w = this.canvas.clientWidth - PAD.left - PAD.right;
    return fromMs + ((x - PAD.left) / w) * (untilMs - fromMs);
  }

  // `answer` is `/api/v1/timeseries`'s JSON; the axis spans `fromMs`..`untilMs`. With
  // `groupBy` (a label name) the heaviest `TOP_SERIES` series are stacked and the others
  // added up as "rest"; without, all series are added up. Returns the legend:
  // `[{label, labels, total, colour}]`, heaviest first.
  setData(answer, fromMs, untilMs, unit, groupBy = "") {
    const series = (answer?.series || []).map((s) => ({
      labels: s.labels,
      label: groupBy ? (s.labels[groupBy] ?? "(none)") : "total",
      total: s.points.reduce((a, p) => a + p[1], 0),
      points: s.points,
    })).sort((a, b) => b.total - a.total || (a.label < b.label ? -1 : 1));
    let groups;
    if (!groupBy) {
      groups = [{ label: "total", labels: {}, total: 0, points: series.flatMap((s) => s.points) }];
    } else {
      groups = series.slice(0, TOP_SERIES);
      const rest = series.slice(TOP_SERIES);
      if (rest.length) groups.push({ label: `rest (${rest.length})`, labels: null, points: rest.flatMap((s) => s.points) });
    }
    const times = new Set();
    for (const g of groups) {
      g.values = new Map();
      g.total = 0;
      for (const [t, v] of g.points) {
        g.values.set(t, (g.values.get(t) || 0) + v);
        g.total += v;
        times.add(t);
      }
    }
    groups.forEach((g, i) => {
      g.colour = !groupBy ? "" : g.labels === null ? REST : PALETTE[i % PALETTE.length];
    });
    this.data = {
      groups, times: [...times].sort((a, b) => a - b),
      stepMs: (answer?.stepSeconds || 60) * 1000, fromMs, untilMs, unit,
    };
    this.draw();
    return groups.map(({ label, labels, total, colour }) => ({ label, labels, total, colour }));
  }

  draw() {
    const { canvas, ctx } = this;
    const dpr = window.devicePixelRatio || 1;
    const w = canvas.clientWidth, h = canvas.clientHeight;
    if (canvas.width !== Math.round(w * dpr)) canvas.width = Math.round(w * dpr);
    if (canvas.height !== Math.round(h * dpr)) canvas.height = Math.round(h * dpr);
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, w, h);
    if (!this.data) return;
    const css = getComputedStyle(document.documentElement);
    const fg = css.getPropertyValue("--muted").trim() || "#666";
    const bar = css.getPropertyValue("--accent").trim() || "#d9480f";
    const { groups, times, stepMs, fromMs, untilMs, unit } = this.data;
    const pw = w - PAD.left - PAD.right, ph = h - PAD.top - PAD.bottom;
    const sums = times.map((t) => groups.reduce((a, g) => a + (g.values.get(t) || 0), 0));
    const max = Math.max(1, ...sums, ...this.points.map((p) => p.total));
    const xOf = (t) => PAD.left + ((t - fromMs) / (untilMs - fromMs)) * pw;
    const yOf = (v) => PAD.top + ph - (v / max) * ph;
    this.geom = { xOf, yOf };
    ctx.font = "11px system-ui, sans-serif";
    ctx.fillStyle = fg;
    ctx.strokeStyle = fg;
    ctx.globalAlpha = 0.35;
    ctx.beginPath();
    ctx.moveTo(PAD.left, PAD.top + ph + 0.5);
    ctx.lineTo(w - PAD.right, PAD.top + ph + 0.5);
    ctx.stroke();
    ctx.globalAlpha = 1;
    ctx.textAlign = "right";
    ctx.textBaseline = "middle";
    ctx.fillText(formatValue(max, unit), PAD.left - 6, PAD.top + 6);
    ctx.fillText("0", PAD.left - 6, PAD.top + ph);
    ctx.textBaseline = "top";
    ctx.textAlign = "left";
    ctx.fillText(formatTime(fromMs), PAD.left, PAD.top + ph + 4);
    ctx.textAlign = "right";
    ctx.fillText(formatTime(untilMs), w - PAD.right, PAD.top + ph + 4);
    const bw = Math.max(1, (stepMs / (untilMs - fromMs)) * pw - 1);
    for (const t of times) {
      // Stacked, heaviest series at the bottom.
      let y = PAD.top + ph;
      for (const g of groups) {
        const v = g.values.get(t) || 0;
        if (!v) continue;
        const bh = (v / max) * ph;
        ctx.fillStyle = g.colour || bar;
        ctx.fillRect(xOf(t), y - bh, bw, bh);
        y -= bh;
      }
    }
    // Profiles as points on top of the bars: a ring in the page's colours.
    ctx.lineWidth = 1.5;
    for (const p of this.points) {
      ctx.beginPath();
      ctx.arc(xOf(p.timeMs), yOf(p.total), 3.5, 0, 2 * Math.PI);
      ctx.fillStyle = css.getPropertyValue("--bg").trim() || "#fff";
      ctx.fill();
      ctx.strokeStyle = css.getPropertyValue("--fg").trim() || "#111";
      ctx.stroke();
    }
    if (this.drag) {
      const { x0, x1 } = this.drag;
      ctx.fillStyle = fg;
      ctx.globalAlpha = 0.2;
      ctx.fillRect(Math.min(x0, x1), PAD.top, Math.abs(x1 - x0), ph);
      ctx.globalAlpha = 1;
    }
  }
}
