// The page's first steps, run inline at the top of the page (the server puts this file's text
// into the page, `ember_ui::page`, so no round trip comes before them):
//  - it sends the view's first requests at once (the binary flame graph of the view in the
//    address; on a first visit, with no type in the address, the list of types first; with
//    `api.js`'s headers) and leaves them in `window.__emberBoot.requests` by URL, where
//    `api.js` takes an answer instead of asking again when its URL and headers are the same;
//  - for a plain view (the whole graph as an icicle, nothing searched, zoomed or chosen) it
//    loads only the three modules that draw a flame graph, makes the page's flame graph view
//    (`window.__emberBoot.flame`, a promise) and draws the answer as soon as it is in; with
//    no node limit (or a limit above `PRUNE_ABOVE`) it first asks for, and draws, only the
//    nodes wide enough to be drawn (`minShare`), then asks for the whole tree, which the
//    page shows (the same pixels) once it is in;
//  - then it loads the page itself (`explore.js`, which takes over the same view and model):
//    after that first draw, so nothing else competes with it for the page's thread, the
//    server's cores or the browser's connections; at once for any other view (Compare, a
//    single profile, a zoom, a search ...), which boot.js does not draw. Should the answer be
//    slow, the page loads anyway after `PAGE_AFTER_MS`, so its controls are never held back
//    long by a slow query.
// A request made here that nobody takes costs the server one answer and nothing else.
"use strict";
(() => {
  const PAGE_AFTER_MS = 400;
  const p = new URLSearchParams(location.search);
  const get = (k, d = "") => (p.has(k) ? p.get(k) : d);
  const requests = new Map();
  const boot = (window.__emberBoot = { requests, flame: null });
  // Loads the page's code (once). Relative to the page: this script is inline.
  let page = null;
  const loadPage = () => (page ??= import("./ui/explore.js"));
  // Fetches (without running) the page's modules, all at once rather than one import level
  // after another: for a plain view once the first view is drawn (compiling them would take
  // the page's thread, and a busy machine's CPU, from the drawing; they are in by the time
  // the page's code is asked for, two frames later), at once for any other view.
  const MODULES = ["explore", "diffcolour", "api", "state", "selector", "timeseries", "top", "filters", "keys", "theme",
    "hints", "sandwich", "compare", "movers", "export", "callgraph", "profile"];
  let preloaded = false;
  const preload = () => {
    if (preloaded) return;
    preloaded = true;
    for (const m of MODULES) {
      const link = document.createElement("link");
      link.rel = "modulepreload";
      link.href = `ui/${m}.js`;
      document.head.append(link);
    }
  };
  // The pages that start with something else than the selection's flame graph.
  if (get("page") || get("profile")) return void loadPage();
  // The headers of `api.js`: the tenant of the address, the tab's bearer token.
  const headers = {};
  if (get("tenant")) headers["X-Scope-OrgID"] = get("tenant");
  let token = "";
  try { token = sessionStorage.getItem("ember-token") || ""; } catch { /* storage off */ }
  if (token) headers["Authorization"] = "Bearer " + token;
  // `api.js`'s URL of `path` with `params`, empty values left out, in the same order.
  const url = (path, params) => {
    const q = new URLSearchParams();
    for (const [k, v] of params) if (v !== "") q.set(k, v);
    const s = q.toString();
    return path + (s ? "?" + s : "");
  };
  // Sends `u` (or takes `promise`, a Response on its way) and keeps it for `api.js`.
  const ask = (u, promise = null) => {
    const ctl = new AbortController();
    promise ??= fetch(u, { headers, signal: ctl.signal });
    promise.catch(() => {}); // whoever takes it sees the error; nobody else must
    const e = { promise, ctl, headers: JSON.stringify(headers) };
    requests.set(u, e);
    return e;
  };
  // `explore.js`'s `params()`: the selection, then the frame filters (`filters.js`).
  const selection = (type) => [
    ["query", get("query", "{}")], ["type", type], ["from", get("from", "now-1h")], ["until", get("until", "now")],
    ["hide", get("hide")], ["collapseRecursion", get("rec") ? "true" : ""], ["dropBelow", get("below")],
    ["focusFunction", get("ffn")],
  ];
  const plain = ["zoom", "search", "fn", "mode", "graph"].every((k) => !get(k)) && get("view") !== "flame";
  // The code that draws a plain view (the page imports the same modules), asked for once the
  // first request is out.
  let drawing = null;
  // The page's body has been parsed and its style sheet applied (what a FlameView measures).
  const laidOut = () => new Promise((resolve) => {
    const styled = () => {
      const css = document.querySelector('link[rel="stylesheet"]');
      if (!css || css.sheet) return resolve();
      css.addEventListener("load", resolve, { once: true });
      css.addEventListener("error", resolve, { once: true });
    };
    if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", styled, { once: true });
    else styled();
  });
  // A big answer (no node limit, or one above this many nodes) is asked for in two steps: first
  // only the nodes wide enough to be drawn at the window's width (`minShare`: a frame under
  // 0.35 px is never drawn, see flamedraw.js, and the graph is never wider than the window),
  // each in its place, then the whole tree, which the page shows once it is in: the same
  // pixels, with every node under them.
  const PRUNE_ABOVE = 10000;
  const limit = get("maxNodes");
  const big = limit !== "" && (Number(limit) === 0 || Number(limit) > PRUNE_ABOVE);
  // The model of an answer (a Response on its way), drawn on the page's flame graph view
  // unless something was drawn there first; null for an answer that failed.
  const drawAnswer = async (promise, type, ctl) => {
    const res = await promise;
    if (!res.ok) return null;
    const [bytes, [{ FlameModel }, , { unitOf }], flame] = await Promise.all([res.arrayBuffer(), drawing, boot.flame]);
    const model = FlameModel.decode(bytes);
    if (flame && model.total && !flame.model && !ctl.signal.aborted) {
      flame.setData(model, unitOf(type));
      performance.mark("ember:boot-drawn");
      // The page's test hook, as explore.js makes it, showing what is drawn already.
      window.__ember ??= { ready: false, loading: 0, errors: [], view: {} };
      window.__ember.flame = flame;
    }
    return model;
  };
  // The view's flame graph: asked for, and for a plain view, drawn.
  const view = (type) => {
    const whole = url("/api/v1/query", [...selection(type), ["format", "flamebearer-bin"], ["maxNodes", limit]]);
    if (!plain || !big) {
      const e = ask(whole);
      if (!plain) return;
      // The model `api.js` takes (drawn here unless the page drew something first), null for
      // an answer that failed, which `api.js` takes unread and reports.
      e.model = drawAnswer(e.promise, type, e.ctl).catch(() => null);
      // The page's code after the frame that shows the graph.
      e.model.then(() => {
        preload();
        requestAnimationFrame(() => requestAnimationFrame(() => setTimeout(loadPage, 0)));
      });
      return;
    }
    const share = (0.3 / Math.max(1, window.innerWidth)).toPrecision(3);
    const firstCtl = new AbortController();
    const first = fetch(`${whole}&minShare=${share}`, { headers, signal: firstCtl.signal });
    const drawn = drawAnswer(first, type, firstCtl).catch(() => null);
    // The whole tree once the first view is drawn (or could not be): what `api.js` takes. A
    // `double` first answer (the selection holds a pushed diff profile, which the server
    // answers whole, `minShare` or not) is the whole tree already: nothing more is asked.
    let send;
    const e = ask(whole, new Promise((resolve) => { send = resolve; }).then((skip) => skip
      ? Promise.reject(new DOMException("the first answer was the whole diff", "AbortError"))
      : fetch(whole, { headers, signal: e.ctl.signal })));
    const rest = e.promise.then((res) => (res.ok ? res.arrayBuffer() : null)).then(async (bytes) => {
      if (!bytes) return null;
      const [{ FlameModel }] = await drawing;
      return FlameModel.decode(bytes);
    }).catch(() => null);
    e.model = drawn.then((m) => (m?.double ? m : rest));
    // The whole tree, the module preloads and the page's code wait for the frame that shows
    // the first view: started at once, their download and parsing held that frame back
    // (~80 ms between the draw and its paint in the quiet bench).
    drawn.then((m) => {
      requestAnimationFrame(() => requestAnimationFrame(() => {
        send(Boolean(m?.double));
        preload();
        setTimeout(loadPage, 0);
      }));
    });
  };
  // Once the first request is out: for a plain view, the code that draws and the page's flame
  // graph view (the one `explore.js` uses), made as soon as that code is in and the page laid
  // out (the page's code follows the first draw); for any other view, the page's code.
  const draw = () => {
    if (!plain) {
      loadPage();
      preload();
      return;
    }
    setTimeout(loadPage, PAGE_AFTER_MS);
    drawing = Promise.all(["flame", "flamedraw", "format"].map((m) => import(`./ui/${m}.js`)));
    drawing.catch(() => loadPage()); // the page reports what failed
    boot.flame = Promise.all([drawing, laidOut()]).then(([[, { FlameView }]]) => {
      const $ = (id) => document.getElementById(id);
      return new FlameView({ wrap: $("flame-wrap"), canvas: $("flame"), spacer: $("flame-spacer"),
        tooltip: $("tooltip"), onZoom: () => {} });
    }).catch(() => null);
  };
  const TYPES = "/api/v1/profile_types";
  if (get("type")) {
    view(get("type"));
    draw();
    return;
  }
  // A first visit: the type the page will pick (CPU time, else the first) once the list is
  // here. The page gets the list only after the view's requests are sent, so it finds them.
  ask(TYPES, fetch(TYPES, { headers }).then(async (res) => {
    const text = await res.text();
    try {
      const list = res.ok ? JSON.parse(text) : null;
      if (Array.isArray(list) && list.length) view(list.find((t) => String(t).split(":")[1] === "cpu") || list[0]);
      else loadPage();
    } catch { loadPage(); /* the page reports a bad answer */ }
    return new Response(text, { status: res.status, statusText: res.statusText, headers: res.headers });
  }).catch((err) => { loadPage(); throw err; }));
  draw();
})();
