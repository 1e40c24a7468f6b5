// The web UI benchmark: Debian's chromium (through playwright-core, from tests/browser) opens
// Ember's Explore page on a day of a service whose merge has 100,000+ nodes, with the node
// limit off so the browser really gets every node, and times with performance.now():
//   - navigation to the first painted flame graph (a requestAnimationFrame after the canvas
//     has drawn its first frames: the frame that shows them), in a fresh browser context each
//     run (no cache);
//   - a zoom (a click on a frame: zoom, marks, redraw, breadcrumbs), a hover (the tooltip of
//     the frame under the pointer) and a plain redraw (scrolling) of the 100,000-node graph;
//   - a search over every node (typing a regex: matching, marking, share, redraw);
//   - and, from the browser's resource timing, the flame graph request (waiting for the
//     server's first byte, and the whole download).
// Every measure runs RUNS times (at least 5); the median and the spread (min–max) are printed
// as JSON and as a Markdown table. Given several servers (`servers`: e.g. the previous build
// and this one), the page loads alternate between them, run by run, so a busy machine weighs
// on each alike; one table per server. Where the page marks them (`performance.mark`:
// `ember:modules`, `ember:flame-answer`, `ember:flame-drawn`, and `ember:boot-drawn` when
// boot.js drew the graph itself: since session 14 it draws every plain view, before the
// page's modules run unless the answer is slower than boot.js waits for it), the first
// paint's breakdown is printed too.
//
// usage: node bench/ui/bench.mjs '{"servers": [{"name": "new", "base": URL}, ...],
//                                  "query": SELECTOR, "runs": 7}'
//        (or '{"base": URL, ...}' for one server)
import { launch } from "../../tests/browser/common.mjs";

