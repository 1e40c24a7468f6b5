// The Compare view: a baseline and a comparison selection (each a selector and a time range;
// by default the same selector over the period before and the current period), their
// differential flame graph on the same canvas renderer as Explore's, coloured by absolute or
// normalised (share of each side's total) change, a legend, and the table of biggest movers.
// Everything it shows comes from `/api/v1/diff`; everything chosen lives in the URL.

import { diffColour } from "./diffcolour.js";
import { linkExports, wireExports } from "./export.js";
import { FlameModel } from "./flame.js";
import { FlameView } from "./flamedraw.js";
import { formatTime, formatValue, unitOf } from "./format.js";
import { noDataHint } from "./hints.js";
import { MoversTable } from "./movers.js";
import { compareSides, toMs } from "./state.js";

const $ = (id) => document.getElementById(id);

// The diff's colours live in diffcolour.js (Explore paints a pushed diff profile with them);
// still exported here, where the contrast checks (tests/browser/ui_states.mjs) take them.
export { diffColour };

// A frame's baseline and comparison figures in `mode`: values ("abs") or shares of each
// side's total ("norm").
function sides(model, lv, i, mode) {
  const a = lv.leftTotal[i], b = lv.rightTotal[i];
  if (mode !== "norm") return [a, b];
  return [model.leftTicks ? a / model.leftTicks : 0, model.rightTicks ? b / model.rightTicks : 0];
}

// The diff's file exports: element id and `format` of `/api/v1/diff`.
const DIFF_EXPORTS = [["cmp-export-speedscope", "speedscope"], ["cmp-export-svg", "svg"]];

const share = (v, total) => (total ? ((100 * v) / total).toFixed(2) : "0.00") + " %";

export class CompareView {
  // `state()` is the page's state (the URL's), `save(push)` writes it, `task(f)` runs `f`
  // with the loading indicator and error line, `status(text, kind)` sets the line.
  constructor({ api, state, save, task, status, hook }) {
    Object.assign(this, { api, state, save, task, status, hook });
    this.flame = new FlameView({
      wrap: $("cmp-wrap"), canvas: $("cmp-flame"), spacer: $("cmp-spacer"), tooltip: $("cmp-tooltip"),
      onZoom: (path) => this.zoomTo(path),
      paint: (lv, i) => diffColour(...sides(this.flame.model, lv, i, this.state().diff)),
      tipRows: (lv, i) => this.tipRows(lv, i),
    });
    this.movers = new MoversTable($("movers"), { onPick: (name) => this.pick(name) });
    // The whole diff's answer and its model; the view may show an answer focused on the zoom.
    this.full = null;
    this.fullModel = null;
    // Whether the server cut the whole diff at its node limit: then a zoom asks it for the
    // zoomed subtree (as Explore does), so nothing under the zoom stays hidden in "other".
    this.truncated = false;
    hook.compareFlame = this.flame;
    this.wire();
  }

  wire() {
    $("cmp-apply").addEventListener("click", () => this.apply());
    for (const id of ["l-query", "l-from", "l-until", "r-query", "r-from", "r-until"]) {
      $(id).addEventListener("keydown", (e) => { if (e.key === "Enter") this.apply(); });
    }
    for (const [id, mode] of [["diff-abs", "abs"], ["diff-norm", "norm"]]) {
      $(id).addEventListener("click", () => this.setMode(mode));
    }
    $("cmp-by").addEventListener("change", (e) => {
      this.state().mby = e.target.value;
      this.save();
      this.movers.set({ by: e.target.value });
      this.showMovers();
    });
    $("cmp-search").addEventListener("input", (e) => { this.state().search = e.target.value; this.save(); this.showSearch(); });
    $("cmp-reset").addEventListener("click", () => this.zoomTo([]));
    wireExports({ api: this.api, task: this.task, path: "/api/v1/diff", files: DIFF_EXPORTS,
      params: (format) => this.exportParams(format), pngId: "cmp-export-png", canvases: () => [$("cmp-flame")] });
  }

  // The request of both sides (defaults filled in).
  params() {
    const s = this.state();
    const { left, right } = compareSides(s);
    return { type: s.type, leftQuery: left.query, leftFrom: left.from, leftUntil: left.until,
      rightQuery: right.query, rightFrom: right.from, rightUntil: right.until };
  }

