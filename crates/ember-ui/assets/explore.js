// The Explore page: wires the controls, the URL state, the API and the views together.
// Every figure comes from the server; this module only asks and shows.

import { Api } from "./api.js";
import { CallGraphTab } from "./callgraph.js";
import { CompareView } from "./compare.js";
import { baseShare, diffColour, netShare } from "./diffcolour.js";
import { FILE_EXPORTS, linkExports, wireExports } from "./export.js";
import { filterParams, wireFilters } from "./filters.js";
import { FlameModel } from "./flame.js";
import { FlameView } from "./flamedraw.js";
import { formatTime, formatValue, percent, unitOf } from "./format.js";
import { ProfilesView } from "./profile.js";
import { noDataHint } from "./hints.js";
import { installKeys } from "./keys.js";
import { SelectorInput, matchers, setMatcher } from "./selector.js";
import { sandwich } from "./sandwich.js";
import { readState, toMs, writeState } from "./state.js";
import { currentTheme, initTheme } from "./theme.js";
import { TimeSeriesChart } from "./timeseries.js";
import { TopTable } from "./top.js";

// Marks a step of showing the view (`ember:<step>`, read by bench/ui for the breakdown of the
// first paint): only the latest of each is kept, so an auto-refreshed tab does not pile up
// marks.
function mark(step) {
  performance.clearMarks("ember:" + step);
  performance.mark("ember:" + step);
}

// Every module is loaded and has run.
mark("modules");
const $ = (id) => document.getElementById(id);
let state = readState();
// A server with auth wants a bearer token: kept for the browser tab (never in the URL).
const TOKEN_KEY = "ember-token";
const api = new Api(() => state.tenant, () => sessionStorage.getItem(TOKEN_KEY) || "");
let loading = 0;
let generation = 0;

// The test hook: what the page shows, as data (read by the browser tests); boot.js may have
// made it already, with the flame graph it drew.
const hook = (window.__ember = Object.assign(window.__ember || {}, { ready: false, loading: 0, errors: [], view: {} }));

function busy(delta) {
  loading += delta;
  hook.loading = loading;
  document.body.classList.toggle("busy", loading > 0);
  $("spinner").hidden = loading === 0;
}

// Runs `f` with the loading indicator; API errors become the status line.
async function task(f) {
  busy(1);
  try {
    return await f();
  } catch (e) {
    if (e.name !== "AbortError") {
      hook.errors.push(e.message);
      if (e.status === 401) {
        $("token-box").hidden = false;
        status("This server needs a bearer token: enter it in the Token field above. (" + e.message + ")", "error");
      } else {
        status(e.message, "error");
      }
    }
  } finally {
    busy(-1);
  }
}

function status(text, kind = "") {
  const s = $("status");
  s.textContent = text;
  s.className = kind;
  s.hidden = !text;
}

function save(push = false) {
  writeState(state, push);
}

function params(extra = {}) {
  return { query: state.query, type: state.type, from: state.from, until: state.until,
    ...filterParams(state), ...extra };
}

// The parameters of an export of the view (focused on the zoomed call path).
function exportParams(format) {
  return params({ format, focus: state.zoom ? JSON.stringify(state.zoom.split(";")) : "" });
}

// The flame graph view boot.js made (and drew, when its answer came first: the same canvas),
// or a new view of it.
const flame = (await window.__emberBoot?.flame) || new FlameView({
  wrap: $("flame-wrap"), canvas: $("flame"), spacer: $("flame-spacer"), tooltip: $("tooltip"),
});
flame.onZoom = (path) => zoomTo(path);
hook.flame = flame;
// The sandwich's two halves zoom on their own (their zoom is not part of the URL).
const halves = ["callers", "callees"].map((id) => {
  const v = new FlameView({
    wrap: $(id + "-wrap"), canvas: $(id), spacer: $(id + "-spacer"), tooltip: $(id + "-tooltip"),
    onZoom: (path) => v.setZoom(path),
  });
  return v;
});
hook.sandwich = halves;
const chart = new TimeSeriesChart($("timeseries"), $("ts-tooltip"), (a, b) => {
  state.from = String(a);
  state.until = String(b);
  save(true);
  syncControls();
  loadAll();
});
const top = new TopTable($("top"), $("top-filter"), {
  onPick: (name) => pickFunction(name),
  onSort: (key) => { state.sort = key; save(); },
  onFilter: (text) => { state.filter = text; save(); },
});
const selectorInput = new SelectorInput($("selector"), $("suggest"), {
  names: labelNamesWithCardinality,
  values: (name) => api.json(`/api/v1/label/${encodeURIComponent(name)}/values`,
    { type: state.type, from: state.from, until: state.until }, "values"),
  onCommit: (text) => { state.query = text.trim() || "{}"; state.zoom = ""; save(true); syncControls(); loadAll(); },
});

