// The flame graph's view: a canvas the size of its scroll box (never the size of the graph:
// a spacer gives the box its scroll height), redrawn with only the rows and frames in sight.
// Click zooms, hover shows a tooltip, search and the top table's function are highlighted.

import { diffColour, pushedDiffRows } from "./diffcolour.js";
import { FlameModel, searchRegex } from "./flame.js";
import { formatValue, packageColour, percent } from "./format.js";

const ROW = 18;
const MIN_WIDTH = 0.35; // px: narrower frames are not drawn (their parent covers them)

export class FlameView {
  // `wrap` is the scroll box holding `canvas`, `spacer` and `tooltip`; `onZoom(path)` is
  // called with the path of names when the user zooms (empty path = reset). A diff's view
  // passes `paint(level, i)` (a frame's fill in place of its package colour) and
  // `tipRows(level, i)` (the tooltip's `[label, text]` rows). Without them, a `double` model
  // (a pushed `pprof -diff_base` profile in Explore) is painted by its change, base → new,
  // and its tooltip gives shares of the base's total (diffcolour.js).
  constructor({ wrap, canvas, spacer, tooltip, onZoom, paint = null, tipRows = null }) {
    Object.assign(this, { wrap, canvas, spacer, tooltip, onZoom, paint, tipRows });
    this.ctx = canvas.getContext("2d");
    this.model = null;
    this.unit = "count";
    this.zoom = [0, 0];
    this.flipped = false;
    // Whether the model is the server's answer focused on the zoomed path.
    this.focused = false;
    this.search = null;
    this.fn = "";
    this.colours = [];
    this.stats = { drawn: 0, ms: 0 };
    wrap.addEventListener("scroll", () => this.draw());
    canvas.addEventListener("mousemove", (e) => this.hover(e));
    canvas.addEventListener("mouseleave", () => { this.tooltip.hidden = true; });
    canvas.addEventListener("click", (e) => this.click(e));
    new ResizeObserver(() => this.layout()).observe(wrap);
  }

  // Shows a flame graph (null clears the view): a FlameModel, or a flamebearer answer made
  // into one. `allTotal` is what "% of all" means when the answer is a focused part of the
  // selection (default: the answer's own total).
  setData(data, unit, allTotal = 0) {
    this.model = !data ? null : data instanceof FlameModel ? data : new FlameModel(data);
    this.unit = unit;
    this.allTotal = allTotal || (this.model ? this.model.total : 0);
    // Colours are worked out per name when a frame of that name is first drawn (a packed
    // array of nulls until then: an empty one filled at scattered indexes turns into a slow
    // dictionary).
    this.colours = this.model ? new Array(this.model.names.length).fill(null) : [];
    this.zoom = [0, 0];
    this.marks = null;
    this.fnMarks = null;
    this.stale = false;
    this.layout();
    if (this.flipped) this.wrap.scrollTop = this.wrap.scrollHeight;
  }

  // Runs `f` (which calls the setters) and draws once at the end instead of once per setter:
  // showing a new answer sets the data, the orientation, the zoom, the search and the chosen
  // function, and each would redraw (and mark) the whole graph.
  batch(f) {
    this.held = (this.held || 0) + 1;
    try {
      return f();
    } finally {
      if (--this.held === 0 && this.pending) {
        this.pending = false;
        this.draw();
      }
    }
  }

  // Zooms to the node at the end of `path` (names from depth 1).
  setZoom(path) {
    if (!this.model) return;
    this.zoom = this.model.find(path);
    this.stale = true;
    this.draw();
  }

  // `text`: the search regex; returns `{count, value, share, error}` of the matches.
  setSearch(text) {
    this.search = searchRegex(text);
    this.stale = true;
    this.draw();
    return this.searchResult();
  }

  setFunction(name) {
    this.fn = name;
    this.stale = true;
    this.draw();
  }

  setFlipped(flipped) {
    this.flipped = flipped;
    this.layout();
    if (flipped) this.wrap.scrollTop = this.wrap.scrollHeight;
    else this.wrap.scrollTop = 0;
  }