  // An export of the diff as shown: of the zoomed call path when zoomed.
  exportParams(format) {
    const zoom = this.state().czoom;
    return { ...this.params(), format, focus: zoom ? JSON.stringify(zoom.split(";")) : "" };
  }

  // The inputs show both sides as they are queried (defaults filled in).
  sync() {
    const s = this.state();
    const { left, right } = compareSides(s);
    const now = Date.now();
    for (const [p, side] of [["l", left], ["r", right]]) {
      $(p + "-query").value = side.query;
      $(p + "-from").value = side.from;
      $(p + "-until").value = side.until;
      $(p + "-range").textContent = `${formatTime(toMs(side.from, now))} – ${formatTime(toMs(side.until, now))}`;
    }
    $("cmp-search").value = s.search;
    $("cmp-by").value = s.mby;
    this.showMode();
  }

  // Keeps what was typed, as "" where it is the default (so the link keeps following the
  // selection above).
  apply() {
    const s = this.state();
    const keys = [["lquery", "l-query"], ["lfrom", "l-from"], ["luntil", "l-until"],
      ["rquery", "r-query"], ["rfrom", "r-from"], ["runtil", "r-until"]];
    for (const [key] of keys) s[key] = "";
    const { left, right } = compareSides(s);
    const defaults = { lquery: left.query, lfrom: left.from, luntil: left.until,
      rquery: right.query, rfrom: right.from, runtil: right.until };
    for (const [key, id] of keys) {
      const v = $(id).value.trim();
      s[key] = v && v !== defaults[key] ? v : "";
    }
    s.czoom = "";
    this.save(true);
    this.sync();
    this.task(() => this.load());
  }

  setMode(mode) {
    this.state().diff = mode;
    this.save(true);
    this.showMode();
    this.flame.draw();
    this.movers.set({ mode });
    this.showMovers();
  }

  showMode() {
    const mode = this.state().diff;
    $("diff-abs").setAttribute("aria-pressed", String(mode !== "norm"));
    $("diff-norm").setAttribute("aria-pressed", String(mode === "norm"));
    const scale = $("cmp-scale");
    scale.replaceChildren();
    for (const [a, b] of [[1, 0], [1, 0.5], [1, 1], [0.5, 1], [0, 1]]) {
      const s = document.createElement("span");
      s.className = "swatch";
      s.style.background = diffColour(a, b);
      scale.append(s);
    }
    $("cmp-legend-text").textContent = mode === "norm"
      ? "less ← share of its side's total → more in the comparison"
      : "less ← value → more in the comparison";
    this.hook.view.compareMode = mode;
  }

  // The diff of both sides: flame graph and movers.
  async load() {
    const s = this.state();
    const { left, right } = compareSides(s);
    const unit = unitOf(s.type);
    const params = this.params();
    this.hook.view.compare = null;
    this.full = null;
    let fb, top;
    try {
      [fb, top] = await Promise.all([
        this.api.buffer("/api/v1/diff", { ...params, format: "flamebearer-bin", maxNodes: s.maxNodes }, "diff")
          .then((bytes) => FlameModel.decode(bytes)),
        this.api.json("/api/v1/diff", { ...params, format: "top-json" }, "diff-top"),
      ]);
    } catch (e) {
      if (e.status !== 404) throw e;
      this.flame.setData(null, unit);
      this.fullModel = null;
      this.movers.set({ data: null, unit });
      this.status(noDataHint({ what: `of ${s.type || "any type"} match either side of the comparison`,
        tenant: s.tenant, types: $("type").options.length }), "empty");
      $("cmp-total").textContent = "";
      return;
    }
    this.flame.setData(fb, unit);
    this.full = fb;
    const m = (this.fullModel = this.flame.model);
    this.truncated = m.names.includes("other");
    this.flame.focused = false;
    const one = !m.leftTicks ? "The baseline is empty: everything shows as more. "
      : !m.rightTicks ? "The comparison is empty: everything shows as less. " : "";
    this.status(one, one ? "empty" : "");
    // The server cuts the graph at its node limit (the rest is summed into "other"); the
    // movers are of the full data.
    const cut = m.names.includes("other") ? ` (${m.nodeCount} nodes: the server's node limit; the movers cover every function)` : "";
    $("cmp-total").textContent = `baseline ${formatValue(m.leftTicks, unit)}, comparison ${formatValue(m.rightTicks, unit)}${cut}`;
    this.movers.set({ data: top, unit, mode: s.diff, by: s.mby, picked: s.fn });
    this.hook.view.compare = { left, right, leftTicks: m.leftTicks, rightTicks: m.rightTicks, nodes: m.nodeCount };
    await this.applyZoom(s.czoom ? s.czoom.split(";") : []);
    this.showMovers();
  }