// The label names of the time range, each with its number of values (its cardinality),
// asked for at most `MAX_CARDINALITY_QUERIES` names at once.
const MAX_CARDINALITY_QUERIES = 40;
async function labelNamesWithCardinality() {
  const range = { type: state.type, from: state.from, until: state.until };
  const names = (await api.json("/api/v1/labels", range, "names")).filter((n) => !n.startsWith("__"));
  const counts = await Promise.all(names.slice(0, MAX_CARDINALITY_QUERIES).map((n) =>
    api.json(`/api/v1/label/${encodeURIComponent(n)}/values`, range, "card-" + n).then((v) => v.length, () => null)));
  return names.map((value, i) => ({ value, note: counts[i] == null ? "" : `${counts[i]} values` }));
}

const compare = new CompareView({ api, state: () => state, save, task, status, hook });
const graph = new CallGraphTab({
  api, params, state: () => state, save, task, hook, unit: () => unitOf(state.type),
  onToggle: () => showSandwich(),
  onPick: (name) => pickFunction(state.fn === name ? "" : name),
  onOpen: (name) => { state.graph = ""; pickFunction(name); graph.sync(); },
});
const profiles = new ProfilesView({ api, state: () => state, save, task, hook, chart, reload: () => { syncControls(); loadAll(); } });

// Shows Explore or Compare (`state.page`).
function showPage() {
  const on = state.page === "compare";
  const single = !on && profiles.active();
  $("explore").hidden = on || single;
  $("profile-view").hidden = !single;
  $("compare").hidden = !on;
  $("page-explore").setAttribute("aria-pressed", String(!on));
  $("page-compare").setAttribute("aria-pressed", String(on));
  document.title = on ? "Ember · Compare" : "Ember · Explore";
  hook.view.page = on ? "compare" : single ? "profile" : "explore";
}

// The whole selection's flame graph (the model of the server's answer; `fullModel` is the
// same once shown); the view may show a focused answer instead.
let full = null, fullModel = null;
// Whether the server cut the whole graph at its node limit (it names the rest "other"): then
// a zoom asks the server for the subtree, so nothing under it stays hidden.
let fullTruncated = false;

function zoomTo(path) {
  state.zoom = path.join(";");
  save(true);
  task(() => applyZoom(path));
}

// Resolves once the browser has had a frame to show what was drawn (or after 100 ms, as in a
// hidden tab, which has no frames).
function nextFrame() {
  return new Promise((resolve) => {
    requestAnimationFrame(() => setTimeout(resolve, 0));
    setTimeout(resolve, 100);
  });
}

// The selection's flame graph from the server, as a model (the binary format: no JSON to
// parse), with `extra` parameters (a focus); marks the time its bytes arrived and its model
// was made, for the benchmark.
async function flameAnswer(extra, key) {
  const p = params({ format: "flamebearer-bin", maxNodes: state.maxNodes, ...extra });
  const early = await api.bootModel("/api/v1/query", p);
  if (early) {
    mark(key + "-answer");
    return early;
  }
  const bytes = await api.buffer("/api/v1/query", p, key);
  mark(key + "-answer");
  const model = FlameModel.decode(bytes);
  mark(key + "-model");
  return model;
}

// Shows the graph zoomed to `path`: on the whole graph, or on the server's answer focused on
// the path when the whole one was cut.
async function applyZoom(path) {
  if (!full) return;
  let focused = null;
  if (fullTruncated && path.length) {
    let model;
    try {
      model = await flameAnswer({ focus: JSON.stringify(path) }, "focus");
    } catch (e) {
      if (e.name === "AbortError") return; // a newer zoom took over
      throw e;
    }
    if (state.zoom !== path.join(";")) return; // a newer zoom is on its way
    if (model.total) focused = model;
  }
  flame.batch(() => showZoom(path, focused));
  hook.view.drawn = flame.stats.drawn;
}

