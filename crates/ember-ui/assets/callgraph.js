// The call graph view: the server's pprof-style graph of the selection (`format=callgraph`:
// functions with self and total, caller → callee edges) laid out here in layers and drawn in
// SVG. A function reached from many places is one box with every caller pointing at it, which
// a flame graph splits into many frames.
//
// Layout, in the usual layered way: cycles (recursion through several functions) are broken
// by reversing the edges a depth-first walk finds going back up; each function's layer is its
// longest path from a root; edges spanning several layers get a waypoint per layer crossed;
// a few barycenter sweeps down and up order each layer to reduce crossings; boxes are packed
// left to right and each layer is centred.

import { formatValue, percent } from "./format.js";

const SVG = "http://www.w3.org/2000/svg";
const LAYER_GAP = 64;   // px between layers
const NODE_GAP = 18;    // px between boxes of a layer
const WAYPOINT = 8;     // width of an edge's waypoint in a layer it crosses
const SWEEPS = 6;
const MAX_LABEL = 48;   // characters of a function name shown in its box

function el(name, attrs = {}, text = "") {
  const e = document.createElementNS(SVG, name);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text) e.textContent = text;
  return e;
}

// The part of a function name worth showing: without arguments, the last 48 characters.
export function shortName(name) {
  const n = name.replace(/\(.*\)$/, "");
  return n.length <= MAX_LABEL ? n : "…" + n.slice(n.length - MAX_LABEL + 1);
}

// Layers and order of `graph` (the server's answer): `{rank, order, layers, back}` where
// `layers[r]` lists items (function indices, or waypoints `{edge, rank}`) left to right and
// `back[e]` says that edge `e` was reversed to break a cycle. Exported for the browser test.
export function layout(graph) {
  const n = graph.nodes.length;
  const out = Array.from({ length: n }, () => []);
  graph.edges.forEach((e, i) => { if (e.from !== e.to) out[e.from].push(i); });
  // Break cycles: a depth-first walk from the heaviest roots marks edges into a function
  // still on the walk's path as going back.
  const back = new Array(graph.edges.length).fill(false);
  const state = new Uint8Array(n); // 0 new, 1 on the path, 2 done
  const indeg = new Array(n).fill(0);
  for (const e of graph.edges) if (e.from !== e.to) indeg[e.to]++;
  // Roots first, each group heaviest first (the server sorts functions by total).
  const starts = [...Array(n).keys()].sort((a, b) => (indeg[a] === 0 ? 0 : 1) - (indeg[b] === 0 ? 0 : 1) || a - b);
  for (const s of starts) {
    if (state[s]) continue;
    const stack = [[s, 0]];
    state[s] = 1;
    while (stack.length) {
      const top = stack[stack.length - 1];
      const [v, k] = top;
      if (k < out[v].length) {
        top[1]++;
        const e = out[v][k], w = graph.edges[e].to;
        if (state[w] === 1) back[e] = true;
        else if (state[w] === 0) { state[w] = 1; stack.push([w, 0]); }
      } else {
        state[v] = 2;
        stack.pop();
      }
    }
  }
  // Longest path from the roots over the forward edges (Kahn's order).
  const fwd = graph.edges.map((e, i) => (e.from === e.to ? null : back[i] ? [e.to, e.from] : [e.from, e.to]));
  const deg = new Array(n).fill(0);
  const next = Array.from({ length: n }, () => []);
  for (const f of fwd) if (f) { deg[f[1]]++; next[f[0]].push(f[1]); }
  const rank = new Array(n).fill(0);
  const queue = [...Array(n).keys()].filter((v) => deg[v] === 0);
  for (let i = 0; i < queue.length; i++) {
    const v = queue[i];
    for (const w of next[v]) {
      rank[w] = Math.max(rank[w], rank[v] + 1);
      if (--deg[w] === 0) queue.push(w);
    }
  }
  const depth = Math.max(0, ...rank) + 1;
  const layers = Array.from({ length: depth }, () => []);
  // Heaviest first: the first sweep starts from an order that already favours them.
  for (let v = 0; v < n; v++) layers[rank[v]].push({ node: v });
  // Waypoints of edges spanning layers, one per layer crossed, chained for the sweeps.
  const chains = graph.edges.map(() => []);
  fwd.forEach((f, i) => {
    if (!f) return;
    for (let r = rank[f[0]] + 1; r < rank[f[1]]; r++) {
      const item = { edge: i, rank: r };
      layers[r].push(item);
      chains[i].push(item);
    }
  });
  // Neighbours of every item in the layer above and below.
  const ups = new Map(), downs = new Map();
  const link = (a, b) => {
    if (!downs.has(a)) downs.set(a, []);
    if (!ups.has(b)) ups.set(b, []);
    downs.get(a).push(b);
    ups.get(b).push(a);
  };
  const itemOf = layers.flat().filter((x) => x.node !== undefined).sort((a, b) => a.node - b.node);
  fwd.forEach((f, i) => {
    if (!f) return;
    const path = [itemOf[f[0]], ...chains[i], itemOf[f[1]]];
    for (let k = 1; k < path.length; k++) link(path[k - 1], path[k]);
  });
  const pos = new Map();
  const number = (layer) => layer.forEach((x, i) => pos.set(x, i));
  layers.forEach(number);
  const sweep = (layer, nbrs) => {
    const key = new Map(layer.map((x, i) => {
      const ns = nbrs.get(x) || [];
      return [x, ns.length ? ns.reduce((a, y) => a + pos.get(y), 0) / ns.length : i];
    }));
    layer.sort((a, b) => key.get(a) - key.get(b));
    number(layer);
  };
  for (let s = 0; s < SWEEPS; s++) {
    for (let r = 1; r < depth; r++) sweep(layers[r], ups);
    for (let r = depth - 2; r >= 0; r--) sweep(layers[r], downs);
  }
  return { rank, layers, back, chains, itemOf };
}

