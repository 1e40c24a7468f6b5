// Drives Debian's chromium (through playwright-core) over the selector editor with a label of
// tens of thousands of values (see `web_ui_pages_through_tens_of_thousands_of_label_values` in
// crates/ember/tests/ui_more.rs): the editor says how many values the label has, shows one
// page of them, narrows them as the user types, shows the next page on "more", fetches the list
// once (paging and typing do not ask for it again), and accepts a value deep in the list.
//
// usage: node ui_values.mjs '{"base": ..., "service": ..., "label": NAME, "count": N,
// "typed": PREFIX, "matching": N, "pick": VALUE, "screenshots": DIR}'. Prints one line per
// check; exits non-zero on the first failure.
import { check, jsonArgument, launch, runChecks } from "./common.mjs";
import { join } from "node:path";

const want = jsonArgument("ui_values.mjs");
const browser = await launch();
await runChecks(browser, async () => {
  const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  const errors = [];
  page.on("console", (m) => { if (m.type() === "error") errors.push(m.text()); });
  let fetched = 0;
  page.on("request", (r) => { if (r.url().includes(`/api/v1/label/${want.label}/values`)) fetched++; });
  await page.goto(want.base + "/?query=" + encodeURIComponent(`{service_name="${want.service}"}`));
  await page.waitForFunction(() => window.__ember?.ready && window.__ember.loading === 0);
  const input = page.locator("#selector");
  await input.click();
  await input.press("End");
  await input.press("Backspace"); // the closing brace: the caret is inside the selector
  await input.type(`, ${want.label}="`);
  const hint = page.locator("#suggest li.hint");
  await page.waitForFunction((n) => document.querySelector("#suggest li.hint")?.textContent.includes(`${n} values`), want.count);
  check((await hint.textContent()).includes(`${want.count} values of ${want.label}`), `the label's ${want.count} values are counted: ${await hint.textContent()}`);
  const shown = () => page.locator("#suggest li[data-value]").count();
  check(await shown() === 50, `one page of 50 values is shown (${await shown()})`);
  // From here on the list is in hand: paging and typing must not ask for it again.
  fetched = 0;
  await page.locator("#suggest-more").dispatchEvent("mousedown");
  await page.waitForFunction(() => document.querySelectorAll("#suggest li[data-value]").length === 100);
  check(await shown() === 100, "\"more\" shows the next page");
  await input.type(want.typed, { delay: 20 });
  await page.waitForFunction((n) => document.querySelector("#suggest li.hint")?.textContent.includes(`of ${n} matching`) ||
    document.querySelectorAll("#suggest li[data-value]").length === n, want.matching);
  const narrowed = await shown();
  check(narrowed === Math.min(50, want.matching), `typing ${want.typed} narrows to ${want.matching} values (${narrowed} shown)`);
  check(fetched === 0, `paging and typing reuse the list of values (${fetched} more fetches)`);
  await page.locator(`#suggest li[data-value="${want.pick}"]`).dispatchEvent("mousedown");
  check((await input.inputValue()).includes(`${want.label}="${want.pick}"`), `${want.pick} is accepted into the selector`);
  await page.screenshot({ path: join(want.screenshots, "61-label-values.png") });
  check(errors.length === 0, "no console error " + errors.join(" | "));
  console.log("ok: all checks ran");
});