// Shows `path` zoomed in the whole graph, or in `focused` (the server's answer focused on
// it); one redraw when called in a batch.
function showZoom(path, focused) {
  const unit = unitOf(state.type);
  if (focused) {
    flame.setData(focused, unit, full.total);
    // A pushed diff's shares and colours stay of the whole base, not of the subtree.
    if (focused.double) Object.assign(flame.model, { leftTicks: full.leftTicks, rightTicks: full.rightTicks });
  } else if (flame.model !== fullModel) {
    flame.setData(full, unit);
    fullModel = flame.model;
  }
  flame.focused = Boolean(focused);
  flame.setZoom(path);
  flame.setFunction(state.fn);
  showCrumbs();
  showSearch();
}

// The note over the flame graph when the selection holds a pushed `pprof -diff_base` profile
// (the server answers it as a `double` graph: base → new): what is drawn, and against what
// its shares are (the base's total, as `go tool pprof` reads the file).
function showDiffNote(model, unit) {
  const note = $("diff-note");
  hook.view.diff = null;
  note.hidden = !model?.double;
  if (note.hidden) return;
  const { leftTicks: base, rightTicks: now } = model;
  note.replaceChildren();
  const scale = document.createElement("span");
  scale.className = "scale";
  scale.setAttribute("aria-hidden", "true");
  for (const [a, b] of [[1, 0], [1, 1], [0, 1]]) {
    const s = document.createElement("span");
    s.className = "swatch";
    s.style.background = diffColour(a, b);
    scale.append(s);
  }
  // The widest frame under the root, and its change as a share of the base (Go's cum%).
  const top = model.topFrame(), [d, i] = model.find([top]);
  const share = d ? netShare(model, model.levels[d], i) : 0;
  note.append(
    "This selection holds a pushed diff profile (pprof -diff_base): base " +
    `${formatValue(base, unit)} → new ${formatValue(now, unit)}, drawn as a differential flame graph`,
    scale,
    ` (less ← change → more in the new profile). Shares are of the base's total, as go tool pprof reads it: ` +
    `${top} ${baseShare(share, 1)}.`,
  );
  hook.view.diff = {
    double: true, leftTicks: base, rightTicks: now, topFrame: top,
    topShare: 100 * share, text: note.textContent,
  };
}

function pickFunction(name) {
  state.fn = name;
  if (!name) state.mode = "";
  save(true);
  flame.setFunction(name);
  top.set({ picked: name });
  graph.setPicked(name);
  showSearch();
  showSandwich();
}

// The callers and callees of the chosen function, in place of the whole graph.
function showSandwich() {
  const on = state.mode === "sandwich" && Boolean(state.fn) && Boolean(fullModel);
  $("sandwich-btn").disabled = !state.fn;
  $("focus-fn-btn").disabled = !state.fn || state.fn === state.ffn;
  $("sandwich-btn").setAttribute("aria-pressed", String(on));
  $("flame-wrap").hidden = on;
  $("sandwich").hidden = !on;
  graph.sync(); // the call graph, when on, takes the place of both
  hook.view.sandwich = null;
  if (!on) return;
  const s = sandwich(fullModel, state.fn);
  const [callers, callees] = halves;
  $("sandwich-fn").textContent = state.fn;
  callers.setData(s.total ? s.callers : null, flame.unit);
  callers.setFlipped(true);
  callees.setData(s.total ? s.callees : null, flame.unit);
  callees.setFlipped(false);
  for (const h of halves) h.setSearch(state.search);
  hook.view.sandwich = {
    fn: state.fn, total: s.total,
    callers: callers.model ? callers.model.nodeCount : 0,
    callees: callees.model ? callees.model.nodeCount : 0,
    nearestCaller: callers.model ? callers.model.topFrame() : "",
    heaviestCallee: callees.model ? callees.model.topFrame() : "",
  };
}

function showCrumbs() {
  const crumbs = $("crumbs");
  crumbs.replaceChildren();
  const path = flame.model ? flame.model.path(...flame.zoom) : [];
  const add = (label, target) => {
    const b = document.createElement("button");
    b.textContent = label;
    b.title = label;
    b.addEventListener("click", () => zoomTo(target));
    crumbs.append(b);
  };
  add("all", []);
  path.forEach((name, i) => add(name, path.slice(0, i + 1)));
  $("reset").disabled = path.length === 0;
  hook.view.zoom = path;
  hook.view.focused = Boolean(flame.focused);
  hook.view.viewNodes = flame.model ? flame.model.nodeCount : 0;
  // The exports are of the view: the zoomed subtree when zoomed.
  linkExports(api, "/api/v1/query", FILE_EXPORTS, exportParams);
  graph.sync();
}

