// The time-series chart of the selection's totals: bars per step on a canvas, time and value
// axes, and drag-to-select to narrow the time range.

import { formatTime, formatValue } from "./format.js";

const PAD = { left: 64, right: 10, top: 8, bottom: 20 };

export class TimeSeriesChart {
  // `onSelect(fromMs, untilMs)` is called when the user drags across the chart.
  constructor(canvas, onSelect) {
    this.canvas = canvas;
    this.ctx = canvas.getContext("2d");
    this.onSelect = onSelect;
    this.data = null;
    this.drag = null;
    canvas.addEventListener("mousedown", (e) => {
      const x = this.localX(e);
      this.drag = { x0: x, x1: x };
    });
    canvas.addEventListener("mousemove", (e) => {
      if (!this.drag) return;
      this.drag.x1 = this.localX(e);
      this.draw();
    });
    window.addEventListener("mouseup", () => {
      if (!this.drag) return;
      const { x0, x1 } = this.drag;
      this.drag = null;
      this.draw();
      if (Math.abs(x1 - x0) >= 4 && this.data) {
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

  timeAt(x) {
    const { fromMs, untilMs } = this.data;
    const w = this.canvas.clientWidth - PAD.left - PAD.right;
    return fromMs + ((x - PAD.left) / w) * (untilMs - fromMs);
  }

  // `answer` is `/api/v1/timeseries`'s JSON (all series added up); the axis spans
  // `fromMs`..`untilMs`.
  setData(answer, fromMs, untilMs, unit) {
    const buckets = new Map();
    for (const s of answer?.series || []) {
      for (const [t, v] of s.points) buckets.set(t, (buckets.get(t) || 0) + v);
    }
    const points = [...buckets.entries()].sort((a, b) => a[0] - b[0]);
    this.data = { points, stepMs: (answer?.stepSeconds || 60) * 1000, fromMs, untilMs, unit };
    this.draw();
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
    const { points, stepMs, fromMs, untilMs, unit } = this.data;
    const pw = w - PAD.left - PAD.right, ph = h - PAD.top - PAD.bottom;
    const max = Math.max(1, ...points.map((p) => p[1]));
    const xOf = (t) => PAD.left + ((t - fromMs) / (untilMs - fromMs)) * pw;
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
    ctx.fillStyle = bar;
    const bw = Math.max(1, (stepMs / (untilMs - fromMs)) * pw - 1);
    for (const [t, v] of points) {
      const bh = (v / max) * ph;
      ctx.fillRect(xOf(t), PAD.top + ph - bh, bw, bh);
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
