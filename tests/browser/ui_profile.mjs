// Drives Debian's chromium (through playwright-core) over the single-profile view of Ember's
// web UI, served by a real `ember server` loaded with three generated profiles of one service
// at known times (see `web_ui_opens_single_profiles_in_chromium` in
// crates/ember/tests/ui_views.rs): the profiles of the range are listed and drawn as points
// on the time series; a list entry and a point each open exactly that profile (its labels,
// its flame graph's top frame and total); a reload restores it; Back returns to the
// selection. No console error, no request outside the server's origin.
//
// usage: node ui_profile.mjs '{"base": ..., "service": ..., "profiles": [{"timeMs", "topFrame",
// "total"}, ...] (oldest first), "screenshots": ...}'. Prints one line per check; exits
// non-zero on the first failure.
import { check, jsonArgument, launch, runChecks, watchedPage } from "./common.mjs";
import { join } from "node:path";

const want = jsonArgument("ui_profile.mjs");

const browser = await launch();
await runChecks(browser, async () => {
  const { page, problems, foreign } = await watchedPage(browser, want.base);
  const shot = (name) => page.screenshot({ path: join(want.screenshots, name), fullPage: false });
  const ready = () => page.waitForFunction(() => window.__ember?.ready && window.__ember.loading === 0);
  const view = () => page.evaluate(() => JSON.parse(JSON.stringify(window.__ember.view)));
  const url = async () => new URL(await page.evaluate(() => location.href));
  // Checks that the page shows exactly the profile `p` (an entry of `want.profiles`).
  async function shows(p, how) {
    const v = await view();
    check(v.page === "profile" && await page.locator("#profile-view").isVisible() && await page.locator("#explore").isHidden(),
      `${how}: the single-profile view is shown`);
    check(v.profile.topFrame === p.topFrame, `${how}: its flame graph's top frame is ${v.profile.topFrame} (expected ${p.topFrame})`);
    check(v.profile.total === p.total && v.profile.numTicks === p.total, `${how}: its total is ${v.profile.total} (expected ${p.total})`);
    check(Math.abs(Number(BigInt(v.profile.time) / 1000000n) - p.timeMs) < 1000, `${how}: its time is the pushed one`);
    check(v.profile.labels.service_name === want.service, `${how}: its labels name the service`);
    const chips = await page.locator("#profile-labels .chip").allTextContents();
    check(chips.includes(`service_name=${want.service}`), `${how}: the labels are shown ${JSON.stringify(chips)}`);
    const u = await url();
    check(u.searchParams.get("profile") === v.profile.time && u.searchParams.get("pseries")?.includes(`service_name="${want.service}"`),
      `${how}: the profile is in the URL`);
  }

  // 1. The service's range: its three profiles listed newest first, and drawn as points.
  await page.goto(want.base + "/?query=" + encodeURIComponent(`{service_name="${want.service}"}`));
  await ready();
  let v = await view();
  const n = want.profiles.length;
  check(v.profiles.matched === n && v.profiles.listed === n && v.profiles.points === n,
    `the range holds ${n} profiles, listed and drawn as points (${JSON.stringify(v.profiles)})`);
  check(/Profiles \(3\)/.test(await page.locator("#profiles-btn").textContent()), "the Profiles button counts them");
  check(await page.locator("#profiles").isHidden(), "the list starts folded");
  await page.click("#profiles-btn");
  const rows = page.locator("#profile-list tr");
  check(await rows.count() === n, `the list has ${n} rows`);
  const totals = await rows.evaluateAll((trs) => trs.map((tr) => tr.cells[2].textContent));
  const times = await rows.evaluateAll((trs) => trs.map((tr) => tr.dataset.time));
  check(times.every((t, i) => i === 0 || BigInt(times[i - 1]) > BigInt(t)), `newest first (${totals.join(", ")})`);
  await shot("50-profiles-list.png");

  // 2. A click on the middle row opens exactly that profile.
  await rows.nth(1).click();
  await ready();
  await shows(want.profiles[1], "list");
  await shot("51-single-profile.png");

  // 3. A reload restores it.
  await page.reload();
  await ready();
  await shows(want.profiles[1], "reload");

  // 4. Back to the selection, then a click on the oldest profile's point on the chart.
  await page.click("#profile-back");
  await ready();
  v = await view();
  check(v.page === "explore" && await page.locator("#explore").isVisible() && !(await url()).searchParams.has("profile"),
    "Back returns to the selection");
  const oldest = want.profiles[0];
  const at = await page.evaluate((p) => {
    const chart = window.__ember.chart;
    const r = chart.canvas.getBoundingClientRect();
    return { x: r.left + chart.geom.xOf(p.timeMs), y: r.top + chart.geom.yOf(p.total) };
  }, oldest);
  await page.mouse.move(at.x, at.y);
  const tip = await page.locator("#ts-tooltip").textContent();
  check(tip.startsWith("profile at") && tip.includes(`service_name=${want.service}`) && tip.includes("click to open"),
    `hovering a point names its profile: ${JSON.stringify(tip)}`);
  await shot("52-profile-point.png");
  await page.mouse.click(at.x, at.y);
  await ready();
  await shows(oldest, "point");

  // 5. The browser's Back goes to the selection too; the dark theme.
  await page.goBack();
  await ready();
  check((await view()).page === "explore", "history Back returns to the selection");
  await page.goForward();
  await ready();
  await page.emulateMedia({ colorScheme: "dark" });
  await shows(oldest, "forward");
  await shot("53-single-profile-dark.png");

  check(problems.length === 0, "no console or page errors " + JSON.stringify(problems));
  check(foreign.length === 0, "no request left the server's origin " + JSON.stringify(foreign));
  check(true, "all checks ran");
});