const args = JSON.parse(process.argv[2] || "{}");
const runs = Math.max(5, args.runs || 7);
const servers = args.servers || [{ name: "", base: args.base }];
// Per server, the view's address as the page writes it (profile type included), and a first
// visit's (no type yet: the page asks for the list of types before the flame graph).
for (const s of servers) {
  const types = await (await fetch(`${s.base}/api/v1/profile_types`)).json();
  const type = types.find((t) => t.split(":")[1] === "cpu") || types[0];
  s.firstVisit = `${s.base}/?from=now-24h&until=now&maxNodes=0&query=${encodeURIComponent(args.query)}`;
  s.url = `${s.firstVisit}&type=${encodeURIComponent(type)}`;
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const stat = (xs) => ({ median: median(xs), min: Math.min(...xs), max: Math.max(...xs), runs: xs.length });

// Marks, in the page, when the flame graph's first frames are on screen: the first animation
// frame after the canvas drew any, plus one (the frame that presents them).
function markFirstPaint() {
  const poll = () => {
    const drawn = window.__ember?.flame?.stats?.drawn > 0;
    if (drawn) requestAnimationFrame(() => { window.__firstPaint = performance.now(); });
    else requestAnimationFrame(poll);
  };
  requestAnimationFrame(poll);
}

// In the page: times `n` zooms (clicks on frames at a spread of depths), hovers and redraws.
async function interactions(n) {
  const flame = window.__ember.flame, canvas = document.getElementById("flame");
  const m = flame.model, r = canvas.getBoundingClientRect();
  const wait = () => new Promise((res) => requestAnimationFrame(() => res()));
  const at = (x, y) => ({ clientX: r.left + x, clientY: r.top + y, bubbles: true });
  const out = { zoom: [], hover: [], redraw: [], drawnAtZoom: [] };
  // Zoom: a frame of depth d under the pointer at the middle, from the whole graph each time.
  for (let k = 0; k < n; k++) {
    const d = 1 + (k % Math.min(8, m.depth - 1));
    const y = d * 18 + 9 - document.getElementById("flame-wrap").scrollTop;
    const t0 = performance.now();
    canvas.dispatchEvent(new MouseEvent("click", at(r.width * (0.3 + 0.4 * (k / n)), y)));
    const ms = performance.now() - t0;
    // Only clicks that hit a frame count (a click on empty space does nothing).
    if (flame.zoom[0] > 0) {
      out.zoom.push(ms);
      out.drawnAtZoom.push(flame.stats.drawn);
    }
    await wait();
    document.dispatchEvent(new KeyboardEvent("keydown", { key: "Escape", bubbles: true }));
    await wait();
  }
  for (let k = 0; k < n * 4; k++) {
    const t0 = performance.now();
    canvas.dispatchEvent(new MouseEvent("mousemove", at((k * 37) % r.width, 9 + 18 * (k % 12))));
    const ms = performance.now() - t0;
    // Only hovers over a frame count (they build the tooltip).
    if (!document.getElementById("tooltip").hidden) out.hover.push(ms);
    await wait();
  }
  for (let k = 0; k < n; k++) {
    const t0 = performance.now();
    flame.draw();
    out.redraw.push(performance.now() - t0);
    await wait();
  }
  out.drawn = flame.stats.drawn;
  return out;
}

// In the page: times searches over every node (typing a regex in the search box).
async function searches(patterns) {
  const box = document.getElementById("search");
  const wait = () => new Promise((res) => requestAnimationFrame(() => res()));
  const out = [];
  for (const p of patterns) {
    box.value = p;
    const t0 = performance.now();
    box.dispatchEvent(new Event("input", { bubbles: true }));
    out.push([p, performance.now() - t0, window.__ember.view.search?.count ?? -1]);
    await wait();
  }
  box.value = "";
  box.dispatchEvent(new Event("input", { bubbles: true }));
  return out;
}

const browser = await launch();
for (const s of servers) {
  s.result = { url: s.url, runs, firstPaint: [], firstVisitPaint: [], requestStart: [], requestEnd: [], serverWait: [],
    download: [], modules: [], answer: [], drawn: [], bootDrawn: [], prunedEnd: [], bytes: 0, prunedBytes: 0, nodes: 0 };
  s.zoom = [];
  s.hover = [];
  s.redraw = [];
  s.search = [];
}

// One run on server `s`: a first visit, then a visit of the view's address with the
// interactions and searches.
async function once(s) {
  const { result } = s;
  // A first visit, in its own fresh context.
  const visit = await browser.newContext({ viewport: { width: 1920, height: 1080 } });
  const first = await visit.newPage();
  await first.addInitScript(markFirstPaint);
  await first.goto(s.firstVisit, { waitUntil: "commit" });
  await first.waitForFunction(() => window.__firstPaint, null, { timeout: 60000, polling: 50 });
  result.firstVisitPaint.push(await first.evaluate(() => window.__firstPaint));
  await first.waitForFunction(() => window.__ember.ready && window.__ember.loading === 0, null, { timeout: 60000 });
  await visit.close();
  const context = await browser.newContext({ viewport: { width: 1920, height: 1080 } });
  const page = await context.newPage();
  await page.addInitScript(markFirstPaint);
  await page.goto(s.url, { waitUntil: "commit" });
  await page.waitForFunction(() => window.__firstPaint, null, { timeout: 60000, polling: 50 });
  await page.waitForFunction(() => window.__ember.ready && window.__ember.loading === 0, null, { timeout: 60000 });
  const t = await page.evaluate(() => {
    // The whole tree's request, and (since session 14) boot.js's first one of only the nodes
    // wide enough to draw (`minShare`).
    const flames = performance.getEntriesByType("resource").filter((e) => /\/api\/v1\/query\?.*format=flamebearer/.test(e.name));
    const q = flames.find((e) => !e.name.includes("minShare=")), p = flames.find((e) => e.name.includes("minShare="));
    const mark = (name) => performance.getEntriesByName(name, "mark")[0]?.startTime ?? null;
    return { paint: window.__firstPaint, nodes: window.__ember.view.nodes, start: q.startTime, end: q.responseEnd,
      wait: q.responseStart - q.requestStart, download: q.responseEnd - q.startTime, bytes: q.encodedBodySize || q.transferSize,
      modules: mark("ember:modules"), answer: mark("ember:flame-answer"), drawn: mark("ember:flame-drawn"),
      bootDrawn: mark("ember:boot-drawn"), prunedEnd: p ? p.responseEnd : null, prunedBytes: p ? p.encodedBodySize : 0 };
  });
  if (t.nodes < 100000) throw new Error(`the browser got ${t.nodes} nodes, not 100,000+`);
  result.firstPaint.push(t.paint);
  result.serverWait.push(t.wait);
  result.requestStart.push(t.start);
  result.requestEnd.push(t.end);
  result.download.push(t.download);
  for (const k of ["modules", "answer", "drawn", "bootDrawn", "prunedEnd"]) if (t[k] !== null) result[k].push(t[k]);
  result.prunedBytes = t.prunedBytes;
  result.nodes = t.nodes;
  result.bytes = t.bytes;
  const i = await page.evaluate(interactions, 10);
  s.zoom.push(...i.zoom);
  s.hover.push(...i.hover);
  s.redraw.push(...i.redraw);
  result.drawnFrames = i.drawn;
  const found = await page.evaluate(searches, ["Encode", "json|sql", "^net/http\\.\\(\\*Conn\\)", "kallsyms", "no-such-frame-xyz"]);
  s.search.push(...found.map(([, ms]) => ms));
  result.searchMatches = found.map(([p, , c]) => [p, c]);
  await context.close();
}

try {
  // Alternating: run 1 on every server, then run 2 on every server, ...
  for (let run = 0; run < runs; run++) for (const s of servers) await once(s);
} finally {
  await browser.close();
}
for (const s of servers) {
  const { result } = s;
  const summary = {
    "navigation → first painted flame graph (link to the view)": [stat(result.firstPaint), 300],
    "navigation → first painted flame graph (first visit, no type)": [stat(result.firstVisitPaint), 300],
    "zoom (click → redrawn)": [stat(s.zoom), 16],
    "hover (tooltip)": [stat(s.hover), 16],
    "redraw (scroll)": [stat(s.redraw), 16],
    "search over every node": [stat(s.search), 50],
    "flame graph request: sent (after navigation)": [stat(result.requestStart), null],
    "flame graph request: server's first byte": [stat(result.serverWait), null],
    "flame graph request: whole answer": [stat(result.download), null],
    "flame graph request: answered (after navigation)": [stat(result.requestEnd), null],
  };
  // The page's own marks (builds that set them): when every module had run, when the answer's
  // bytes were in the page, when the graph was drawn (the first paint is the frame after).
  if (result.modules.length) summary["… every module loaded and run (after navigation)"] = [stat(result.modules), null];
  if (result.answer.length) summary["… the answer's bytes in the page (after navigation)"] = [stat(result.answer), null];
  if (result.drawn.length) summary["… the flame graph drawn (after navigation)"] = [stat(result.drawn), null];
  if (result.prunedEnd.length) {
    summary[`… first answer, the nodes wide enough to draw (\`minShare\`, ${(result.prunedBytes / 1e3).toFixed(0)} kB), answered`] =
      [stat(result.prunedEnd), null];
  }
  // boot.js draws a plain view itself (builds before session 14: only when its answer was in
  // before the modules had run).
  if (result.bootDrawn.length) {
    summary[`… drawn by boot.js (${result.bootDrawn.length} of ${runs} loads)`] = [stat(result.bootDrawn), null];
  }
  console.log(JSON.stringify({ server: s.name, ...result, summary }, null, 1));
  console.log(`\n${s.name ? `**${s.name}** (${s.base}): ` : ""}${result.nodes} nodes in the browser ` +
    `(${(result.bytes / 1e6).toFixed(1)} MB answer), ${runs} page loads\n`);
  console.log("| measure | median ms | min–max ms | samples | target |");
  console.log("|---|---|---|---|---|");
  for (const [name, [st, target]] of Object.entries(summary)) {
    const verdict = target === null ? "—" : `< ${target} ms: ${st.median < target ? "met" : "MISSED"}`;
    console.log(`| ${name} | ${st.median.toFixed(1)} | ${st.min.toFixed(1)}–${st.max.toFixed(1)} | ${st.runs} | ${verdict} |`);
  }
}
