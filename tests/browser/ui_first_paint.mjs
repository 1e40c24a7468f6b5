// Drives Debian's chromium (through playwright-core) over the first paint of Ember's Explore
// page (see `web_ui_draws_the_first_view_early_and_it_is_the_full_view` in
// crates/ember/tests/ui_views.rs): boot.js, inline in the page, draws a plain view's flame graph
// before the page's modules have run; this checks that boot.js drew it, and that what it drew is the
// full view: once the page has loaded everything, the canvas holds the very same pixels (the
// same frames at the same places, the same colours and labels), the model is the full answer
// (every node, none cut) and its widest frame is the profile's heaviest root. With the node
// limit off, boot.js draws first from an answer of only the nodes wide enough to be drawn
// (`minShare`), each in its place: the pixels must still be those of the whole tree's view. For a link to the
// view (type in the address) and a first visit (no type: the list of types first). Also, that
// nothing was refused by the page's Content-Security-Policy (the inline script is allowed by
// its hash, and only it) and nothing outside the server was asked for.
//
// usage: node ui_first_paint.mjs '{"base": ..., "cases": [{"service": ..., "type": ...,
// "heaviestRoot": ..., "nodes": N, "share": "0.000234", "early": N, "firstVisit": BOOL}],
// "screenshots": DIR}'. Prints one line per check; exits non-zero on the first failure.
import { check, jsonArgument, launch, runChecks, watchedPage } from "./common.mjs";
import { join } from "node:path";

const want = jsonArgument("ui_first_paint.mjs");

// In the page, from its start: at the first animation frame after the flame graph has frames
// drawn (the frame that shows them), what is on the canvas and how it got there.
function watchFirstDraw() {
  const poll = () => {
    const flame = window.__ember?.flame;
    if (!(flame?.stats?.drawn > 0)) return requestAnimationFrame(poll);
    const canvas = document.getElementById("flame");
    const marks = (name) => performance.getEntriesByName(name, "mark").length;
    window.__early = {
      image: canvas.toDataURL(), width: canvas.width, height: canvas.height,
      drawn: flame.stats.drawn, nodes: flame.model.nodeCount, top: flame.model.topFrame(),
      bootDrawn: marks("ember:boot-drawn"), modulesRan: marks("ember:modules"),
      modulesLoaded: performance.getEntriesByType("resource").filter((e) => /\/ui\/explore\.js$/.test(e.name)).length,
    };
  };
  requestAnimationFrame(poll);
}

// In the page, once everything is loaded: the same record.
function full() {
  const flame = window.__ember.flame, canvas = document.getElementById("flame");
  return {
    image: canvas.toDataURL(), width: canvas.width, height: canvas.height, drawn: flame.stats.drawn,
    nodes: flame.model.nodeCount, viewNodes: window.__ember.view.nodes, top: flame.model.topFrame(),
    truncated: window.__ember.view.truncated, fromBoot: window.__ember.view.fromBoot,
    sameCanvas: flame.canvas === canvas, zoom: window.__ember.view.zoom,
  };
}

const browser = await launch();
await runChecks(browser, async () => {
  // Each case: a service, its type, its heaviest root and its call tree's node count; its
  // visits: a link to the view, and for `firstVisit` a first visit (no type in the address).
  for (const c of want.cases) {
    const query = encodeURIComponent(`{service_name="${c.service}"}`);
    const visits = [[`${c.service}, a link to the view`,
      `${want.base}/?query=${query}&from=now-1h&until=now&maxNodes=0&type=${encodeURIComponent(c.type)}`]];
    if (c.firstVisit) visits.push([`${c.service}, a first visit`, `${want.base}/?query=${query}&from=now-1h&until=now&maxNodes=0`]);
    for (const [what, url] of visits) await visit(what, url, c);
  }
  console.log("ok: all checks ran");
});

async function visit(what, url, c) {
  const { context, page, problems, foreign } = await watchedPage(browser, want.base);
  const pruned = [];
  page.on("request", (r) => { if (r.url().includes("minShare=")) pruned.push(r.url()); });
  await page.addInitScript(watchFirstDraw);
  await page.goto(url, { waitUntil: "commit" });
  await page.waitForFunction(() => window.__early, null, { timeout: 30000 });
  const early = await page.evaluate(() => window.__early);
  // (Before the page's modules had run, unless the answer took longer than boot.js waits
  // for it before loading them: on a busy machine.)
  check(early.bootDrawn === 1, `${what}: boot.js drew the flame graph (${early.drawn} frames; ` +
    `the page's modules had ${early.modulesRan ? "" : "not "}run)`);
  await page.waitForFunction(() => window.__ember.ready && window.__ember.loading === 0, null, { timeout: 30000 });
  const after = await page.evaluate(full);
  check(after.sameCanvas && after.width === early.width && after.height === early.height,
    `${what}: the page kept the canvas and its size (${after.width}×${after.height})`);
  check(after.nodes === c.nodes && after.viewNodes === c.nodes && !after.truncated,
    `${what}: the full answer is shown: ${after.nodes} nodes, none cut (want ${c.nodes})`);
  // With no node limit, boot.js asks first for the nodes wide enough to draw (`minShare`).
  check(pruned.length === 1 && /minShare=([^&]*)/.exec(pruned[0])[1] === c.share &&
    early.nodes === c.early && early.nodes < after.nodes,
    `${what}: the early view was drawn from the ${c.early} nodes of at least ${c.share} of the whole: ${early.nodes} of ${after.nodes}`);
  check(after.top === c.heaviestRoot && early.top === c.heaviestRoot,
    `${what}: the widest frame is the heaviest root, ${c.heaviestRoot}`);
  check(after.drawn === early.drawn, `${what}: the same number of frames drawn (${after.drawn})`);
  check(after.image === early.image, `${what}: the early view is pixel for pixel the full view`);
  check(after.fromBoot.some((u) => u.includes("format=flamebearer-bin") && !u.includes("minShare")),
    `${what}: the page took boot.js's answer of the whole tree`);
  await page.screenshot({ path: join(want.screenshots, `first-paint-${what.replace(/[^a-z0-9]+/gi, "-")}.png`) });
  check(problems.length === 0, `${what}: no page errors, console errors or refused scripts ${JSON.stringify(problems)}`);
  check(foreign.length === 0, `${what}: nothing asked of another origin ${JSON.stringify(foreign)}`);
  await context.close();
}