  // The search's and the chosen function's marks, worked out again when the zoom, the search
  // or the function changed since they were last.
  refreshMarks() {
    const m = this.model;
    this.stale = false;
    if (!m) return;
    const re = this.search instanceof RegExp ? this.search : null;
    this.marks = re ? m.mark((n) => re.test(n), ...this.zoom) : null;
    this.fnMarks = this.fn ? m.mark((n) => n === this.fn, ...this.zoom) : null;
  }

  // The fill of frame `i` of depth `lv` in place of its package colour, or null: the view's
  // `paint`, else a diff's colour for a `double` model.
  painter() {
    if (this.paint) return this.paint;
    return this.model?.double ? (lv, i) => diffColour(lv.leftTotal[i], lv.rightTotal[i]) : null;
  }

  // The fill of frame name `name` (its package's colour).
  colourOf(name) {
    return this.colours[name] ??= packageColour(this.model.names[name]);
  }

  searchResult() {
    if (this.search instanceof Error) return { error: this.search.message };
    if (this.stale) this.refreshMarks();
    if (!this.marks || !this.model) return null;
    const [zd, zi] = this.zoom;
    const whole = this.model.levels[zd].total[zi];
    return { count: this.marks.count, value: this.marks.value, share: whole ? this.marks.value / whole : 0 };
  }

  // Sizes the spacer (the graph's height) and the canvas (the visible box), then draws.
  layout() {
    const rows = this.model ? this.model.depth : 0;
    const viewH = this.wrap.clientHeight;
    this.contentH = Math.max(rows * ROW, viewH);
    this.spacer.style.height = Math.max(0, this.contentH - viewH) + "px";
    this.draw();
  }

  // y (in graph coordinates) of depth `d`.
  rowY(d) {
    return this.flipped ? this.contentH - (d + 1) * ROW : d * ROW;
  }

