// Drives Debian's chromium (through playwright-core) over the Compare view of Ember's web UI,
// served by a real `ember server` loaded with a generated regression (see
// `web_ui_compares_a_regression_in_chromium` in crates/ember/tests/ui_browser.rs): open it by
// clicking through the UI and from a URL, check that the regressed function is painted red in
// both the absolute and the normalised mode (the colour read back from the canvas's pixels and
// from the renderer's own answer), that it tops the movers table, that the tooltip, zoom,
// Escape and search work, and that a reload from the copied URL gives the same view.
//
// usage: node ui_compare.mjs '{"base": ..., "service": ..., "regressed": ..., "improved": ...,
// "steady": ..., "parent": ..., "screenshots": ...}'. Prints one line per check; exits non-zero
// on the first failure.
import { check, jsonArgument, launch, runChecks, watchedPage } from "./common.mjs";
import { join } from "node:path";

const want = jsonArgument("ui_compare.mjs");

// What a colour looks like: "more" (red), "less" (blue-green), "same" (grey) from its RGB.
function kind([r, g, b]) {
  if (r > g + 50 && r > b + 50) return "more";
  if (b > r + 40 && g > r + 20) return "less";
  if (Math.max(r, g, b) - Math.min(r, g, b) < 12) return "same";
  return `unclear rgb(${r}, ${g}, ${b})`;
}

// "hsl(0 85% 60%)" as [h, s, l].
function hsl(text) {
  const m = /^hsl\((\d+(?:\.\d+)?) (\d+(?:\.\d+)?)% (\d+(?:\.\d+)?)%\)$/.exec(text || "");
  return m ? m.slice(1).map(Number) : null;
}