export class CallGraphView {
  // `box` is the scroll box the SVG goes in; `onPick(name)` is called when a function is
  // clicked (the Explore page picks it: table, flame graph); `onOpen(name)` on a double
  // click (back to the flame graph with it picked).
  constructor(box, { onPick, onOpen }) {
    Object.assign(this, { box, onPick, onOpen });
    this.graph = null;
    this.picked = "";
  }

  // Shows the server's answer in `unit` (null clears the view); returns the test hook's facts.
  setData(graph, unit) {
    this.graph = graph;
    this.unit = unit;
    this.box.replaceChildren();
    if (!graph || !graph.nodes.length) {
      const p = document.createElement("p");
      p.className = "muted graph-empty";
      p.textContent = "No functions in this selection.";
      this.box.append(p);
      return { nodes: 0, edges: 0 };
    }
    this.draw();
    this.setPicked(this.picked);
    return {
      nodes: graph.nodes.length, edges: graph.edges.length, total: graph.total,
      heaviest: graph.nodes[0].name, heaviestTotal: graph.nodes[0].total, drawnNodes: this.box.querySelectorAll("g.node").length,
      drawnEdges: this.box.querySelectorAll("path.edge").length, dropped: graph.dropped,
    };
  }

  // Marks the function `name` and its edges.
  setPicked(name) {
    this.picked = name;
    for (const g of this.box.querySelectorAll("g.node")) g.classList.toggle("picked", g.dataset.name === name);
    for (const p of this.box.querySelectorAll("path.edge")) {
      p.classList.toggle("hot", Boolean(name) && (p.dataset.from === name || p.dataset.to === name));
    }
  }

