// Drives Debian's chromium (through playwright-core) over the call graph view of Ember's web
// UI, served by a real `ember server` loaded with corpus profiles (see
// `web_ui_draws_the_call_graph_in_chromium` in crates/ember/tests/ui_views.rs): turn the view
// on, check the graph's functions and edges are drawn with the expected heaviest function and
// total, pick a function by a click, go to the flame graph by a double click, follow the
// zoom, reload from the URL; in both themes, with no console error and no request outside the
// server's origin.
//
// usage: node ui_callgraph.mjs '{"base": ..., "service": ..., "total": ..., "heaviest": ...,
// "heaviestTotal": ..., "functions": ..., "hot": ..., "zoom": [...], "zoomTotal": ...,
// "screenshots": ...}'. Prints one line per check; exits non-zero on the first failure.
import { check, jsonArgument, launch, runChecks, watchedPage } from "./common.mjs";
import { join } from "node:path";

const want = jsonArgument("ui_callgraph.mjs");

const browser = await launch();
await runChecks(browser, async () => {
  const { page, problems, foreign } = await watchedPage(browser, want.base);
  const shot = (name) => page.screenshot({ path: join(want.screenshots, name), fullPage: false });
  const ready = () => page.waitForFunction(() => window.__ember?.ready && window.__ember.loading === 0);
  const graphReady = () => page.waitForFunction(() => window.__ember?.ready && window.__ember.loading === 0 && window.__ember.view.callgraph);
  const view = () => page.evaluate(() => JSON.parse(JSON.stringify(window.__ember.view)));
  const url = async () => new URL(await page.evaluate(() => location.href));

  // 1. The service's flame graph, then the call graph in its place.
  await page.goto(want.base + "/?query=" + encodeURIComponent(`{service_name="${want.service}"}`));
  await ready();
  check(await page.locator("#graph-btn").isVisible(), "the Call graph button is there");
  await page.click("#graph-btn");
  await graphReady();
  let v = await view();
  const g = v.callgraph;
  check((await url()).searchParams.get("graph") === "callgraph", "the view is in the URL");
  check(await page.locator("#callgraph").isVisible() && await page.locator("#flame-wrap").isHidden(),
    "the call graph replaces the flame graph");
  check(g.total === want.total, `the graph's total is the profile's (${g.total}, expected ${want.total})`);
  check(g.heaviest === want.heaviest && g.heaviestTotal === want.heaviestTotal,
    `the heaviest function is ${g.heaviest} with ${g.heaviestTotal} (expected ${want.heaviest}, ${want.heaviestTotal})`);
  check(g.nodes > 10 && g.nodes <= 80 && g.nodes <= want.functions, `${g.nodes} functions of ${want.functions} kept (at most 80)`);
  check(g.drawnNodes === g.nodes && g.drawnEdges === g.edges && g.edges >= g.nodes - 1,
    `every function and edge is drawn (${g.drawnNodes} boxes, ${g.drawnEdges} edges)`);
  check(g.dropped.nodes === want.functions - g.nodes, `the dropped functions are counted (${g.dropped.nodes})`);
  const note = await page.locator("#callgraph-note").textContent();
  check(note.includes(`${g.nodes} of ${want.functions} functions`) && note.includes("dropped"), `the note says what was dropped: ${note}`);
  // The heaviest function's box: in sight, labelled with its total and share.
  const box = page.locator(`#callgraph g.node[data-name="${want.heaviest}"]`);
  check(await box.count() === 1, "the heaviest function has one box");
  const text = await box.locator("text").allTextContents();
  const share = (100 * want.heaviestTotal / want.total).toFixed(2) + " %";
  check(text.some((t) => t.startsWith("total ") && t.includes(share)), `its box shows its total and share ${share}: ${JSON.stringify(text)}`);
  // Layers: every edge's caller box sits above its callee's, but for edges closing a cycle.
  const layered = await page.evaluate(() => {
    const layer = new Map([...document.querySelectorAll("#callgraph g.node")].map((g) => [g.dataset.name, Number(g.dataset.layer)]));
    const edges = [...document.querySelectorAll("#callgraph path.edge")];
    const down = edges.filter((p) => layer.get(p.dataset.from) < layer.get(p.dataset.to)).length;
    return { down, all: edges.length, roots: [...layer.values()].filter((l) => l === 0).length };
  });
  check(layered.down >= 0.9 * layered.all && layered.roots >= 1, `edges run down the layers (${layered.down} of ${layered.all})`);
  // The heaviest function starts in sight, however wide the graph.
  const inSight = await page.evaluate((name) => {
    const b = document.querySelector(`#callgraph g.node[data-name="${CSS.escape(name)}"]`).getBoundingClientRect();
    const r = document.getElementById("callgraph").getBoundingClientRect();
    return b.left >= r.left && b.right <= r.right && b.top >= r.top && b.top < r.bottom;
  }, want.heaviest);
  check(inSight, "the heaviest function's box starts in sight");
  await shot("40-callgraph.png");
  // Fit scales the whole graph to the box's width, and back.
  await page.click("#graph-fit");
  const widths = await page.evaluate(() => [document.querySelector("#callgraph svg").getBoundingClientRect().width,
    document.getElementById("callgraph").clientWidth]);
  check(Math.abs(widths[0] - widths[1]) < 2, `Fit scales the graph to the box (${widths.map(Math.round)})`);
  await shot("43-callgraph-fit.png");
  await page.click("#graph-fit");

  // 2. A click picks the function (marked here, in the table and in the URL).
  const hot = page.locator(`#callgraph g.node[data-name="${want.hot}"]`);
  check(await hot.count() === 1, `the hottest function ${want.hot} has a box`);
  await hot.scrollIntoViewIfNeeded();
  await hot.click();
  check((await url()).searchParams.get("fn") === want.hot, "a click picks the function");
  check(await hot.evaluate((n) => n.classList.contains("picked")), "its box is marked");
  check(await page.locator("#callgraph path.edge.hot").count() > 0, "its edges are marked");
  check(await page.locator("#top tr.picked").getAttribute("data-name") === want.hot, "the table marks it too");
  await shot("41-callgraph-picked.png");

  // 3. A reload restores the view and the pick.
  await page.reload();
  await graphReady();
  v = await view();
  check(JSON.stringify(v.callgraph) === JSON.stringify(g), "a reload restores the same graph");
  check(await page.locator("#callgraph").isVisible() && await page.locator("#flame-wrap").isHidden(),
    "in place of the flame graph");
  check(await page.locator(`#callgraph g.node.picked`).getAttribute("data-name") === want.hot, "and the pick");

  // 4. A double click goes to the flame graph with the function picked.
  await page.locator(`#callgraph g.node[data-name="${want.hot}"]`).dblclick();
  await ready();
  v = await view();
  check(await page.locator("#flame-wrap").isVisible() && await page.locator("#callgraph").isHidden(), "a double click shows the flame graph");
  check(!(await url()).searchParams.has("graph") && v.fn?.name === want.hot && v.fn.count > 0,
    `with ${want.hot} highlighted (${v.fn?.count} frames)`);

  // 5. The graph follows the zoom: only the stacks through the zoomed path.
  await page.goto(want.base + "/?graph=callgraph&query=" + encodeURIComponent(`{service_name="${want.service}"}`) +
    "&zoom=" + encodeURIComponent(want.zoom.join(";")));
  await graphReady();
  v = await view();
  check(v.callgraph.total === want.zoomTotal, `the zoomed graph's total is ${v.callgraph.total} (expected ${want.zoomTotal})`);
  check(await page.locator(`#callgraph g.node[data-name="${want.zoom[1]}"]`).count() === 1, "the zoomed function is in it");
  await page.locator("#crumbs button", { hasText: "all" }).click();
  await page.waitForFunction((t) => window.__ember.loading === 0 && window.__ember.view.callgraph?.total === t, want.total);
  check(true, "resetting the zoom shows the whole graph again");

  // 6. The dark theme, at 1280×800.
  await page.emulateMedia({ colorScheme: "dark" });
  await page.reload();
  await graphReady();
  const fill = await page.evaluate(() => getComputedStyle(document.querySelector("#callgraph g.node text")).fill);
  check(fill === "rgb(17, 17, 17)", `box labels stay dark on the light boxes (${fill})`);
  check(await page.locator("#flame-wrap").isHidden() && await page.locator(`#callgraph g.node[data-name="${want.heaviest}"]`).isVisible(),
    "the dark theme's graph is in sight");
  await shot("42-callgraph-dark.png");

  check(problems.length === 0, "no console or page errors " + JSON.stringify(problems));
  check(foreign.length === 0, "no request left the server's origin " + JSON.stringify(foreign));
  check(true, "all checks ran");
});
