// Drives Debian's chromium (through playwright-core) over the web UI's frame filters (see
// `web_ui_filters_frames_on_the_server` in crates/ember/tests/ui_more.rs): hiding frames by
// regex, collapsing recursion, dropping everything below a function and focusing on a function
// (from the top table) are sent to the server
// with every query of the view, change the flame graph exactly as the expected figures (computed
// in Rust from the profile itself) say, keep the total, and survive a reload.
//
// usage: node ui_filters.mjs '{"base": ..., "service": ..., "total": ..., "nodesAll": ...,
// "hide": REGEX, "hiddenTop": NAME, "nodesHidden": N, "nodesHiddenRec": N, "nodesDropped": N,
// "focusFn": NAME, "nodesFocused": N, "focusTotal": N, "screenshots": DIR}'. Prints one line per check; exits non-zero on the first failure.
import { check, jsonArgument, launch, runChecks } from "./common.mjs";
import { join } from "node:path";

const want = jsonArgument("ui_filters.mjs");
const browser = await launch();
await runChecks(browser, async () => {
  const page = await browser.newPage({ viewport: { width: 1600, height: 1000 } });
  const errors = [];
  page.on("console", (m) => { if (m.type() === "error") errors.push(m.text()); });
  const asked = [];
  page.on("request", (r) => { if (r.url().includes("/api/v1/query")) asked.push(r.url()); });
  const ready = () => page.waitForFunction(() => window.__ember?.ready && window.__ember.loading === 0);
  const view = () => page.evaluate(() => JSON.parse(JSON.stringify(window.__ember.view)));
  // Waits until the view's node count is `n` (the answer to the last change has been drawn).
  const nodes = async (n, what) => {
    await page.waitForFunction((n) => window.__ember.loading === 0 && window.__ember.view.nodes === n, n,
      { timeout: 10000 }).catch(() => {});
    const v = await view();
    check(v.nodes === n, `${what}: ${v.nodes} nodes, expected ${n}`);
    check(v.total === want.total, `${what}: the total stays ${want.total} (${v.total})`);
    return v;
  };
  await page.goto(want.base + "/?query=" + encodeURIComponent(`{service_name="${want.service}"}`) + "&maxNodes=0");
  await ready();
  await nodes(want.nodesAll, "unfiltered");

  asked.length = 0;
  await page.fill("#hide", want.hide);
  await page.press("#hide", "Enter");
  const hidden = await nodes(want.nodesHidden, `hide ${want.hide}`);
  check(hidden.topFrame === want.hiddenTop, `the heaviest root frame is now ${want.hiddenTop} (${hidden.topFrame})`);
  const sent = asked.filter((u) => new URL(u).searchParams.get("hide") === want.hide);
  check(sent.some((u) => u.includes("format=flamebearer")) && sent.some((u) => u.includes("format=top-json")),
    "the flame graph and the top table are asked with the filter");
  const rows = await page.locator("#top td").allTextContents();
  const re = new RegExp(want.hide);
  check(rows.length > 0 && !rows.some((t) => re.test(t)), "no hidden function in the top table");
  check(new URL(page.url()).searchParams.get("hide") === want.hide, "the filter is in the URL");

  await page.check("#rec");
  await nodes(want.nodesHiddenRec, "hide + collapse recursion");
  check(asked.some((u) => u.includes("collapseRecursion=true")), "collapse recursion is sent");

  await page.fill("#below", want.hiddenTop);
  await page.press("#below", "Enter");
  await nodes(want.nodesDropped, `hide + recursion + drop below ${want.hiddenTop}`);
  check(await page.locator("#filters").evaluate((e) => e.classList.contains("on")), "the filter bar says filters are on");
  await page.screenshot({ path: join(want.screenshots, "60-filters.png") });

  await page.reload();
  await ready();
  await nodes(want.nodesDropped, "after a reload");
  check(await page.inputValue("#hide") === want.hide && await page.isChecked("#rec") &&
    await page.inputValue("#below") === want.hiddenTop, "the controls show the filters after a reload");

  await page.click("#below-clear");
  await nodes(want.nodesHiddenRec, "drop below cleared");
  await page.fill("#hide", "");
  await page.press("#hide", "Enter");
  await page.uncheck("#rec");
  await nodes(want.nodesAll, "every filter cleared");

  // Focus on a function chosen in the top table: its stacks alone, under one root frame.
  await page.locator("#top-filter").fill("");
  await page.locator(`#top tbody tr[data-name="${want.focusFn}"]`).click();
  await page.click("#focus-fn-btn");
  await page.waitForFunction((n) => window.__ember.loading === 0 && window.__ember.view.nodes === n, want.nodesFocused,
    { timeout: 10000 }).catch(() => {});
  const focused = await view();
  check(focused.nodes === want.nodesFocused, `focus on ${want.focusFn}: ${focused.nodes} nodes, expected ${want.nodesFocused}`);
  check(focused.total === want.focusTotal, `its total is the function's, ${want.focusTotal} (${focused.total})`);
  check(focused.topFrame === want.focusFn, `it is the one root frame (${focused.topFrame})`);
  check(new URL(page.url()).searchParams.get("ffn") === want.focusFn, "the focus is in the URL");
  check(await page.locator("#ffn").isVisible(), "the filter bar names the focused function");
  await page.screenshot({ path: join(want.screenshots, "62-focus-function.png") });
  await page.click("#ffn-clear");
  await nodes(want.nodesAll, "focus cleared");
  check(errors.length === 0, "no console error " + errors.join(" | "));
  console.log("ok: all checks ran");
});
