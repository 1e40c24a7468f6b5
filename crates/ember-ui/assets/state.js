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
  page: "",      // "compare": the Compare view instead of Explore
  // Compare: the baseline (`l…`) and the comparison (`r…`); "" = the default, derived from
  // the selection above: the same selector, the comparison over `from`–`until` and the
  // baseline over the period just before it, as long.
  lquery: "", lfrom: "", luntil: "",
  rquery: "", rfrom: "", runtil: "",
  diff: "abs",   // "abs": colour by absolute change, "norm": by change of share of the total
  czoom: "",     // the diff flame graph's zoom path, joined by ";"
  mby: "self",   // the movers table's measure: "self" or "total"
  graph: "",     // "callgraph": the call graph in place of the flame graph
  profile: "",   // a single profile: its unix time in ns ("" = the whole selection)
  pseries: "",   // the single profile's series labels, as a selector
  hide: "",      // frame filter: regex of frame names the server leaves out
  rec: "",       // frame filter: "1" collapses direct recursion
  below: "",     // frame filter: function whose callees fold into it
  ffn: "",       // frame filter: the function focused on (its stacks alone, rooted at it)
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

// A time parameter (`now`, `now-1h`, unix s/ms) as unix ms.
export function toMs(text, now = Date.now()) {
  if (!text || text === "now") return now;
  const secs = secondsAgo(text);
  if (secs !== null) return now - secs * 1e3;
  const n = Number(text);
  if (!Number.isFinite(n)) return now;
  // Seconds, milliseconds, microseconds or nanoseconds, by magnitude (as the API reads them).
  return n < 1e11 ? n * 1e3 : n < 1e14 ? n : n < 1e17 ? n / 1e3 : n / 1e6;
}

const UNITS = { w: 604800, d: 86400, h: 3600, m: 60, s: 1 };

// Seconds before now of `now` or `now-<n><s|m|h|d|w>`; null for an absolute time.
function secondsAgo(text) {
  if (text === "now") return 0;
  const rel = /^now-(\d+(?:\.\d+)?)(s|m|h|d|w)$/.exec(text);
  return rel ? Number(rel[1]) * UNITS[rel[2]] : null;
}

// `now-<n><unit>` in the largest unit that divides `secs`.
function ago(secs) {
  if (secs <= 0) return "now";
  const [u, n] = Object.entries(UNITS).find(([, n]) => secs % n === 0) || ["s", 1];
  return `now-${secs / n}${u}`;
}

// The period just before `from`–`until`, as long: relative when both ends are (so a link
// keeps meaning "the hour before the last one"), else in unix ms.
export function previousPeriod(from, until) {
  const [a, b] = [secondsAgo(from), secondsAgo(until)];
  if (a !== null && b !== null && a > b) return [ago(2 * a - b), from];
  const [f, u] = [toMs(from), toMs(until)];
  return [String(Math.round(2 * f - u)), String(Math.round(f))];
}

// The two sides of a comparison (`{query, from, until}` each) with the defaults filled in.
export function compareSides(s) {
  const [pf, pu] = previousPeriod(s.from, s.until);
  return {
    left: { query: s.lquery || s.query, from: s.lfrom || pf, until: s.luntil || pu },
    right: { query: s.rquery || s.query, from: s.rfrom || s.from, until: s.runtil || s.until },
  };
}