  draw() {
    const { graph, unit } = this;
    const total = Math.abs(graph.total) || 1;
    const { layers, back, chains, itemOf, rank } = layout(graph);
    // Box sizes: the font grows with the function's total, like pprof's boxes.
    const size = graph.nodes.map((n) => {
      const share = Math.min(1, Math.abs(n.total) / total);
      const font = 11 + Math.round(7 * Math.sqrt(share));
      const label = shortName(n.name);
      const lines = [label, `self ${formatValue(n.self, unit)} (${percent(n.self, graph.total)})`,
        `total ${formatValue(n.total, unit)} (${percent(n.total, graph.total)})`];
      const chars = Math.max(label.length * font, (lines[1].length + 2) * 11, (lines[2].length + 2) * 11);
      return { share, font, lines, w: Math.ceil(chars * 0.6) + 16, h: font + 2 * 14 + 12 };
    });
    const height = layers.map((l) => Math.max(20, ...l.map((x) => (x.node !== undefined ? size[x.node].h : 0))));
    const xy = new Map();
    let y = 16, width = 0;
    const rows = layers.map((layer, r) => {
      let x = 0;
      const row = layer.map((item) => {
        const w = item.node !== undefined ? size[item.node].w : WAYPOINT;
        const at = { item, x, w };
        x += w + NODE_GAP;
        return at;
      });
      width = Math.max(width, x);
      const top = y;
      y += height[r] + LAYER_GAP;
      return { row, top, used: x };
    });
    rows.forEach(({ row, top, used }, r) => {
      const shift = (width - used) / 2 + 16;
      for (const { item, x, w } of row) {
        const h = item.node !== undefined ? size[item.node].h : height[r];
        xy.set(item, { x: x + shift, y: top + (height[r] - h) / 2, w, h });
      }
    });
    const svg = el("svg", { width: width + 32, height: y, viewBox: `0 0 ${width + 32} ${y}`,
      class: "callgraph-svg", role: "img", "aria-label": `call graph of ${graph.nodes.length} functions` });
    const defs = el("defs");
    // Arrowheads in the graph's own units: the same size on a thin or a thick edge.
    const marker = el("marker", { id: "cg-arrow", viewBox: "0 0 10 10", refX: "10", refY: "5",
      markerUnits: "userSpaceOnUse", markerWidth: "10", markerHeight: "10", orient: "auto-start-reverse" });
    marker.append(el("path", { d: "M0,0 L10,5 L0,10 z", class: "arrow" }));
    defs.append(marker);
    svg.append(defs);
    const maxWeight = Math.max(1, ...graph.edges.map((e) => Math.abs(e.weight)));
    const edges = el("g", { class: "edges" });
    graph.edges.forEach((e, i) => {
      if (e.from === e.to) return;
      const a = xy.get(itemOf[e.from]), b = xy.get(itemOf[e.to]);
      const waypoints = chains[i].map((w) => xy.get(w));
      // A reversed edge runs bottom-up: leave from the caller's top, enter the callee's bottom.
      const up = back[i];
      const pts = [[a.x + a.w / 2, up ? a.y : a.y + a.h]];
      const mids = up ? [...waypoints].reverse() : waypoints;
      for (const m of mids) pts.push([m.x + m.w / 2, up ? m.y + m.h : m.y], [m.x + m.w / 2, up ? m.y : m.y + m.h]);
      pts.push([b.x + b.w / 2, up ? b.y + b.h : b.y]);
      let d = `M${pts[0][0]},${pts[0][1]}`;
      for (let k = 1; k < pts.length; k++) {
        const [x0, y0] = pts[k - 1], [x1, y1] = pts[k];
        const my = (y0 + y1) / 2;
        d += ` C${x0},${my} ${x1},${my} ${x1},${y1}`;
      }
      const stroke = 1 + 5 * (Math.abs(e.weight) / maxWeight);
      const from = graph.nodes[e.from].name, to = graph.nodes[e.to].name;
      const path = el("path", { d, class: "edge" + (e.residual ? " residual" : ""),
        "stroke-width": stroke.toFixed(2), "marker-end": "url(#cg-arrow)" });
      path.dataset.from = from;
      path.dataset.to = to;
      path.append(el("title", {}, `${from} → ${to}\n${formatValue(e.weight, unit)} (${percent(e.weight, graph.total)})` +
        (e.residual ? "\nthrough functions not shown" : "")));
      edges.append(path);
      // The weight next to the middle of the edge.
      const [lx, ly] = pts[Math.floor(pts.length / 2)];
      const [px, py] = pts[Math.floor(pts.length / 2) - 1];
      edges.append(el("text", { x: ((lx + px) / 2 + stroke / 2 + 4).toFixed(1), y: ((ly + py) / 2).toFixed(1), class: "edge-label" },
        formatValue(e.weight, unit)));
    });
    svg.append(edges);
    const nodes = el("g", { class: "nodes" });
    graph.nodes.forEach((n, v) => {
      const { x, y: top, w, h } = xy.get(itemOf[v]);
      const s = size[v];
      const g = el("g", { class: "node", transform: `translate(${x.toFixed(1)},${top.toFixed(1)})`, tabindex: "0" });
      g.dataset.name = n.name;
      g.dataset.layer = String(rank[v]);
      g.append(el("title", {}, `${n.name}\nself ${formatValue(n.self, unit)} (${percent(n.self, graph.total)})\n` +
        `total ${formatValue(n.total, unit)} (${percent(n.total, graph.total)})`));
      // Light grey for a small share to a strong red for the whole selection; dark text
      // reads on every step in both themes.
      const fill = `hsl(${(14 - 10 * s.share).toFixed(0)} ${(12 + 78 * s.share).toFixed(0)}% ${(90 - 28 * s.share).toFixed(0)}%)`;
      g.append(el("rect", { width: w, height: h, rx: 4, fill, class: "box" }));
      g.append(el("text", { x: 8, y: 6 + s.font, class: "fn", "font-size": s.font }, s.lines[0]));
      g.append(el("text", { x: 8, y: 6 + s.font + 15, class: "fig" }, s.lines[1]));
      g.append(el("text", { x: 8, y: 6 + s.font + 29, class: "fig" }, s.lines[2]));
      g.addEventListener("click", () => this.onPick(n.name));
      g.addEventListener("dblclick", () => this.onOpen(n.name));
      g.addEventListener("keydown", (e) => { if (e.key === "Enter") this.onOpen(n.name); });
      nodes.append(g);
    });
    svg.append(nodes);
    this.box.append(svg);
    // The graph is often wider than the box: start with the heaviest function in sight.
    const first = xy.get(itemOf[0]);
    this.box.scrollLeft = Math.max(0, first.x + first.w / 2 - this.box.clientWidth / 2);
    this.box.scrollTop = Math.max(0, first.y - 16);
  }