function showSearch() {
  const r = flame.setSearch(state.search);
  if (state.mode === "sandwich") for (const h of halves) h.setSearch(state.search);
  const out = $("search-result");
  $("search").classList.toggle("invalid", Boolean(r?.error));
  if (!r) out.textContent = "";
  else if (r.error) out.textContent = "invalid regex: " + r.error;
  else out.textContent = `${r.count} frames, ${(100 * r.share).toFixed(2)} % of the view`;
  hook.view.search = r;
  const fn = flame.fnMarks;
  hook.view.fn = state.fn ? { name: state.fn, count: fn ? fn.count : 0 } : null;
  hook.view.drawn = flame.stats.drawn;
}

function syncControls() {
  $("selector").value = state.query;
  $("search").value = state.search;
  $("view").textContent = state.view === "flame" ? "Icicle" : "Flame";
  $("tenant").value = state.tenant;
  $("auto-refresh").value = state.refresh;
  for (const b of document.querySelectorAll("#presets button")) {
    b.classList.toggle("on", state.from === "now-" + b.dataset.range && state.until === "now");
  }
  const now = Date.now();
  $("from").value = localInput(toMs(state.from, now));
  $("until").value = localInput(toMs(state.until, now));
  const service = matchers(state.query).find((m) => m.name === "service_name" && m.op === "=");
  $("service").value = service ? service.value : "";
  showPage();
  compare.sync();
  syncFilters();
}

function localInput(ms) {
  return formatTime(ms).replace(" ", "T");
}

async function loadTypes() {
  const types = await api.json("/api/v1/profile_types");
  const sel = $("type");
  sel.replaceChildren(...types.map((t) => new Option(t.split(":").slice(0, 3).join(":"), t)));
  // By default CPU time (`…:cpu:nanoseconds:…`), else the first type.
  if (!types.includes(state.type)) state.type = types.find((t) => t.split(":")[1] === "cpu") || types[0] || "";
  sel.value = state.type;
  save();
  return types;
}

// The services with how much data each has in the time range (from the time series grouped
// by service_name, so one request answers both).
async function loadServices() {
  const sel = $("service");
  const answer = await api.json("/api/v1/timeseries",
    { type: state.type, from: state.from, until: state.until, groupBy: "service_name" }, "services");
  const totals = answer.series.map((s) => [s.labels.service_name || "", s.points.reduce((a, p) => a + p[1], 0)])
    .sort((a, b) => b[1] - a[1]);
  const unit = unitOf(state.type);
  const options = [new Option(`all services (${totals.length})`, "")];
  for (const [name, total] of totals) options.push(new Option(`${name || "(none)"} — ${formatValue(total, unit)}`, name));
  const current = matchers(state.query).find((m) => m.name === "service_name" && m.op === "=");
  if (current && !totals.some(([n]) => n === current.value)) {
    options.push(new Option(`${current.value} — no data`, current.value));
  }
  sel.replaceChildren(...options);
  sel.value = current ? current.value : "";
  hook.view.services = totals.map(([n]) => n);
}

// The legend of the time series: a series per value of the group-by label (a click narrows
// the selector to it), or the total.
function showLegend(entries, unit) {
  const legend = $("legend");
  legend.replaceChildren();
  for (const e of entries) {
    const b = document.createElement("button");
    const swatch = document.createElement("span");
    swatch.className = "swatch";
    swatch.style.background = e.colour || "var(--accent)";
    b.append(swatch, `${e.label} — ${formatValue(e.total, unit)}`);
    const value = e.labels?.[state.groupBy];
    if (state.groupBy && value !== undefined) {
      b.title = `Only ${state.groupBy}="${value}"`;
      b.dataset.value = value;
      b.addEventListener("click", () => {
        state.query = setMatcher(state.query, state.groupBy, value);
        state.zoom = "";
        save(true);
        syncControls();
        loadAll();
      });
    } else {
      b.disabled = true;
    }
    legend.append(b);
  }
  hook.view.legend = entries.map((e) => [e.label, e.total]);
}

// The label names the time series can be grouped by.
async function loadGroupBy() {
  const names = await api.json("/api/v1/labels", { type: state.type, from: state.from, until: state.until }, "group-by");
  const sel = $("group-by");
  const shown = names.filter((n) => !n.startsWith("__"));
  if (state.groupBy && !shown.includes(state.groupBy)) shown.push(state.groupBy);
  sel.replaceChildren(new Option("nothing", ""), ...shown.map((n) => new Option(n, n)));
  sel.value = state.groupBy;
}

