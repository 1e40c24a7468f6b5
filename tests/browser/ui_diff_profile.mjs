// Drives Debian's chromium (through playwright-core) over Ember's Explore view of a pushed
// `pprof -diff_base` profile (see `web_ui_draws_a_pushed_diff_profile_as_the_diff` in
// crates/ember/tests/ui_diff_profile.rs): the flame graph drawn is the differential one (the
// model is `double`, base → new, the base's total Go's), its widest frame's change is the
// share of the base's total Go's `-top` prints for it, frames are painted by their change,
// the tooltip says so, and a note says the selection holds a pushed diff profile. The same
// with the node limit off, where boot.js's first paint asks with `minShare`: the diff comes
// whole at once and nothing more is asked. A plain profile next to it stays a plain graph
// with no note. No console error, no request outside the server's origin.
//
// usage: node ui_diff_profile.mjs '{"base": ..., "type": ..., "diff": SERVICE, "plain": SERVICE,
// "baseTotal": NANOS, "goCum": {"function": percent, ...}, "screenshots": DIR}'. Prints one
// line per check; exits non-zero on the first failure.
import { check, jsonArgument, launch, runChecks, watchedPage } from "./common.mjs";
import { join } from "node:path";

const want = jsonArgument("ui_diff_profile.mjs");

// In the page: what the flame graph holds and how its widest frame is drawn.
function drawn() {
  const flame = window.__ember.flame, m = flame.model, top = m.topFrame();
  const [d, i] = m.find([top]);
  const lv = m.levels[d];
  const box = flame.frameBox(top);
  // The colour on the canvas at the frame's first row of pixels, as the browser shows it.
  const canvas = document.getElementById("flame"), r = canvas.getBoundingClientRect();
  const dpr = window.devicePixelRatio || 1;
  const px = canvas.getContext("2d").getImageData(Math.round((box.x - r.left) * dpr), Math.round((box.top - r.top + 1) * dpr), 1, 1).data;
  const probe = document.createElement("canvas").getContext("2d");
  probe.fillStyle = box.fill;
  probe.fillRect(0, 0, 1, 1);
  const want = probe.getImageData(0, 0, 1, 1).data;
  return {
    double: m.double, leftTicks: m.leftTicks, rightTicks: m.rightTicks, top, box,
    left: lv.leftTotal ? lv.leftTotal[i] : null, right: lv.rightTotal ? lv.rightTotal[i] : null,
    pixel: [...px.slice(0, 3)], fillPixel: [...want.slice(0, 3)],
    view: JSON.parse(JSON.stringify(window.__ember.view)),
  };
}

const browser = await launch();
await runChecks(browser, async () => {
  const query = (s) => encodeURIComponent(`{service_name="${s}"}`);
  const link = (s, extra = "") => `${want.base}/?query=${query(s)}&from=now-1h&until=now&type=${encodeURIComponent(want.type)}${extra}`;

  for (const [what, extra] of [["the default node limit", ""], ["no node limit (first paint with minShare)", "&maxNodes=0"]]) {
    const { context, page, problems, foreign } = await watchedPage(browser, want.base);
    const graphs = [];
    page.on("request", (r) => { if (r.url().includes("format=flamebearer-bin")) graphs.push(r.url()); });
    await page.goto(link(want.diff, extra));
    await page.waitForFunction(() => window.__ember?.ready && window.__ember.loading === 0 && window.__ember.view.nodes > 0, null, { timeout: 60000 });
    const g = await page.evaluate(drawn);
    check(g.double, `${what}: the drawn model is the double (diff) flame graph`);
    check(g.leftTicks === want.baseTotal && g.view.diff.leftTicks === want.baseTotal,
      `${what}: the base side's total is Go's ${want.baseTotal} ns (${g.leftTicks})`);
    check(g.rightTicks > g.leftTicks, `${what}: the new side's total is ${g.rightTicks} ns`);
    const go = want.goCum[g.top];
    const share = (100 * (g.right - g.left)) / want.baseTotal;
    check(go !== undefined && Math.abs(share - go) < 0.005 && Math.abs(g.view.diff.topShare - go) < 0.005,
      `${what}: the widest frame ${g.top} changes by ${share.toFixed(2)} % of the base's total, Go's ${go} %`);
    check(/^hsl\((0|190) /.test(g.box.fill) && g.pixel.every((c, k) => Math.abs(c - g.fillPixel[k]) <= 2),
      `${what}: ${g.top} is painted by its change (${g.box.fill}, on the canvas ${g.pixel})`);
    const note = page.locator("#diff-note");
    const text = (await note.textContent()) || "";
    check(await note.isVisible() && /pushed diff profile/.test(text) && /base 1\.76 s/.test(text) && text.includes(go.toFixed(2)),
      `${what}: the note is shown: ${JSON.stringify(text)}`);
    check(/^base 1\.76 s, new /.test(await page.locator("#total").textContent()), `${what}: the totals line names both sides`);
    await page.mouse.move(g.box.x, g.box.y);
    const tip = page.locator("#tooltip");
    await tip.waitFor({ state: "visible" });
    const tipText = await tip.textContent();
    check(/base: /.test(tipText) && /new: /.test(tipText) && tipText.includes(`+${go.toFixed(2)} % of the base's total`),
      `${what}: the tooltip gives both sides and the change against the base: ${JSON.stringify(tipText)}`);
    if (extra) {
      const pruned = graphs.filter((u) => u.includes("minShare="));
      check(pruned.length === 1 && graphs.length === 1,
        `${what}: the first paint's one answer was the whole diff, nothing more asked (${graphs.length} asked)`);
      check(g.view.fromBoot.some((u) => u.includes("format=flamebearer-bin")), `${what}: the page took boot.js's answer`);
    }
    await page.screenshot({ path: join(want.screenshots, `diff-profile-${extra ? "unlimited" : "default"}.png`) });
    check(problems.length === 0, `${what}: no page errors or console errors ${JSON.stringify(problems)}`);
    check(foreign.length === 0, `${what}: nothing asked of another origin ${JSON.stringify(foreign)}`);
    await context.close();
  }

  // A plain profile: a plain graph, no note.
  const { context, page, problems } = await watchedPage(browser, want.base);
  await page.goto(link(want.plain));
  await page.waitForFunction(() => window.__ember?.ready && window.__ember.loading === 0 && window.__ember.view.nodes > 0, null, { timeout: 60000 });
  const plain = await page.evaluate(() => ({ double: window.__ember.flame.model.double, diff: window.__ember.view.diff }));
  check(!plain.double && plain.diff === null && await page.locator("#diff-note").isHidden(),
    "a plain profile is a plain flame graph, with no diff note");
  check(/^total /.test(await page.locator("#total").textContent()), "a plain profile's totals line is its total");
  check(problems.length === 0, `plain: no page errors ${JSON.stringify(problems)}`);
  await context.close();
  console.log("ok: all checks ran");
});
