// Where a page load's time goes: for RUNS loads of the Explore view of the benchmark's day
// (bench/ui/run.sh loads it), the navigation timing, every request (asked for, sent, first
// byte, done)
// and the page's performance marks, in order, in ms after navigation, up to the first painted
// flame graph (as bench.mjs times it) and beyond.
//
// usage: node bench/ui/diag.mjs '{"base": URL, "query": SELECTOR, "runs": 3}'
import { launch } from "../../tests/browser/common.mjs";
const args = JSON.parse(process.argv[2] || "{}");
const browser = await launch();
const types = await (await fetch(`${args.base}/api/v1/profile_types`)).json();
const type = types.find((t) => t.split(":")[1] === "cpu") || types[0];
const url = `${args.base}/?from=now-24h&until=now&maxNodes=0&query=${encodeURIComponent(args.query)}&type=${encodeURIComponent(type)}`;
for (let run = 0; run < (args.runs || 3); run++) {
  const context = await browser.newContext({ viewport: { width: 1920, height: 1080 } });
  const page = await context.newPage();
  await page.addInitScript(() => {
    const poll = () => {
      if (window.__ember?.flame?.stats?.drawn > 0) requestAnimationFrame(() => { window.__firstPaint = performance.now(); });
      else requestAnimationFrame(poll);
    };
    requestAnimationFrame(poll);
  });
  await page.goto(url, { waitUntil: "commit" });
  await page.waitForFunction(() => window.__firstPaint, null, { timeout: 60000, polling: 50 });
  await page.waitForFunction(() => window.__ember.ready && window.__ember.loading === 0, null, { timeout: 60000 });
  const t = await page.evaluate(() => {
    const nav = performance.getEntriesByType("navigation")[0];
    const rows = [["nav: responseEnd", nav.responseEnd], ["nav: domInteractive", nav.domInteractive], ["nav: domContentLoaded", nav.domContentLoadedEventStart]];
    for (const e of performance.getEntriesByType("resource")) {
      const n = e.name.replace(/^https?:\/\/[^/]+/, "").slice(0, 60);
      // `sent`: when the request left (after any wait for one of the browser's connections).
      rows.push([`${n} start`, e.startTime], [`${n} sent`, e.requestStart], [`${n} resp`, e.responseStart],
        [`${n} end`, e.responseEnd]);
    }
    for (const m of performance.getEntriesByType("mark")) rows.push(["mark " + m.name, m.startTime]);
    for (const m of performance.getEntriesByType("measure")) rows.push(["measure " + m.name + " dur=" + m.duration.toFixed(1), m.startTime]);
    rows.push(["FIRST PAINT", window.__firstPaint]);
    return rows.sort((a, b) => a[1] - b[1]);
  });
  console.log(`--- run ${run}`);
  for (const [k, v] of t) console.log(v.toFixed(1).padStart(8), k);
  await context.close();
}
await browser.close();
