// Drives Debian's chromium (through playwright-core) over the exports of Ember's web UI and the
// Compare view's zoom into a diff cut at the node limit (see
// `web_ui_exports_speedscope_and_png_and_zooms_into_a_cut_diff` in
// crates/ember/tests/ui_more.rs): the speedscope download is checked against speedscope's own
// file-format schema (shipped in npm's `speedscope` package) and loaded into that package's
// app; the PNG download is decoded and its pixels compared with the canvas's.
//
// usage: node ui_export.mjs '{"base": ..., "service": ..., "serviceTotal": ..., "wide": {...},
// "speedscope": DIR, "downloads": DIR, "screenshots": DIR}'. Prints one line per check; exits
// non-zero on the first failure.
import { check, jsonArgument, launch, runChecks } from "./common.mjs";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

const want = jsonArgument("ui_export.mjs");

// Checks `value` against `schema` (the draft-07 subset speedscope's schema uses: $ref, type,
// required, properties, items, anyOf, enum, const); returns the first problem or "".
function conforms(value, schema, root, at = "$") {
  if (schema.$ref) return conforms(value, root.definitions[schema.$ref.split("/").pop()], root, at);
  if (schema.anyOf) {
    return schema.anyOf.some((s) => conforms(value, s, root, at) === "") ? "" : `${at}: matches none of anyOf`;
  }
  if ("const" in schema && value !== schema.const) return `${at}: ${JSON.stringify(value)} is not ${schema.const}`;
  if (schema.enum && !schema.enum.includes(value)) return `${at}: ${JSON.stringify(value)} not in ${schema.enum}`;
  const types = { number: (v) => typeof v === "number", string: (v) => typeof v === "string",
    array: Array.isArray, object: (v) => v && typeof v === "object" && !Array.isArray(v) };
  if (schema.type && !types[schema.type](value)) return `${at}: not a ${schema.type}`;
  for (const key of schema.required || []) if (!(key in value)) return `${at}: ${key} missing`;
  for (const [key, sub] of Object.entries(schema.properties || {})) {
    if (key in value) {
      const problem = conforms(value[key], sub, root, `${at}.${key}`);
      if (problem) return problem;
    }
  }
  if (schema.items && Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const problem = conforms(value[i], schema.items, root, `${at}[${i}]`);
      if (problem) return problem;
    }
  }
  return "";
}

// Validates a speedscope file: the schema, every frame index in range, weights adding up to
// each profile's endValue; returns each profile's summed weights.
function validateSpeedscope(file, what) {
  const schema = JSON.parse(readFileSync(join(want.speedscope, "file-format-schema.json"), "utf8"));
  const problem = conforms(file, schema, schema);
  check(problem === "", `${what} conforms to speedscope's file-format schema ${problem}`);
  const frames = file.shared.frames.length;
  const sums = file.profiles.map((p) => {
    check(p.type === "sampled" && p.samples.length === p.weights.length, `${what}: ${p.name} is sampled, a weight per sample`);
    check(p.samples.every((s) => s.every((i) => Number.isInteger(i) && i >= 0 && i < frames)), `${what}: every frame index is in the table of ${frames}`);
    const sum = p.weights.reduce((a, w) => a + w, 0);
    check(sum === p.endValue && p.startValue === 0, `${what}: ${p.name}'s weights sum to its endValue ${sum}`);
    return sum;
  });
  return sums;
}

// Opens npm's speedscope app (its file:// release build) and loads `path` into it the way its
// own command line does; returns the page title it ends with and any error it showed.
async function importIntoSpeedscope(browser, path, name) {
  const page = await browser.newPage();
  const alerts = [];
  page.on("dialog", (d) => { alerts.push(d.message()); d.dismiss(); });
  const loader = join(want.downloads, name + ".load.js");
  const b64 = readFileSync(path).toString("base64");
  writeFileSync(loader, `speedscope.loadFileFromBase64(${JSON.stringify(name)}, ${JSON.stringify(b64)})`);
  await page.goto(`file://${join(want.speedscope, "index.html")}#localProfilePath=${loader}`);
  await page.waitForFunction(() => / - speedscope$/.test(document.title) || /Something went wrong/.test(document.body.innerText),
    null, { timeout: 15000 }).catch(() => {});
  const result = { title: await page.title(), alerts, broken: /Something went wrong/.test(await page.locator("body").innerText()) };
  await page.screenshot({ path: join(want.screenshots, `32-speedscope-${name}.png`) });
  await page.close();
  return result;
}

