// Drives Debian's chromium (through playwright-core) over Ember's web UI served by a real
// `ember server`, and checks the Explore loop as a person would use it: pick the service, see
// the flame graph, hover, zoom, search, click a top-table row, reload from the URL; with no
// console error and no request outside the server's origin. Screenshots for a human to look at.
//
// usage: node ui.mjs '{"base": "http://127.0.0.1:PORT", "service": ..., ...}' (see
// crates/ember/tests/ui_browser.rs for the keys). Prints one line per check; exits non-zero
// on the first failure.
import { check, jsonArgument, launch, runChecks } from "./common.mjs";
import { join } from "node:path";

const want = jsonArgument("ui.mjs");

const browser = await launch();
await runChecks(browser, async () => {
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const page = await context.newPage();
  const problems = [];
  let expectErrors = false;
  page.on("pageerror", (e) => problems.push("page error: " + e.message));
  page.on("console", (m) => {
    if (m.type() === "error" && !(expectErrors && /status of 400/.test(m.text()))) {
      problems.push("console: " + m.text());
    }
  });
  const origin = new URL(want.base).origin;
  const foreign = [];
  await context.route("**/*", (route) => {
    const url = route.request().url();
    if (url.startsWith(origin + "/")) return route.continue();
    foreign.push(url);
    return route.abort();
  });
  const shot = (name) => page.screenshot({ path: join(want.screenshots, name), fullPage: false });
  const ready = () => page.waitForFunction(() => window.__ember?.ready && window.__ember.loading === 0);
  const view = () => page.evaluate(() => JSON.parse(JSON.stringify(window.__ember.view)));
  const url = () => new URL(page.url());

  // 1. The page loads and lists the services with how much data each has.
  await page.goto(want.base + "/");
  await ready();
  check(problems.length === 0, "loads without script errors " + JSON.stringify(problems));
  let v = await view();
  check(JSON.stringify([...v.services].sort()) === JSON.stringify(want.services),
    `lists the services ${JSON.stringify(v.services)}`);
  const typeValue = await page.locator("#type").inputValue();
  check(typeValue.includes(":cpu:nanoseconds"), `chooses the cpu profile type (${typeValue})`);
  // The first requests went out from boot.js before the modules ran, and the page used them
  // (a first visit: the type chosen from the list, then the view's flame graph).
  const booted = (u, what) => u.some((x) => x.includes(what));
  check(booted(v.fromBoot, "/api/v1/profile_types") && booted(v.fromBoot, "format=flamebearer-bin"),
    "the first visit's types and flame graph come from boot.js's early requests " + JSON.stringify(v.fromBoot));
  const serviceLabel = await page.locator(`#service option[value="${want.service}"]`).textContent();
  check(/—\s*[\d.]+\s*(ms|s|min)$/.test(serviceLabel), `shows the service's amount of data: ${serviceLabel}`);

  // 1b. Group the time series by service: a stacked series per service with its total; a
  // click on one narrows the selector to it.
  await page.selectOption("#group-by", "service_name");
  await ready();
  v = await view();
  const legend = Object.fromEntries(v.legend);
  check(JSON.stringify(Object.keys(legend).sort()) === JSON.stringify(want.services),
    `the legend has a series per service ${JSON.stringify(v.legend)}`);
  check(legend[want.service] === want.serviceTotal, `${want.service} totals ${legend[want.service]} (expected ${want.serviceTotal})`);
  await page.locator('#legend button[data-value="checkout"]').click();
  await ready();
  check(url().searchParams.get("query") === '{service_name="checkout"}' && url().searchParams.get("groupBy") === "service_name",
    "a legend click narrows the selector: " + url().search);

  // 2. Pick the service: the flame graph shows its top frame, drawn on a canvas.
  await page.selectOption("#service", want.service);
  await ready();
  v = await view();
  check(url().searchParams.get("query") === `{service_name="${want.service}"}`,
    "the selector is in the URL: " + url().search);
  check(v.topFrame === want.topFrame, `top frame ${JSON.stringify(v.topFrame)} is ${JSON.stringify(want.topFrame)}`);
  check(v.nodes > 20 && v.drawn > 20, `draws the graph (${v.nodes} nodes, ${v.drawn} frames in sight)`);
  const inked = await page.evaluate(() => {
    const c = document.getElementById("flame");
    const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
    let n = 0;
    for (let i = 3; i < d.length; i += 4) if (d[i] > 0) n++;
    return n / (c.width * c.height);
  });
  check(inked > 0.02, `the canvas is painted (${(100 * inked).toFixed(1)} % of its pixels)`);
  // The graph comes in the binary format; its model is the flamebearer JSON's, node for node.
  const same = await page.evaluate(async () => {
    const { FlameModel } = await import("/ui/flame.js");
    const shown = window.__ember.flame.model;
    const bin = performance.getEntriesByType("resource").filter((e) => /format=flamebearer-bin/.test(e.name)).pop();
    const u = new URL(bin.name);
    u.searchParams.set("format", "flamebearer");
    const json = new FlameModel(await (await fetch(u)).json());
    const diffs = [];
    if (JSON.stringify(shown.names) !== JSON.stringify(json.names)) diffs.push("names");
    if (shown.total !== json.total || shown.depth !== json.depth) diffs.push(`total/depth ${shown.total}/${shown.depth}`);
    for (let d = 0; d < json.depth; d++) {
      for (const k of ["x", "total", "self", "name", "parent"]) {
        if (JSON.stringify([...shown.levels[d][k]]) !== JSON.stringify([...json.levels[d][k]])) diffs.push(`depth ${d} ${k}`);
      }
    }
    return { diffs, nodes: shown.nodeCount, binary: shown !== json && !bin.name.includes("format=flamebearer&") };
  });
  check(same.binary && same.diffs.length === 0,
    `the binary flame graph's model is the flamebearer JSON's (${same.nodes} nodes; differences: ${JSON.stringify(same.diffs)})`);
  const chartInk = await page.evaluate(() => {
    const c = document.getElementById("timeseries");
    const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
    let n = 0;
    for (let i = 3; i < d.length; i += 4) if (d[i] > 0) n++;
    return n;
  });
  check(chartInk > 100, `the time series is drawn (${chartInk} pixels)`);
  // Hovering the bar of the only bucket shows its value (the bar is the last painted column).
  const bar = await page.evaluate(() => {
    const c = document.getElementById("timeseries"), r = c.getBoundingClientRect();
    const ctx = c.getContext("2d"), d = ctx.getImageData(0, 0, c.width, c.height).data;
    const y = Math.floor(c.height - 25 * devicePixelRatio);
    for (let x = c.width - 1; x >= 0; x--) {
      if (d[4 * (y * c.width + x) + 3] > 0) return { x: r.left + x / devicePixelRatio, y: r.top + y / devicePixelRatio };
    }
    return null;
  });
  check(bar !== null, "the bar is found");
  await page.mouse.move(bar.x - 0.5, bar.y);
  const tsTip = await page.locator("#ts-tooltip").textContent();
  check(tsTip.includes(`${want.service}: ${(want.serviceTotal / 1e9).toFixed(2)} s`), `hovering the bar shows its value: ${JSON.stringify(tsTip)}`);
  await page.mouse.move(0, 0);
  await page.waitForSelector("#top tbody tr");
  const firstRow = await page.locator("#top tbody tr").first().getAttribute("data-name");
  check(firstRow === want.topSelf, `the top table's first row is ${JSON.stringify(firstRow)}, expected ${JSON.stringify(want.topSelf)}`);
  await shot("01-explore.png");

  // 3. Hover: the tooltip names the frame with its self, total and share in time units.
  const [zoom1, zoom2] = want.zoomPath;
  const box = await page.evaluate((n) => window.__ember.flame.frameBox(n), zoom2);
  check(box !== null, `frame ${JSON.stringify(zoom2)} is in sight`);
  await page.mouse.move(box.x, box.y);
  const tip = await page.locator("#tooltip").textContent();
  check(tip.includes(zoom2) && /self: [\d.]+ (ms|s|µs)/.test(tip) && /total: .*% of all/.test(tip),
    `hover shows the tooltip: ${JSON.stringify(tip)}`);

  // 4. Click zooms: the path is in the breadcrumbs and the URL; "all" goes back.
  await page.mouse.click(box.x, box.y);
  v = await view();
  check(JSON.stringify(v.zoom) === JSON.stringify([zoom1, zoom2]), `click zooms to ${JSON.stringify(v.zoom)}`);
  check(url().searchParams.get("zoom") === `${zoom1};${zoom2}`, "the zoom is in the URL");
  const crumbs = await page.locator("#crumbs button").allTextContents();
  check(crumbs.join(" › ") === ["all", zoom1, zoom2].join(" › "), `breadcrumbs ${JSON.stringify(crumbs)}`);
  await shot("02-zoomed.png");
  await page.locator("#crumbs button", { hasText: "all" }).click();
  v = await view();
  check(v.zoom.length === 0 && !url().searchParams.has("zoom"), "the breadcrumb 'all' resets the zoom");

  // 5. Search: matches highlighted, their count and share of the whole graph.
  await page.fill("#search", want.search);
  v = await view();
  const share = 100 * v.search.share;
  check(v.search.count > 0 && Math.abs(share - want.searchPercent) < 0.01,
    `search ${want.search}: ${v.search.count} frames, ${share.toFixed(3)} % (expected ${want.searchPercent.toFixed(3)} %)`);
  const said = await page.locator("#search-result").textContent();
  check(said.includes(want.searchPercent.toFixed(2) + " %"), `the share is shown: ${JSON.stringify(said)}`);
  await page.fill("#search", "([");
  check((await page.locator("#search-result").textContent()).startsWith("invalid regex"), "an invalid regex is reported, not thrown");
  await page.fill("#search", want.search);
  await shot("03-search.png");

  // 6. The top table: sort by total, filter, click a row to highlight the function.
  await page.locator('#top th[data-sort="total"]').click();
  const totals = await page.evaluate(() => [...document.querySelectorAll("#top tbody tr")].map((tr) => tr.dataset.name));
  const rows = await page.evaluate(() => window.__ember.view.topRows);
  check(totals.length > 5 && rows >= totals.length, `sorted by total (${totals.length} rows shown of ${rows})`);
  await page.fill("#top-filter", "unixfile");
  const filtered = await page.locator("#top tbody tr").evaluateAll((trs) => trs.map((t) => t.dataset.name));
  check(filtered.length > 0 && filtered.every((n) => /unixfile/i.test(n)), `filter keeps ${filtered.length} matching rows`);
  await page.locator(`#top tbody tr[data-name="${want.topSelf}"]`).click();
  v = await view();
  check(v.fn?.name === want.topSelf && v.fn.count > 0, `the row highlights ${v.fn?.count} frames of ${want.topSelf}`);
  check(await page.locator("#top tr.picked").count() === 1, "the clicked row is marked");
  check(url().searchParams.get("fn") === want.topSelf, "the chosen function is in the URL");
  await shot("04-function.png");

  // 7. Zoom and flip to flame layout, then reload: the same view comes back from the URL.
  const box2 = await page.evaluate((n) => window.__ember.flame.frameBox(n), zoom2);
  await page.mouse.click(box2.x, box2.y);
  await page.click("#view");
  const before = await view();
  const address = page.url();
  await page.reload();
  await ready();
  const after = await view();
  check(page.url() === address, "the reload keeps the address");
  check(booted(after.fromBoot, "format=flamebearer-bin"), "the reload's flame graph was asked for by boot.js " + JSON.stringify(after.fromBoot));
  for (const key of ["topFrame", "zoom", "search", "fn", "nodes", "total", "legend"]) {
    check(JSON.stringify(after[key]) === JSON.stringify(before[key]), `after reload ${key} is ${JSON.stringify(after[key])}`);
  }
  check(await page.locator("#type").inputValue() === typeValue, "the profile type is restored");
  check(await page.locator("#service").inputValue() === want.service, "the service is restored");
  check(await page.locator("#search").inputValue() === want.search, "the search box is restored");
  check(await page.locator("#top-filter").inputValue() === "unixfile", "the table filter is restored");
  check(await page.locator("#view").textContent() === "Icicle", "the flame layout is restored");
  await shot("05-reloaded-flame.png");

  // 7b. Sandwich: the callers and callees of a (recursive) function, its total once.
  await page.fill("#top-filter", "");
  await page.locator(`#top tbody tr[data-name="${want.sandwich.fn}"]`).click();
  const serverTotal = await page.evaluate((fn) => {
    const row = [...document.querySelectorAll("#top tbody tr")].find((tr) => tr.dataset.name === fn);
    return row ? row.cells[3].textContent : "";
  }, want.sandwich.fn);
  await page.click("#sandwich-btn");
  v = await view();
  const sw = v.sandwich;
  check(sw && sw.total === want.sandwich.total,
    `the sandwich of ${want.sandwich.fn} totals ${sw?.total} (expected ${want.sandwich.total}, the table says ${serverTotal})`);
  check(sw.nearestCaller === want.sandwich.caller && sw.heaviestCallee === want.sandwich.callee,
    `its heaviest caller is ${sw.nearestCaller}, its heaviest callee ${sw.heaviestCallee}`);
  check(await page.locator("#flame-wrap").isHidden() && await page.locator("#callers-wrap").isVisible(),
    "the sandwich replaces the whole graph");
  check(url().searchParams.get("mode") === "sandwich", "the sandwich is in the URL");
  await shot("05b-sandwich.png");
  await page.reload();
  await ready();
  check(JSON.stringify((await view()).sandwich) === JSON.stringify(sw), "the sandwich survives a reload");
  await page.click("#sandwich-btn");
  check(await page.locator("#flame-wrap").isVisible() && (await view()).sandwich === null, "the button turns it off");

  // 8. The label editor suggests names and values.
  await page.fill("#selector", "");
  await page.locator("#selector").pressSequentially("{serv");
  await page.waitForSelector("#suggest li[data-value='service_name']");
  const cardinality = await page.locator("#suggest li[data-value='service_name'] .note").textContent();
  check(cardinality === `${want.services.length} values`, `the label name shows its cardinality (${cardinality})`);
  await page.keyboard.press("Tab");
  check(await page.locator("#selector").inputValue() === '{service_name="', "Tab completes the label name");
  await page.waitForSelector(`#suggest li[data-value='${want.deepService}']`);
  const values = await page.locator("#suggest li[data-value]").allTextContents();
  check(JSON.stringify(values.sort()) === JSON.stringify(want.services), `suggests the values ${JSON.stringify(values)}`);
  await page.locator(`#suggest li[data-value='${want.deepService}']`).click();
  await page.locator("#selector").press("End");
  await page.locator("#selector").pressSequentially("}");
  await page.locator("#selector").press("Enter");
  await ready();

  // 9. A 3,000-level stack: a canvas the size of its box, scrolled to the leaf.
  v = await view();
  check(v.nodes >= 3000 && v.topFrame === "deep_frame_0", `the deep stack loads (${v.nodes} nodes)`);
  const sizes = await page.evaluate(() => {
    const c = document.getElementById("flame"), w = document.getElementById("flame-wrap");
    return { canvas: c.height, box: w.clientHeight * devicePixelRatio, scroll: w.scrollHeight };
  });
  check(sizes.canvas <= Math.ceil(sizes.box) && sizes.scroll > 3000 * 17,
    `the canvas stays the box's size (${sizes.canvas} px) while the graph scrolls (${sizes.scroll} px)`);
  // The view was left in the flame layout (root at the bottom): the leaf is at the top.
  await page.evaluate(() => { document.getElementById("flame-wrap").scrollTop = 0; });
  await page.waitForFunction((n) => window.__ember.flame.frameBox(n) !== null, want.deepLeaf);
  check(true, `the leaf ${want.deepLeaf} is drawn after scrolling`);
  await shot("06-deep.png");

  // 10. Time range: a preset, then a drag on the chart narrows it to absolute times.
  await page.click("#presets button[data-range='24h']");
  await ready();
  check(url().searchParams.get("from") === "now-24h", "the 24h preset is in the URL");
  const chart = await page.locator("#timeseries").boundingBox();
  await page.mouse.move(chart.x + chart.width * 0.5, chart.y + 40);
  await page.mouse.down();
  await page.mouse.move(chart.x + chart.width * 0.8, chart.y + 40, { steps: 5 });
  await page.mouse.up();
  await ready();
  const from = Number(url().searchParams.get("from")), until = Number(url().searchParams.get("until"));
  check(from > 1e12 && until > from, `dragging selects an absolute range (${until - from} ms)`);
  await page.goBack();
  await ready();
  check(url().searchParams.get("from") === "now-24h", "Back restores the previous range");

  // 10b. Auto-refresh reloads a range that ends now.
  const loads = await page.evaluate(() => window.__ember.loads);
  await page.selectOption("#auto-refresh", "10");
  check(url().searchParams.get("refresh") === "10", "auto-refresh is in the URL");
  await page.waitForFunction((n) => window.__ember.loads > n, loads, { timeout: 15000 });
  await ready();
  check((await view()).nodes >= 3000, "auto-refresh reloaded the view and kept it");
  await page.selectOption("#auto-refresh", "");

  // 10c. Nothing hidden in "other": the whole graph is cut at the server's node limit, a zoom
  // asks the server for the subtree and shows every frame under it.
  await page.goto(want.base + `/?query=${encodeURIComponent(`{service_name="${want.wide.service}"}`)}`);
  await ready();
  const kids = (name) => page.evaluate((n) => {
    const m = window.__ember.flame.model, lv = m.levels[2], up = m.levels[1];
    let count = 0;
    for (let i = 0; i < lv.x.length; i++) if (m.names[up.name[lv.parent[i]]] === n && m.names[lv.name[i]] !== "other") count++;
    return { count, other: m.names.includes("other") };
  }, name);
  v = await view();
  const cut = await kids(want.wide.frame);
  check(v.truncated && cut.other && cut.count < want.wide.children,
    `the whole graph is cut: ${cut.count} of ${want.wide.children} frames under ${want.wide.frame} shown`);
  const wideBox = await page.evaluate((n) => window.__ember.flame.frameBox(n), want.wide.frame);
  await page.mouse.click(wideBox.x, wideBox.y);
  await page.waitForFunction(() => window.__ember.loading === 0 && window.__ember.view.focused);
  const whole = await kids(want.wide.frame);
  check(whole.count === want.wide.children && !whole.other,
    `zoomed, the server's focused answer shows all ${whole.count} frames under ${want.wide.frame}, no "other"`);
  await shot("06b-focused.png");
  const pprofLink = await page.locator("#export-pprof").getAttribute("href");
  check(new URL(pprofLink, want.base).searchParams.get("focus") === JSON.stringify([want.wide.frame]),
    "the export is of the zoomed subtree: " + pprofLink);
  await page.reload();
  await ready();
  check((await view()).focused && (await kids(want.wide.frame)).count === want.wide.children, "a reload restores the focused zoom");
  await page.locator("#crumbs button", { hasText: "all" }).click();
  await page.waitForFunction(() => window.__ember.loading === 0 && !window.__ember.view.focused);
  check((await kids(want.wide.frame)).other, "'all' goes back to the whole (cut) graph");

  // 11. Honest states: no data, then a readable API error.
  await page.goto(want.base + '/?query={service_name="nope"}');
  await ready();
  const empty = await page.locator("#status").textContent();
  check(/No profiles/.test(empty) && (await view()).nodes === 0, `no data says so: ${JSON.stringify(empty)}`);
  check(problems.length === 0, "no console errors so far " + JSON.stringify(problems));
  expectErrors = true;
  await page.goto(want.base + "/?query=" + encodeURIComponent("{service_name=}"));
  await ready();
  const error = await page.locator("#status").textContent();
  check(/^400 /.test(error) && (await page.locator("#status").getAttribute("class")) === "error",
    `an API error is shown: ${JSON.stringify(error)}`);
  expectErrors = false;

  // 12. The dark theme follows the system setting.
  await page.emulateMedia({ colorScheme: "dark" });
  await page.goto(want.base + `/?query={service_name="${want.service}"}&search=${want.search}`);
  await ready();
  const bg = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
  check(bg === "rgb(22, 24, 29)", `dark background ${bg}`);
  await shot("07-dark.png");
  await page.setViewportSize({ width: 1920, height: 1080 });
  await page.waitForFunction(() => document.getElementById("flame").width >= 1200);
  await shot("09-dark-1920.png");

  check(problems.length === 0, "no console or page errors " + JSON.stringify(problems));
  check(foreign.length === 0, "no request left the server's origin " + JSON.stringify(foreign));
  check(true, "all checks ran");
});