// The chart, flame graph and top table of the current selection; `types` is the promise of
// the tenant's profile types (an empty answer's hint depends on whether there are any).
async function loadView(types) {
  mark("view");
  const gen = ++generation;
  const unit = unitOf(state.type);
  const now = Date.now();
  // The flame graph is drawn as soon as it is here; the chart when its answer is.
  const series = api.json("/api/v1/timeseries", params({ groupBy: state.groupBy }), "series");
  series.catch(() => {}); // awaited below
  const model = await flameAnswer({}, "flame");
  if (gen !== generation) return;
  const empty = !model.total;
  full = empty ? null : model;
  fullTruncated = !empty && model.names.includes("other");
  const path = state.zoom ? state.zoom.split(";") : [];
  // One redraw for the data, the orientation, the zoom, the search and the chosen function.
  flame.batch(() => {
    flame.focused = false;
    // boot.js may have drawn this very model already.
    if (!full || flame.model !== full) flame.setData(full, unit);
    fullModel = flame.model;
    flame.setFlipped(state.view === "flame");
    if (full) showZoom(path, null);
    else { showCrumbs(); showSearch(); }
  });
  mark("flame-drawn");
  hook.view.drawn = flame.stats.drawn;
  // Let the browser show the flame graph before the chart, the lists and the table are made.
  await nextFrame();
  if (gen !== generation) return;
  if (empty) {
    const count = (await types).length;
    if (gen !== generation) return;
    status(noDataHint({ what: `of ${state.type || "any type"} match ${state.query}`, tenant: state.tenant,
      types: count }), "empty");
  } else {
    status("");
  }
  // Cut by the node limit: the zoomed part comes focused from the server.
  if (fullTruncated && path.length) await applyZoom(path);
  if (gen !== generation) return;
  showSandwich();
  const totals = empty ? "" : model.double
    ? `base ${formatValue(model.leftTicks, unit)}, new ${formatValue(model.rightTicks, unit)}, `
    : `total ${formatValue(model.total, unit)}, `;
  $("total").textContent = empty ? "" : totals +
    `${fullModel.nodeCount} nodes` + (fullTruncated ? " (the server's node limit: zoom to see every frame below)" : "");
  showDiffNote(empty ? null : fullModel, unit);
  hook.view.topFrame = fullModel ? fullModel.topFrame() : "";
  hook.view.nodes = fullModel ? fullModel.nodeCount : 0;
  hook.view.truncated = fullTruncated;
  hook.view.total = model.total;
  hook.view.fromBoot = [...api.fromBoot];
  const answer = await series;
  if (gen !== generation) return;
  showLegend(chart.setData(answer, toMs(state.from, now), toMs(state.until, now), unit, state.groupBy), unit);
  // The individual profiles of the range (the list and the chart's points), meanwhile.
  const listed = profiles.loadList(params()).catch((e) => {
    if (e.name !== "AbortError") { hook.errors.push(e.message); status(e.message, "error"); }
  });
  top.set({ data: null, unit, sort: state.sort, filter: state.filter, picked: state.fn });
  if (!empty) {
    const table = await api.json("/api/v1/query", params({ format: "top-json" }), "top");
    if (gen !== generation) return;
    top.set({ data: table, unit: unitOf(state.type) });
    hook.view.topRows = table.rows.length;
  }
  await listed;
}

// Auto-refresh: reloads the view every `state.refresh` seconds while its range ends "now"
// (an absolute range does not change, so it is not reloaded).
let refreshTimer = 0;
function armRefresh() {
  clearInterval(refreshTimer);
  refreshTimer = 0;
  const secs = Number(state.refresh);
  if (secs > 0) {
    refreshTimer = setInterval(() => {
      if (state.until === "now" && loading === 0 && !document.hidden) loadAll();
    }, secs * 1000);
  }
  hook.view.refresh = secs || 0;
}

