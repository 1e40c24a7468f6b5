// The view lives in the URL: every choice the user makes is a query parameter, so a reload
// or a pasted link restores the same view.

// Parameters and their defaults. `from`/`until` take what the API takes (`now-1h`, unix ms).
export const DEFAULTS = {
  type: "",      // profile type id
  query: "{}",   // label selector
  from: "now-1h",
  until: "now",
  search: "",    // regex highlighted in the flame graph
  zoom: "",      // path of frame names (root excluded) joined by ";"
  view: "icicle", // or "flame"
  mode: "",      // "sandwich": callers and callees of `fn` instead of the whole graph
  groupBy: "",   // label the time series is split by
  fn: "",        // function chosen in the top table
  sort: "self",  // top table column
  filter: "",    // top table filter
  tenant: "",
  refresh: "",   // seconds between automatic reloads of a range ending "now" ("" = off)
  maxNodes: "",  // flame graph node limit sent to the server ("" = its default, 0 = none)
};

export function readState(search = location.search) {
  const p = new URLSearchParams(search);
  const s = { ...DEFAULTS };
  for (const k of Object.keys(DEFAULTS)) if (p.has(k)) s[k] = p.get(k);
  return s;
}

// Writes `state` to the URL; `push` makes a history entry (so Back undoes it).
export function writeState(state, push = false) {
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(state)) if (k in DEFAULTS && v !== DEFAULTS[k]) p.set(k, v);
  const url = location.pathname + (p.toString() ? "?" + p : "");
  if (url === location.pathname + location.search) return;
  if (push) history.pushState(null, "", url);
  else history.replaceState(null, "", url);
}
