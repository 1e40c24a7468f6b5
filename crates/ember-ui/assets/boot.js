// The page's first requests, sent while the modules still load: a classic script at the top
// of the page (it runs before the parser reaches anything else), so the flame graph, the
// slowest answer, is on its way ~200 ms sooner than if `explore.js` asked for it once every
// module had arrived and run; and draws a plain view's flame graph as soon as it can. It asks
// for exactly what the Explore page's first load asks for
// (the binary flame graph of the view in the address, and on a first visit, with no type in
// the address, the list of types first; with the same headers) and leaves the answers in
// `window.__emberBoot.requests` by URL;
// `api.js` takes an answer from there instead of asking again when its URL and headers are
// the same. Anything else (Compare, a single profile, a changed view) asks the usual way, so
// a request made here that nobody takes costs the server one answer and nothing else.
"use strict";
(() => {
  const p = new URLSearchParams(location.search);
  const get = (k, d = "") => (p.has(k) ? p.get(k) : d);
  // The pages that start with something else than the selection's flame graph.
  if (get("page") || get("profile")) return;
  const requests = new Map();
  window.__emberBoot = { requests };
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
    requests.set(u, { promise, ctl, headers: JSON.stringify(headers) });
  };
  // `explore.js`'s `params()`: the selection, then the frame filters (`filters.js`).
  const selection = (type) => [
    ["query", get("query", "{}")], ["type", type], ["from", get("from", "now-1h")], ["until", get("until", "now")],
    ["hide", get("hide")], ["collapseRecursion", get("rec") ? "true" : ""], ["dropBelow", get("below")],
    ["focusFunction", get("ffn")],
  ];
  // Only the flame graph: the chart and the lists are not needed for the first paint, and
  // while the modules load, every request held open takes one of the browser's six
  // connections to the server away from them.
  const view = (type) => {
    const u = url("/api/v1/query", [...selection(type), ["format", "flamebearer-bin"], ["maxNodes", get("maxNodes")]]);
    ask(u);
    // A plain view (the whole graph, icicle, nothing searched or chosen) is drawn from here
    // as soon as its answer and the three modules that draw it are in, without waiting for
    // the other nineteen and explore.js; explore.js then takes over the same view and model.
    const plain = ["zoom", "search", "fn", "mode", "graph"].every((k) => !get(k)) && get("view") !== "flame";
    if (plain) requests.get(u).model = drawn(requests.get(u).promise, type).catch(() => null);
  };
  // The page's body has been parsed and its style sheet applied (what a FlameView measures).
  const laidOut = () => new Promise((resolve) => {
    const styled = () => {
      const css = document.querySelector('link[rel="stylesheet"]');
      if (!css || css.sheet) return resolve();
      css.addEventListener("load", resolve, { once: true });
      css.addEventListener("error", resolve, { once: true });
    };
    if (document.readyState === "loading") document.addEventListener("readystatechange", styled, { once: true });
    else styled();
  });
  // The model of a successful answer, drawn on the page's flame graph canvas unless
  // explore.js already runs (then it draws); null for any other answer, which `api.js` takes
  // unread and reports.
  const drawn = async (promise, type) => {
    const res = await promise;
    if (!res.ok) return null;
    const [bytes, { FlameModel }, { FlameView }, { unitOf }] = await Promise.all([res.arrayBuffer(),
      import("./flame.js"), import("./flamedraw.js"), import("./format.js")]);
    const model = FlameModel.decode(bytes);
    await laidOut();
    if (window.__ember || !model.total) return model;
    const $ = (id) => document.getElementById(id);
    const flame = new FlameView({ wrap: $("flame-wrap"), canvas: $("flame"), spacer: $("flame-spacer"),
      tooltip: $("tooltip"), onZoom: () => {} });
    flame.setData(model, unitOf(type));
    performance.mark("ember:boot-drawn");
    window.__emberBoot.flame = flame;
    // The page's test hook, as explore.js makes it, showing what is drawn already.
    window.__ember = { ready: false, loading: 0, errors: [], view: {}, flame };
    return model;
  };
  const TYPES = "/api/v1/profile_types";
  if (get("type")) {
    view(get("type"));
    return;
  }
  // A first visit: the type the page will pick (CPU time, else the first) once the list is
  // here. The page gets the list only after the view's requests are sent, so it finds them.
  ask(TYPES, fetch(TYPES, { headers }).then(async (res) => {
    const text = await res.text();
    try {
      const list = res.ok ? JSON.parse(text) : null;
      if (Array.isArray(list) && list.length) view(list.find((t) => String(t).split(":")[1] === "cpu") || list[0]);
    } catch { /* the page reports a bad answer */ }
    return new Response(text, { status: res.status, statusText: res.statusText, headers: res.headers });
  }));
})();