const browser = await launch();
await runChecks(browser, async () => {
  const { page, problems, foreign } = await watchedPage(browser, want.base);
  const shot = (name) => page.screenshot({ path: join(want.screenshots, name), fullPage: false });
  const ready = () => page.waitForFunction(() => window.__ember?.ready && window.__ember.loading === 0);
  const view = () => page.evaluate(() => JSON.parse(JSON.stringify(window.__ember.view)));
  // The page's own address (read from the page: a history push reaches page.url() late).
  const url = async () => new URL(await page.evaluate(() => location.href));

  // The frame called `name` in the diff flame graph: where it is, the fill the renderer gives
  // it, and the colour of its pixels on the canvas (its top row, above the label).
  const frame = (name) => page.evaluate((name) => {
    const box = window.__ember.compareFlame.frameBox(name);
    if (!box) return null;
    const c = document.getElementById("cmp-flame");
    const r = c.getBoundingClientRect();
    const dpr = c.width / r.width;
    const px = c.getContext("2d").getImageData(Math.round((box.x - r.left) * dpr), Math.round((box.top - r.top + 2) * dpr), 1, 1).data;
    return { ...box, rgb: [px[0], px[1], px[2]] };
  }, name);
  // Checks that `name` is painted as `expected` ("more", "less", "same") in `mode`.
  async function painted(name, expected, mode) {
    const f = await frame(name);
    check(f !== null, `${mode}: ${name} is drawn in the diff flame graph`);
    check(kind(f.rgb) === expected, `${mode}: ${name}'s pixels are ${expected} (${kind(f.rgb)}, rgb ${f.rgb})`);
    const [h, s] = hsl(f.fill) || [];
    const hue = expected === "more" ? h === 0 && s > 50 : expected === "less" ? h > 150 && h < 230 && s > 50 : s === 0;
    check(hue, `${mode}: the renderer fills ${name} with ${f.fill} (${expected})`);
    return f;
  }
  async function moversTop(mode) {
    const v = await view();
    check(v.movers?.[0]?.[0] === want.regressed && v.movers[0][3] > 0,
      `${mode}: ${want.regressed} tops the movers, grown ${JSON.stringify(v.movers?.[0])}`);
    const first = page.locator("#movers tbody tr").first();
    check(await first.getAttribute("data-name") === want.regressed, `${mode}: the table's first row is ${want.regressed}`);
    check(await first.locator("td").nth(3).getAttribute("class") === "more", `${mode}: its change is marked as more`);
    return v.movers;
  }

  // 1. Explore the service, then click through to Compare: the default comparison is this
  // hour against the hour before, same selector.
  await page.goto(want.base + "/?query=" + encodeURIComponent(`{service_name="${want.service}"}`));
  await ready();
  check((await view()).page === "explore", "the page opens on Explore");
  await page.locator("#page-compare").click();
  await ready();
  let v = await view();
  check((await url()).searchParams.get("page") === "compare" && v.page === "compare", "the Compare button opens Compare: " + (await url()).search);
  check(await page.locator("#compare").isVisible() && !(await page.locator("#explore").isVisible()), "Compare replaces Explore");
  const sel = `{service_name="${want.service}"}`;
  check(JSON.stringify(v.compare.left) === JSON.stringify({ query: sel, from: "now-2h", until: "now-1h" }),
    "the baseline defaults to the hour before " + JSON.stringify(v.compare.left));
  check(JSON.stringify(v.compare.right) === JSON.stringify({ query: sel, from: "now-1h", until: "now" }),
    "the comparison defaults to the last hour " + JSON.stringify(v.compare.right));
  check(v.compare.leftTicks > 0 && v.compare.rightTicks > v.compare.leftTicks,
    `both sides have data (${v.compare.leftTicks} → ${v.compare.rightTicks})`);
  check(await page.locator("#l-from").inputValue() === "now-2h", "the baseline's inputs show its range");

  // 2. Absolute mode: the regression is red, the improvement blue-green, the steady function grey.
  check(v.compareMode === "abs" && await page.locator("#diff-abs").getAttribute("aria-pressed") === "true", "absolute mode by default");
  const regressedAbs = await painted(want.regressed, "more", "absolute");
  await painted(want.improved, "less", "absolute");
  await painted(want.steady, "same", "absolute");
  check(await page.locator("#cmp-scale .swatch").count() === 5, "a colour legend is shown");
  await moversTop("absolute");
  await shot("20-compare-absolute.png");

  // 3. Hover: the tooltip has both sides and the change.
  await page.mouse.move(regressedAbs.x, regressedAbs.y);
  await page.waitForFunction(() => !document.getElementById("cmp-tooltip").hidden);
  const tip = await page.locator("#cmp-tooltip").textContent();
  check(tip.includes(want.regressed) && /baseline/.test(tip) && /comparison/.test(tip) && /change: \+/.test(tip),
    "the tooltip shows baseline, comparison and change: " + tip);
  await shot("21-compare-tooltip.png");

  // 4. Normalised mode: the regression is still red (its share grew); the steady function
  // lost share, so it is now less.
  await page.locator("#diff-norm").click();
  check((await url()).searchParams.get("diff") === "norm", "the mode is in the URL: " + (await url()).search);
  await painted(want.regressed, "more", "normalised");
  await painted(want.improved, "less", "normalised");
  await painted(want.steady, "less", "normalised");
  const movers = await moversTop("normalised");
  check(/pp$/.test(await page.locator("#movers tbody tr").first().locator("td").nth(3).textContent()),
    "normalised changes are in percentage points");
  await shot("22-compare-normalised.png");

  // 5. Zoom into the parent frame (URL), Escape back, then zoom again and search.
  const parent = await frame(want.parent);
  await page.mouse.click(parent.x, parent.y);
  check((await url()).searchParams.get("czoom") === "main;" + want.parent, "a click zooms, in the URL: " + (await url()).search);
  check(JSON.stringify((await view()).compareZoom) === JSON.stringify(["main", want.parent]), "the crumbs follow the zoom");
  await page.keyboard.press("Escape");
  check(!(await url()).searchParams.has("czoom") && (await view()).compareZoom.length === 0, "Escape resets the zoom");
  await page.mouse.click(parent.x, parent.y);
  await page.keyboard.press("/");
  await page.keyboard.type("slow");
  v = await view();
  check(v.compareSearch?.count === 1 && v.compareSearch.share > 0.3, "the search finds the regressed frame (its share of both sides under the zoom) " + JSON.stringify(v.compareSearch));
  await painted(want.regressed, "more", "searched");

  // 6. A row of the movers table highlights its function.
  await page.locator(`#movers tbody tr[data-name="${want.regressed}"]`).click();
  check((await url()).searchParams.get("fn") === want.regressed, "a movers row chooses its function");

  // 7. Reload from the copied URL: the same view.
  const address = (await url()).href;
  const before = await view();
  await page.goto("about:blank");
  await page.goto(address);
  await ready();
  const after = await view();
  for (const key of ["page", "compare", "compareMode", "compareZoom", "compareSearch", "movers"]) {
    check(JSON.stringify(after[key]) === JSON.stringify(before[key]), `after reload ${key} is ${JSON.stringify(after[key])}`);
  }
  check(JSON.stringify(after.movers) === JSON.stringify(movers), "the movers are those of normalised mode");
  await painted(want.regressed, "more", "reloaded");
  await shot("23-compare-reloaded.png");

  // 8. A baseline typed by hand (an explicit range) is kept in the URL and queried.
  await page.locator("#l-from").fill("now-3h");
  await page.locator("#cmp-apply").click();
  await ready();
  check((await url()).searchParams.get("lfrom") === "now-3h" && (await view()).compare.left.from === "now-3h",
    "an edited baseline is in the URL: " + (await url()).search);
  await painted(want.regressed, "more", "edited baseline");

  // 8b. The server's node limit cuts the diff's graph (the steady function ends up in
  // "other"), never the movers, which come from the full data.
  await page.goto((await url()).href + "&maxNodes=4");
  await ready();
  v = await view();
  check(v.compare.nodes === 6 && await frame(want.steady) === null && await frame("other") !== null,
    `maxNodes=4 cuts the graph to ${v.compare.nodes} nodes, ${want.steady} summed into other`);
  check(/node limit/.test(await page.locator("#cmp-total").textContent()), "the cut is said");
  check(v.movers.some(([name]) => name === want.steady), "the movers still list " + want.steady);
  await painted(want.regressed, "more", "cut at the node limit");

  // 9. Back to Explore by its button.
  await page.locator("#page-explore").click();
  await ready();
  v = await view();
  check(!(await url()).searchParams.has("page") && v.page === "explore" && v.nodes > 0, "the Explore button goes back to the flame graph");

  // 10. Dark theme.
  await page.emulateMedia({ colorScheme: "dark" });
  await page.goto(address);
  await ready();
  await painted(want.regressed, "more", "dark");
  await shot("24-compare-dark.png");

  check(problems.length === 0, "no console or page errors " + JSON.stringify(problems));
  check(foreign.length === 0, "no request left the server's origin " + JSON.stringify(foreign));
  check(true, "all checks ran");
});
