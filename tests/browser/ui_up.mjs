// Opens the URL `ember up` printed, as a new user would, in Debian's chromium (through
// playwright-core; see `up_profiles_this_host_and_stops_cleanly` in
// crates/ember/tests/agent_up.rs): the page lists this host's services, and choosing the
// workload's service shows its flame graph and top table with the workload's function.
//
// usage: node ui_up.mjs '{"url": ..., "service": ..., "function": ..., "screenshots": DIR}'.
// Prints one line per check; exits non-zero on the first failure.
import { check, jsonArgument, launch, runChecks } from "./common.mjs";
import { join } from "node:path";

const want = jsonArgument("ui_up.mjs");
const browser = await launch();
await runChecks(browser, async () => {
  const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  const errors = [];
  page.on("console", (m) => { if (m.type() === "error") errors.push(m.text()); });
  const ready = () => page.waitForFunction(() => window.__ember?.ready && window.__ember.loading === 0);
  const response = await page.goto(want.url);
  check(response.status() === 200, `the printed URL ${want.url} answers 200`);
  await ready();
  const services = await page.locator("#service option").evaluateAll((os) => os.map((o) => o.value));
  check(services.includes(want.service), `the service list holds this host's ${want.service} (${services.length} services)`);
  await page.selectOption("#service", want.service);
  await ready();
  await page.waitForSelector("#top tbody tr");
  const names = await page.locator("#top tbody tr").evaluateAll((rs) => rs.map((r) => r.dataset.name));
  check(names.some((n) => n.includes(want.function)), `the top table of ${want.service} holds ${want.function}`);
  const v = await page.evaluate(() => JSON.parse(JSON.stringify(window.__ember.view)));
  check(v.total > 0 && v.nodes > 1, `its flame graph is drawn (${v.nodes} nodes)`);
  await page.screenshot({ path: join(want.screenshots, "70-ember-up.png") });
  check(errors.length === 0, "no console error " + errors.join(" | "));
  console.log("ok: all checks ran");
});