  // Shows the diff zoomed to `path`: on the whole diff, or on the server's diff focused on the
  // path when the whole one was cut at the node limit.
  async applyZoom(path) {
    if (!this.full) return;
    const s = this.state(), unit = unitOf(s.type);
    let focused = null;
    if (this.truncated && path.length) {
      try {
        focused = FlameModel.decode(await this.api.buffer("/api/v1/diff", { ...this.params(),
          format: "flamebearer-bin", maxNodes: s.maxNodes, focus: JSON.stringify(path) }, "diff-focus"));
      } catch (e) {
        if (e.name === "AbortError") return; // a newer zoom took over
        if (e.status !== 404) throw e; // 404: the path is gone; show the whole diff
      }
      if (this.state().czoom !== path.join(";")) return; // a newer zoom is on its way
    }
    if (focused) {
      this.flame.setData(focused, unit);
      // Shares and normalised colours stay of each side's whole total, not of the subtree.
      Object.assign(this.flame.model, { leftTicks: this.fullModel.leftTicks, rightTicks: this.fullModel.rightTicks });
    } else if (this.flame.model !== this.fullModel) {
      this.flame.setData(this.full, unit);
      this.fullModel = this.flame.model;
    }
    this.flame.focused = Boolean(focused);
    this.flame.setZoom(path);
    this.flame.setFunction(s.fn);
    this.showSearch();
    this.showCrumbs();
    this.hook.view.compareFocused = this.flame.focused;
    this.hook.view.compareViewNodes = this.flame.model.nodeCount;
  }

  tipRows(lv, i) {
    const m = this.flame.model, unit = this.flame.unit;
    const a = lv.leftTotal[i], b = lv.rightTotal[i];
    const [sa, sb] = sides(m, lv, i, "norm");
    const sign = (v) => (v > 0 ? "+" : v < 0 ? "−" : "");
    return [
      ["baseline", `${formatValue(a, unit)} (${share(a, m.leftTicks)}), self ${formatValue(lv.leftSelf[i], unit)}`],
      ["comparison", `${formatValue(b, unit)} (${share(b, m.rightTicks)}), self ${formatValue(lv.rightSelf[i], unit)}`],
      ["change", `${sign(b - a)}${formatValue(Math.abs(b - a), unit)}, ${sign(sb - sa)}${Math.abs(100 * (sb - sa)).toFixed(2)} pp of the total`],
    ];
  }

  zoomTo(path) {
    this.state().czoom = path.join(";");
    this.save(true);
    this.task(() => this.applyZoom(path));
  }

  pick(name) {
    this.state().fn = name;
    this.save(true);
    this.flame.setFunction(name);
    this.movers.set({ picked: name });
    this.showSearch();
  }

  showSearch() {
    const r = this.flame.setSearch(this.state().search);
    const out = $("cmp-search-result");
    $("cmp-search").classList.toggle("invalid", Boolean(r?.error));
    out.textContent = !r ? "" : r.error ? "invalid regex: " + r.error
      : `${r.count} frames, ${(100 * r.share).toFixed(2)} % of the view`;
    this.hook.view.compareSearch = r;
  }

  showCrumbs() {
    const crumbs = $("cmp-crumbs");
    crumbs.replaceChildren();
    const path = this.flame.model ? this.flame.model.path(...this.flame.zoom) : [];
    const add = (label, target) => {
      const b = document.createElement("button");
      b.textContent = label;
      b.title = label;
      b.addEventListener("click", () => this.zoomTo(target));
      crumbs.append(b);
    };
    add("all", []);
    path.forEach((name, i) => add(name, path.slice(0, i + 1)));
    $("cmp-reset").disabled = path.length === 0;
    this.hook.view.compareZoom = path;
    linkExports(this.api, "/api/v1/diff", DIFF_EXPORTS, (format) => this.exportParams(format));
  }

  // The movers as the table orders them (for the browser tests).
  showMovers() {
    this.hook.view.movers = this.movers.rows().slice(0, 10).map((r) => [r.name, r.a, r.b, r.change]);
  }
}