  // Scales the whole graph to the box's width (`fit`), or back to its natural size.
  setFit(fit) {
    this.box.classList.toggle("fit", fit);
  }
}

// The "Call graph" toggle of the Explore page: shows the view in place of the flame graph
// (state `graph=callgraph` in the URL) and loads the graph of the selection, focused on the
// zoomed call path like the flame graph, whenever the selection or the zoom changed.
export class CallGraphTab {
  // `params(extra)` gives the page's selection parameters; `state()`, `save(push)`,
  // `task(f)`, `hook` are the page's; `onToggle()` restores the flame graph's own views;
  // `onPick(name)` and `onOpen(name)` as for `CallGraphView`.
  constructor({ api, params, state, save, task, hook, unit, onToggle, onPick, onOpen }) {
    Object.assign(this, { api, params, state, save, task, hook, unit, onToggle });
    this.button = document.getElementById("graph-btn");
    this.box = document.getElementById("callgraph");
    this.note = document.getElementById("callgraph-note");
    this.fit = document.getElementById("graph-fit");
    this.view = new CallGraphView(this.box, { onPick, onOpen });
    this.loaded = "";
    this.facts = null;
    this.button.addEventListener("click", () => {
      const s = this.state();
      s.graph = s.graph === "callgraph" ? "" : "callgraph";
      this.save(true);
      this.onToggle();
    });
    this.fit.addEventListener("click", () => {
      const on = this.fit.getAttribute("aria-pressed") !== "true";
      this.fit.setAttribute("aria-pressed", String(on));
      this.view.setFit(on);
    });
  }

  on() {
    return this.state().graph === "callgraph";
  }

  // Shows or hides the view (after the flame graph's views took their places) and loads
  // the graph when what it shows changed.
  sync() {
    const on = this.on();
    this.button.setAttribute("aria-pressed", String(on));
    this.box.hidden = !on;
    this.note.hidden = !on;
    this.fit.hidden = !on;
    if (!on) { this.hook.view.callgraph = null; return; }
    document.getElementById("flame-wrap").hidden = true;
    document.getElementById("sandwich").hidden = true;
    const s = this.state();
    const p = this.params({ format: "callgraph", focus: s.zoom ? JSON.stringify(s.zoom.split(";")) : "" });
    const key = JSON.stringify([p, s.tenant]);
    if (key === this.loaded) { this.hook.view.callgraph = this.facts; return; }
    this.loaded = key;
    this.task(() => this.load(p, key));
  }

  async load(p, key) {
    this.hook.view.callgraph = null;
    let graph;
    try {
      graph = await this.api.json("/api/v1/query", p, "callgraph");
    } catch (e) {
      if (key === this.loaded) this.loaded = ""; // asked again on the next sync
      throw e;
    }
    if (key !== this.loaded) return;
    const unit = this.unit();
    const facts = this.view.setData(graph, unit);
    const shown = graph.shownSelf ?? 0;
    const d = graph.dropped || {};
    this.note.textContent = !graph.nodes.length ? "" :
      `${graph.nodes.length} of ${graph.allNodes} functions, accounting for ${formatValue(shown, unit)} ` +
      `(${percent(shown, graph.total)}) of ${formatValue(graph.total, unit)} self` +
      (d.nodes ? `; ${d.nodes} lighter functions dropped (total under ${formatValue(d.nodeCutoff, unit)} or past the first ${graph.nodes.length})` : "") +
      (d.edges ? `; ${d.edges} edges under ${formatValue(d.edgeCutoff, unit)} dropped` : "") +
      ". Click a function to pick it, double-click to see it in the flame graph; dashed edges pass through functions not shown.";
    this.view.setPicked(this.state().fn);
    this.facts = facts;
    this.hook.view.callgraph = facts;
  }

  // Marks the function picked elsewhere (the top table).
  setPicked(name) {
    this.view.setPicked(name);
  }
}