  draw() {
    if (this.held) { this.pending = true; return; }
    if (this.stale) this.refreshMarks();
    const t0 = performance.now();
    const { canvas, ctx, wrap } = this;
    const dpr = window.devicePixelRatio || 1;
    const w = wrap.clientWidth, h = wrap.clientHeight;
    if (canvas.width !== Math.round(w * dpr) || canvas.height !== Math.round(h * dpr)) {
      canvas.width = Math.round(w * dpr);
      canvas.height = Math.round(h * dpr);
      canvas.style.width = w + "px";
      canvas.style.height = h + "px";
    }
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, w, h);
    const m = this.model;
    this.stats.drawn = 0;
    if (!m || !m.total) return;
    const css = getComputedStyle(document.documentElement);
    const text = css.getPropertyValue("--frame-text").trim() || "#000";
    const dim = css.getPropertyValue("--frame-dim").trim() || "#ccc";
    const dimText = css.getPropertyValue("--frame-dim-text").trim() || "#222";
    ctx.font = "12px system-ui, sans-serif";
    ctx.textBaseline = "middle";
    const charW = ctx.measureText("abcdefghijklmnopqrstuvwxyz").width / 26;
    const [zd, zi] = this.zoom;
    const zx = m.levels[zd].x[zi], zw = m.levels[zd].total[zi] || 1;
    const scale = w / zw;
    const top = wrap.scrollTop;
    const paint = this.painter();
    for (let d = 0; d < m.depth; d++) {
      const y = this.rowY(d) - top;
      if (y + ROW < 0 || y > h) continue;
      const lv = m.levels[d];
      const marks = this.marks?.flags[d], fnMarks = this.fnMarks?.flags[d];
      for (let i = m.firstAt(d, zx); i < lv.x.length && lv.x[i] < zx + zw; i++) {
        let x0 = (lv.x[i] - zx) * scale, x1 = x0 + lv.total[i] * scale;
        if (x1 - x0 < MIN_WIDTH) continue;
        x0 = Math.max(0, x0);
        x1 = Math.min(w, x1);
        const name = lv.name[i];
        let fill = this.colours[name] ?? this.colourOf(name);
        if (paint) {
          // A diff keeps its colours; what the search or the chosen function leaves out dims.
          const out = d < zd || (marks ? !marks[i] : fnMarks ? !fnMarks[i] : false);
          fill = out ? dim : paint(lv, i);
        } else if (fnMarks && fnMarks[i]) fill = "hsl(210 85% 62%)";
        else if (marks) fill = marks[i] ? "hsl(300 75% 62%)" : dim;
        else if (fnMarks || d < zd) fill = dim;
        ctx.fillStyle = fill;
        ctx.fillRect(x0, y, Math.max(x1 - x0 - 0.5, 0.5), ROW - 1);
        this.stats.drawn++;
        const room = Math.floor((x1 - x0 - 6) / charW);
        if (room >= 3) {
          const label = m.names[name];
          ctx.fillStyle = fill === dim ? dimText : text;
          ctx.fillText(label.length > room ? label.slice(0, room - 1) + "…" : label, x0 + 3, y + ROW / 2);
        }
      }
    }
    this.stats.ms = performance.now() - t0;
  }

  // The node under a mouse event: `[d, i]` or null.
  nodeAt(e) {
    const m = this.model;
    if (!m) return null;
    const r = this.canvas.getBoundingClientRect();
    const gy = e.clientY - r.top + this.wrap.scrollTop;
    const d = this.flipped ? Math.floor((this.contentH - gy) / ROW) : Math.floor(gy / ROW);
    const [zd, zi] = this.zoom;
    const zx = m.levels[zd].x[zi], zw = m.levels[zd].total[zi];
    const x = zx + ((e.clientX - r.left) / r.width) * zw;
    const i = m.at(d, x);
    return i < 0 ? null : [d, i];
  }

  hover(e) {
    const hit = this.nodeAt(e);
    const tip = this.tooltip;
    if (!hit) { tip.hidden = true; return; }
    const [d, i] = hit;
    const m = this.model, lv = m.levels[d];
    const rows = this.tipRows ? this.tipRows(lv, i) : m.double ? pushedDiffRows(m, lv, i, this.unit) : [
      ["self", formatValue(lv.self[i], this.unit) + " (" + percent(lv.self[i], this.allTotal) + ")"],
      ["total", formatValue(lv.total[i], this.unit) + " (" + percent(lv.total[i], this.allTotal) + " of all)"],
    ];
    tip.replaceChildren();
    const title = document.createElement("div");
    title.className = "tip-name";
    title.textContent = m.nameOf(d, i);
    tip.append(title);
    for (const [k, v] of rows) {
      const row = document.createElement("div");
      row.textContent = k + ": " + v;
      tip.append(row);
    }
    tip.hidden = false;
    const box = this.wrap.getBoundingClientRect();
    const x = Math.min(e.clientX - box.left + 14, box.width - tip.offsetWidth - 4);
    tip.style.left = Math.max(0, x) + "px";
    tip.style.top = e.clientY - box.top + this.wrap.scrollTop + 14 + "px";
  }

  click(e) {
    const hit = this.nodeAt(e);
    if (!hit) return;
    this.onZoom(this.model.path(...hit));
  }

  // Where a person would click to reach the widest frame called `name` in sight (for the
  // browser tests), in page coordinates; null when it is not drawn.
  frameBox(name) {
    const m = this.model;
    if (!m) return null;
    const r = this.canvas.getBoundingClientRect();
    const [zd, zi] = this.zoom;
    const zx = m.levels[zd].x[zi], zw = m.levels[zd].total[zi];
    let best = null;
    for (let d = 0; d < m.depth; d++) {
      const lv = m.levels[d];
      for (let i = 0; i < lv.x.length; i++) {
        if (m.names[lv.name[i]] !== name) continue;
        const x0 = Math.max(lv.x[i], zx), x1 = Math.min(lv.x[i] + lv.total[i], zx + zw);
        const y = this.rowY(d) - this.wrap.scrollTop;
        if (x1 <= x0 || y < 0 || y + ROW > r.height) continue;
        if (!best || x1 - x0 > best.width) best = { width: x1 - x0, x: (x0 + x1) / 2, y, d, i };
      }
    }
    if (!best) return null;
    // `fill` is the colour the frame is painted with; `top` the page y of its first row of
    // pixels (above its label), where that colour can be read back from the canvas.
    const paint = this.painter();
    const fill = paint ? paint(m.levels[best.d], best.i) : this.colourOf(m.levels[best.d].name[best.i]);
    return { x: r.left + ((best.x - zx) / zw) * r.width, y: r.top + best.y + ROW / 2, top: r.top + best.y, fill };
  }
}