async function loadAll() {
  hook.ready = false;
  hook.loads = (hook.loads || 0) + 1;
  selectorInput.forget(); // the range or the type may have changed: new lists of values
  await task(async () => {
    status("");
    const types = loadTypes();
    if (state.page === "compare") {
      await types;
      await Promise.all([loadServices(), compare.load()]);
      return;
    }
    if (profiles.active()) {
      await types;
      await Promise.all([loadServices(), profiles.load()]);
      return;
    }
    // With the type in the address (as the page writes it), the flame graph is asked for at
    // once, not after the list of types: it is the slowest answer. Asked again if the type
    // turns out to be gone (the newer load supersedes the early one).
    const type = state.type;
    const early = type ? loadView(types) : null;
    early?.catch(() => {}); // awaited below; not an unhandled rejection meanwhile
    await types;
    await (early && state.type === type ? early : loadView(types));
    // The lists of services and labels after the flame graph: the server's cores are its.
    await Promise.all([loadServices(), loadGroupBy()]);
  });
  api.forgetEarly();
  hook.ready = true;
}

// The frame filters' controls; a change re-asks the server (paths change: the zoom is reset).
const syncFilters = wireFilters({
  $,
  get: () => state,
  apply: () => { state.zoom = ""; save(true); syncControls(); loadAll(); },
});

function wire() {
  $("type").addEventListener("change", (e) => {
    state.type = e.target.value;
    state.zoom = "";
    save(true);
    loadAll();
  });
  $("service").addEventListener("change", (e) => {
    state.query = setMatcher(state.query, "service_name", e.target.value);
    // A comparison's own selectors follow the service too.
    for (const k of ["lquery", "rquery"]) if (state[k]) state[k] = setMatcher(state[k], "service_name", e.target.value);
    state.zoom = "";
    state.czoom = "";
    save(true);
    syncControls();
    loadAll();
  });
  $("group-by").addEventListener("change", (e) => {
    state.groupBy = e.target.value;
    save(true);
    loadAll();
  });
  for (const b of document.querySelectorAll("#presets button")) {
    b.addEventListener("click", () => {
      state.from = "now-" + b.dataset.range;
      state.until = "now";
      save(true);
      syncControls();
      loadAll();
    });
  }
  $("apply-range").addEventListener("click", () => {
    const a = new Date($("from").value).getTime(), b = new Date($("until").value).getTime();
    if (!(a < b)) { status("the start of the range must be before its end", "error"); return; }
    state.from = String(a);
    state.until = String(b);
    save(true);
    syncControls();
    loadAll();
  });
  $("refresh").addEventListener("click", () => loadAll());
  $("auto-refresh").addEventListener("change", (e) => {
    state.refresh = e.target.value;
    save();
    armRefresh();
  });
  // The PNG is of what is drawn: the sandwich's two halves when it is shown.
  wireExports({ api, task, path: "/api/v1/query", files: FILE_EXPORTS, params: exportParams, pngId: "export-png",
    canvases: () => ($("sandwich").hidden ? [$("flame")] : [$("callers"), $("callees")]) });
  $("search").addEventListener("input", (e) => { state.search = e.target.value; save(); showSearch(); });
  $("reset").addEventListener("click", () => zoomTo([]));
  $("sandwich-btn").addEventListener("click", () => {
    state.mode = state.mode === "sandwich" ? "" : "sandwich";
    save(true);
    showSandwich();
  });
  $("view").addEventListener("click", () => {
    state.view = state.view === "flame" ? "icicle" : "flame";
    save(true);
    syncControls();
    flame.setFlipped(state.view === "flame");
  });
  for (const [id, page] of [["page-explore", ""], ["page-compare", "compare"]]) {
    $(id).addEventListener("click", () => {
      if (state.page === page) return;
      state.page = page;
      save(true);
      syncControls();
      loadAll();
    });
  }
  $("token").addEventListener("change", (e) => {
    sessionStorage.setItem(TOKEN_KEY, e.target.value.trim());
    state.type = "";
    loadAll();
  });
  $("tenant").addEventListener("change", (e) => { state.tenant = e.target.value.trim(); state.type = ""; save(true); loadAll(); });
  const onCompare = () => state.page === "compare";
  installKeys({
    search: () => $(onCompare() ? "cmp-search" : "search").focus(),
    zoom: () => (onCompare() ? state.czoom : state.zoom),
    zoomTo: (path) => (onCompare() ? compare.zoomTo(path) : zoomTo(path)),
  });
  // Canvases read the theme's colours when they draw: a theme change redraws them.
  initTheme($("theme"), () => {
    for (const v of [flame, ...halves, compare.flame, chart]) v.draw();
    hook.view.theme = currentTheme();
  });
  window.addEventListener("popstate", () => { state = readState(); syncControls(); armRefresh(); loadAll(); });
}

wire();
$("token-box").hidden = !sessionStorage.getItem(TOKEN_KEY);
syncControls();
armRefresh();
loadAll();
