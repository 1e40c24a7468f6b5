// The web UI against a server with bearer-token auth (`ember server --auth-tokens`): the page
// itself loads without a token, the API's 401 becomes a readable request for the token, and
// once it is typed the page shows the token's tenant's data.
//
// usage: node ui_auth.mjs '{"base": ..., "token": ..., "service": ..., "screenshots": ...}'
import { check, jsonArgument, launch, runChecks } from "./common.mjs";
import { join } from "node:path";

const want = jsonArgument("ui_auth.mjs");

const browser = await launch();
await runChecks(browser, async () => {
  const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  const problems = [];
  page.on("pageerror", (e) => problems.push("page error: " + e.message));
  page.on("console", (m) => {
    // The browser reports the expected 401 as a failed resource load; anything else counts.
    if (m.type() === "error" && !/status of 401/.test(m.text())) problems.push("console: " + m.text());
  });
  const ready = () => page.waitForFunction(() => window.__ember?.ready && window.__ember.loading === 0);

  await page.goto(want.base + "/");
  await ready();
  const asked = await page.locator("#status").textContent();
  check(/bearer token/.test(asked) && /401/.test(asked), `a 401 asks for the token: ${JSON.stringify(asked)}`);
  check(await page.locator("#token-box").isVisible(), "the token field is shown");
  await page.screenshot({ path: join(want.screenshots, "08-auth-asks.png") });

  await page.fill("#token", want.token);
  await page.locator("#token").press("Enter");
  await page.locator("#token").blur();
  await page.waitForFunction((s) => (window.__ember.view.services || []).includes(s), want.service);
  await ready();
  check(await page.locator("#status").isHidden(), "the error is gone once the token is set");
  await page.selectOption("#service", want.service);
  await ready();
  const v = await page.evaluate(() => window.__ember.view);
  check(v.nodes > 20 && v.topFrame === want.topFrame, `the token's tenant's flame graph (${v.topFrame})`);
  check(!page.url().includes(want.token), "the token is not in the URL");
  // Export: the download carries the token too (a plain link could not).
  const [download] = await Promise.all([page.waitForEvent("download"), page.click("#export-pprof")]);
  await download.saveAs(want.download);
  check(download.suggestedFilename() === "profile.pb.gz", `the pprof export downloads (${download.suggestedFilename()})`);
  await page.reload();
  await ready();
  check((await page.evaluate(() => window.__ember.view.nodes)) > 20, "the token survives a reload of the tab");
  check(problems.length === 0, "no other console or page errors " + JSON.stringify(problems));
  check(true, "all checks ran");
});
