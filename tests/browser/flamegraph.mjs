// Drives Debian's chromium (through playwright-core) over an Ember flame graph SVG and checks
// that it works offline: it loads without errors or network requests, hovering shows a
// tooltip, clicking zooms, "Reset Zoom" restores, and searching reports the matched share.
//
// usage: node flamegraph.mjs SVG REGEX EXPECTED_MATCH_PERCENT ZOOM_FRAME_NAME
// Prints one line per check; exits non-zero on the first failure.
import { check, launch, runChecks } from "./common.mjs";
import { pathToFileURL } from "node:url";

const [svgPath, searchTerm, expectedMatch, zoomName] = process.argv.slice(2);
if (!zoomName) {
  console.error("usage: node flamegraph.mjs SVG REGEX EXPECTED_MATCH_PERCENT ZOOM_FRAME_NAME");
  process.exit(2);
}

const browser = await launch();
await runChecks(browser, async () => {
  const page = await browser.newPage({ viewport: { width: 1300, height: 900 } });
  const problems = [];
  page.on("pageerror", (e) => problems.push("page error: " + e.message));
  page.on("console", (m) => { if (m.type() === "error") problems.push("console: " + m.text()); });
  const remote = [];
  await page.route("**/*", (route) => {
    const url = route.request().url();
    if (url.startsWith("file:")) return route.continue();
    remote.push(url);
    return route.abort();
  });
  await page.goto(pathToFileURL(svgPath).href);
  await page.waitForFunction(() => typeof em !== "undefined" && em.all.length > 0);
  check(problems.length === 0, "loads without script errors " + JSON.stringify(problems));
  check(remote.length === 0, "makes no network requests " + JSON.stringify(remote));

  const frameCount = await page.evaluate(() => em.all.length);
  check(frameCount > 10, `has frames (${frameCount})`);

  // Hover: the details line shows name, count and percentage.
  // Find the frame by name and act on it with the mouse, as a person would.
  const index = await page.evaluate((name) => em.all.findIndex((f) => f.name === name), zoomName);
  check(index >= 0, `frame ${JSON.stringify(zoomName)} is drawn`);
  const box = await page.evaluate((i) => {
    const r = em.all[i].rect.getBoundingClientRect();
    return { x: r.x + r.width / 2, y: r.y + r.height / 2 };
  }, index);
  await page.mouse.move(box.x, box.y);
  const details = await page.locator("#details").textContent();
  check(details.includes(zoomName) && /samples/.test(details) && /%/.test(details),
    `hover shows the tooltip: ${JSON.stringify(details)}`);

  // Click: the frame fills the width, the reset button appears.
  await page.mouse.click(box.x, box.y);
  const zoomedWidth = await page.evaluate((i) => em.all[i].rect.getAttribute("width"), index);
  check(zoomedWidth === "100.0000%", `click zooms the frame to the full width (${zoomedWidth})`);
  const unzoomHidden = await page.evaluate(() => em.unzoom.classList.contains("hide"));
  check(!unzoomHidden, "Reset Zoom is shown after zooming");

  // Reset zoom: widths go back to their share of the total.
  await page.locator("#unzoom").click();
  const restored = await page.evaluate(() => {
    return em.all.every((f) => Math.abs(parseFloat(f.rect.getAttribute("width")) - f.w / em.total * 100) < 1e-3);
  });
  check(restored, "Reset Zoom restores every frame's width");

  // Search: answer the prompt with a regex; the matched share is reported.
  page.once("dialog", (d) => d.accept(searchTerm));
  await page.locator("#search").click();
  const matched = (await page.locator("#matched").textContent()).trim();
  check(matched === `Matched: ${expectedMatch}%`, `search "${searchTerm}" reports ${JSON.stringify(matched)}, expected "Matched: ${expectedMatch}%"`);
  const highlighted = await page.evaluate(() => em.orig.size);
  check(highlighted > 0, `search highlights matching frames (${highlighted})`);
  await page.keyboard.press("Escape");
  const cleared = (await page.locator("#matched").textContent()).trim();
  check(cleared === "", "Escape clears the search");

  await page.screenshot({ path: svgPath + ".png" });
});
