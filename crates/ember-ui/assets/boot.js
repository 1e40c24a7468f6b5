// The page's first requests, sent while the modules still load: a classic script at the top
// of the page (it runs before the parser reaches anything else), so the flame graph, the
// slowest answer, is on its way ~200 ms sooner than if `explore.js` asked for it once every
// module had arrived and run. It asks for exactly what the Explore page's first load asks for
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
    ask(url("/api/v1/query", [...selection(type), ["format", "flamebearer-bin"], ["maxNodes", get("maxNodes")]]));
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