const browser = await launch();
await runChecks(browser, async () => {
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 }, deviceScaleFactor: 2, acceptDownloads: true });
  const page = await context.newPage();
  const problems = [];
  page.on("pageerror", (e) => problems.push("page error: " + e.message));
  page.on("console", (m) => { if (m.type() === "error") problems.push("console: " + m.text()); });
  const origin = new URL(want.base).origin;
  const foreign = [];
  await context.route("**/*", (route) => {
    const url = route.request().url();
    if (url.startsWith(origin + "/") || url.startsWith("blob:")) return route.continue();
    foreign.push(url);
    return route.abort();
  });
  const ready = () => page.waitForFunction(() => window.__ember?.ready && window.__ember.loading === 0);
  const view = () => page.evaluate(() => JSON.parse(JSON.stringify(window.__ember.view)));
  // Clicks `selector` and saves the download it starts as `name`; returns its path.
  async function download(selector, name) {
    const [dl] = await Promise.all([page.waitForEvent("download"), page.locator(selector).click()]);
    const path = join(want.downloads, name);
    await dl.saveAs(path);
    check(dl.suggestedFilename() === name, `${selector} downloads ${dl.suggestedFilename()}`);
    return path;
  }

  // 1. speedscope of the service's flame graph.
  await page.goto(want.base + "/?query=" + encodeURIComponent(`{service_name="${want.service}"}`));
  await ready();
  check((await view()).total === want.serviceTotal, `the service is shown (total ${want.serviceTotal})`);
  const link = await page.locator("#export-speedscope").getAttribute("href");
  check(new URL(link, want.base).searchParams.get("format") === "speedscope", "the speedscope link asks for format=speedscope: " + link);
  // The pprof download (read with `go tool pprof` by the Rust side of the test).
  const pprof = readFileSync(await download("#export-pprof", "profile.pb.gz"));
  check(pprof[0] === 0x1f && pprof[1] === 0x8b, "the pprof download is gzip'd");
  const ssPath = await download("#export-speedscope", "profile.speedscope.json");
  const file = JSON.parse(readFileSync(ssPath, "utf8"));
  const [sum] = validateSpeedscope(file, "the speedscope download");
  check(file.profiles.length === 1 && sum === want.serviceTotal, `its weights sum to the profile's total ${sum}`);
  check(file.profiles[0].unit === "nanoseconds", "its unit is the profile type's: " + file.profiles[0].unit);
  const imported = await importIntoSpeedscope(browser, ssPath, "profile");
  check(!imported.broken && imported.alerts.length === 0 && / - speedscope$/.test(imported.title),
    `npm's speedscope app imports it: title ${JSON.stringify(imported.title)} ${JSON.stringify(imported.alerts)}`);

  // 2. PNG of the flame graph as drawn, at the device pixel ratio.
  const canvas = await page.evaluate(() => {
    const c = document.getElementById("flame");
    return { width: c.width, height: c.height, css: c.getBoundingClientRect().width };
  });
  check(canvas.width === Math.round(canvas.css * 2), `the canvas is drawn at the device pixel ratio (${canvas.width} px for ${canvas.css} CSS px)`);
  const pngPath = await download("#export-png", "flamegraph.png");
  const png = readFileSync(pngPath);
  check(png.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])), "the PNG download has PNG's signature");
  const [pw, ph] = [png.readUInt32BE(16), png.readUInt32BE(20)];
  check(pw === canvas.width && ph === canvas.height, `it is the visible view at the device pixel ratio (${pw}×${ph})`);
  check(png.length > 10000, `it is of non-trivial size (${png.length} bytes)`);
  // Decoded by the browser: many colours, and the same pixels as the canvas where it is drawn.
  const pixels = await page.evaluate(async (b64) => {
    const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
    const img = await createImageBitmap(new Blob([bytes], { type: "image/png" }));
    const c = new OffscreenCanvas(img.width, img.height);
    const ctx = c.getContext("2d");
    ctx.drawImage(img, 0, 0);
    const d = ctx.getImageData(0, 0, img.width, img.height).data;
    const colours = new Set();
    for (let i = 0; i < d.length; i += 4 * 97) colours.add((d[i] << 16) | (d[i + 1] << 8) | d[i + 2]);
    const live = document.getElementById("flame").getContext("2d").getImageData(0, 0, img.width, img.height).data;
    let same = 0, drawn = 0;
    for (let i = 0; i < d.length; i += 4 * 13) {
      if (live[i + 3] !== 255) continue;
      drawn++;
      if (live[i] === d[i] && live[i + 1] === d[i + 1] && live[i + 2] === d[i + 2]) same++;
    }
    return { colours: colours.size, same, drawn };
  }, png.toString("base64"));
  check(pixels.colours > 10, `its pixels are not all one colour (${pixels.colours} colours sampled)`);
  check(pixels.drawn > 1000 && pixels.same === pixels.drawn, `it shows the canvas's pixels (${pixels.same} of ${pixels.drawn} sampled)`);

  // 3. Compare: a diff cut at the node limit; zooming asks the server for the subtree.
  const [top, frame] = want.wide.path;
  await page.goto(want.base + `/?page=compare&maxNodes=${want.wide.maxNodes}&query=` +
    encodeURIComponent(`{service_name="${want.wide.service}"}`));
  await ready();
  const kids = () => page.evaluate((name) => {
    const m = window.__ember.compareFlame.model;
    let count = 0, other = false;
    for (let d = 1; d + 1 < m.depth; d++) {
      const lv = m.levels[d + 1], up = m.levels[d];
      for (let i = 0; i < lv.x.length; i++) {
        if (m.names[up.name[lv.parent[i]]] !== name) continue;
        if (m.names[lv.name[i]] === "other") other = true;
        else count++;
      }
    }
    return { count, other };
  }, frame);
  let v = await view();
  const cut = await kids();
  check(cut.other && cut.count < want.wide.children && v.compare.nodes <= want.wide.maxNodes + 10,
    `the diff is cut at ${want.wide.maxNodes} nodes: ${cut.count} of ${want.wide.children} frames under ${frame} shown, the rest in other`);
  check(!v.compareFocused, "the whole diff is shown");
  const box = await page.evaluate((n) => window.__ember.compareFlame.frameBox(n), frame);
  await page.mouse.click(box.x, box.y);
  await page.waitForFunction(() => window.__ember.loading === 0 && window.__ember.view.compareFocused);
  const whole = await kids();
  check(whole.count === want.wide.children && !whole.other,
    `zoomed, the server's focused diff shows all ${whole.count} frames under ${frame}, no other`);
  v = await view();
  check(JSON.stringify(v.compareZoom) === JSON.stringify([top, frame]), "the zoom path is " + JSON.stringify(v.compareZoom));
  const zoomedLink = await page.locator("#cmp-export-speedscope").getAttribute("href");
  check(new URL(zoomedLink, want.base).searchParams.get("focus") === JSON.stringify([top, frame]), "the diff's export is of the zoomed subtree");
  await page.screenshot({ path: join(want.screenshots, "30-compare-focused.png") });
  const diffPath = await download("#cmp-export-speedscope", "diff.speedscope.json");
  const diff = JSON.parse(readFileSync(diffPath, "utf8"));
  const sides = validateSpeedscope(diff, "the diff's speedscope download");
  check(diff.profiles.length === 2 && sides[1] > sides[0], `it has the baseline and the comparison (${sides})`);
  const diffImported = await importIntoSpeedscope(browser, diffPath, "diff");
  check(!diffImported.broken && diffImported.alerts.length === 0, "npm's speedscope app imports the diff's file: " + diffImported.title);
  const diffPng = readFileSync(await download("#cmp-export-png", "diff.png"));
  check(diffPng.length > 5000 && diffPng.readUInt32BE(16) > 1000, `the diff's PNG (${diffPng.length} bytes, ${diffPng.readUInt32BE(16)} px wide)`);
  // A reload restores the focused zoom; Escape goes back to the whole (cut) diff.
  await page.reload();
  await ready();
  check((await view()).compareFocused && (await kids()).count === want.wide.children, "a reload restores the focused zoom");
  await page.keyboard.press("Escape");
  await page.waitForFunction(() => window.__ember.loading === 0 && !window.__ember.view.compareFocused);
  check((await kids()).other && (await view()).compareZoom.length === 0, "Escape goes back to the whole cut diff");

  check(problems.length === 0, "no console or page errors " + JSON.stringify(problems));
  check(foreign.length === 0, "no request left the server's origin " + JSON.stringify(foreign));
  check(true, "all checks ran");
});
