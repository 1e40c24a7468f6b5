// Drives Debian's chromium (through playwright-core) over the honest states of Ember's web UI
// (see `web_ui_states_keys_themes_and_contrast` in crates/ember/tests/ui_more.rs): the loading
// indicator, the no-data hints, an unreachable server, the keyboard shortcuts and their help
// overlay, the theme toggle (and the system's setting), layouts at 1280×800 and 1920×1080,
// and WCAG AA contrast (4.5:1) of the main text and of the flame graph's labels in both themes,
// computed from the colours the browser renders.
//
// usage: node ui_states.mjs '{"base": ..., "service": ..., "zoomPath": [...], "diffService":
// ..., "screenshots": DIR}'. Prints one line per check; exits non-zero on the first failure.
import { check, jsonArgument, launch, runChecks } from "./common.mjs";
import { join } from "node:path";

const want = jsonArgument("ui_states.mjs");

// Text elements whose contrast is checked (those shown on the page at the time).
const TEXT = [
  "header h1", "header label", "#type", "#theme", "#help-btn", "#page-explore", "#refresh", "#presets button",
  "#selector", "#total", "#search-result", "#crumbs button", "#top th", "#top td", "a#export-pprof",
  "#export-png", "#legend button", "#status", ".legend-row label", "#help th kbd", "#help td", "#help p",
  "#tooltip .tip-name", "#tooltip div:not(.tip-name)", "#l-range", ".sides legend", "#cmp-legend-text",
  "#movers th", "#movers td", "#movers td.more", "#movers td.less", "#cmp-export-png",
];

// In the page: the contrast ratio of each shown element of `selectors` (text colour against
// the background it is drawn on, both as rendered), and of the flame graph labels' colour
// pairs. Returns `{text: [[selector, ratio, fg, bg]], labels: [[what, ratio]]}`.
async function contrasts(selectors) {
  const rgba = (c) => {
    const m = /rgba?\(([^)]+)\)/.exec(c);
    const p = m[1].split(/[\s,/]+/).filter(Boolean).map(Number);
    return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1];
  };
  const over = (top, under) => top.slice(0, 3).map((v, i) => v * top[3] + under[i] * (1 - top[3])).concat(1);
  const lum = ([r, g, b]) => {
    const f = (v) => ((v /= 255) <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4);
    return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
  };
  const ratio = (a, b) => {
    const [x, y] = [lum(a), lum(b)].sort((p, q) => q - p);
    return (x + 0.05) / (y + 0.05);
  };
  // The background an element is drawn on: its and its ancestors' backgrounds, composed.
  const background = (el) => {
    const layers = [];
    for (let e = el; e; e = e.parentElement) {
      const c = rgba(getComputedStyle(e).backgroundColor);
      if (c[3] > 0) layers.push(c);
      if (c[3] === 1) break;
    }
    let bg = [255, 255, 255, 1];
    if (!layers.length || layers[layers.length - 1][3] < 1) bg = rgba(getComputedStyle(document.documentElement).backgroundColor);
    if (bg[3] < 1) bg = [255, 255, 255, 1];
    for (const l of layers.reverse()) bg = over(l, bg);
    return bg;
  };
  const text = [];
  for (const sel of selectors) {
    for (const el of document.querySelectorAll(sel)) {
      const r = el.getBoundingClientRect();
      if (!r.width || !r.height || el.closest("[hidden]") || el.disabled || !el.textContent.trim() && el.tagName !== "SELECT" && el.tagName !== "INPUT") continue;
      const bg = background(el);
      const fg = over(rgba(getComputedStyle(el).color), bg);
      text.push([sel, ratio(fg, bg), fg.slice(0, 3).map(Math.round).join(","), bg.slice(0, 3).map(Math.round).join(",")]);
      break;
    }
  }
  // The flame graph's labels: the theme's label colours on every fill they are drawn on.
  const css = getComputedStyle(document.documentElement);
  const colour = (c) => {
    const probe = document.createElement("span");
    probe.style.color = c;
    document.body.append(probe);
    const out = rgba(getComputedStyle(probe).color);
    probe.remove();
    return out;
  };
  const { packageColour } = await import(new URL("ui/format.js", location.href).href);
  const { diffColour } = await import(new URL("ui/compare.js", location.href).href);
  const label = colour(css.getPropertyValue("--frame-text"));
  const labels = [];
  const flame = window.__ember.flame.model;
  const names = flame ? flame.names : [];
  for (const n of names) labels.push([`label on ${n}'s colour`, ratio(label, colour(packageColour(n)))]);
  labels.push(["label on the search highlight", ratio(label, colour("hsl(300 75% 62%)"))]);
  labels.push(["label on the chosen function", ratio(label, colour("hsl(210 85% 62%)"))]);
  for (const [a, b] of [[1, 0], [1, 0.5], [0, 1], [0.5, 1], [1, 1], [1, 0.97]]) {
    labels.push([`label on the diff colour ${a}→${b}`, ratio(label, colour(diffColour(a, b)))]);
  }
  labels.push(["dimmed label on a dimmed frame",
    ratio(colour(css.getPropertyValue("--frame-dim-text")), colour(css.getPropertyValue("--frame-dim")))]);
  return { text, labels };
}

const browser = await launch();
await runChecks(browser, async () => {
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const page = await context.newPage();
  const problems = [];
  // Console errors a step expects (a regex), e.g. the 404 of an empty comparison.
  let expectErrors = null;
  page.on("pageerror", (e) => problems.push("page error: " + e.message));
  page.on("console", (m) => { if (m.type() === "error" && !expectErrors?.test(m.text())) problems.push("console: " + m.text()); });
  const shot = (name) => page.screenshot({ path: join(want.screenshots, name) });
  const ready = () => page.waitForFunction(() => window.__ember?.ready && window.__ember.loading === 0);
  const view = () => page.evaluate(() => JSON.parse(JSON.stringify(window.__ember.view)));
  const status = () => page.locator("#status").textContent();
  const service = `/?query=${encodeURIComponent(`{service_name="${want.service}"}`)}`;

  // 1. Loading: the indicator shows while the flame graph is on its way, and goes.
  let release;
  const held = new Promise((r) => { release = r; });
  await page.route("**/api/v1/query?*", async (route) => { await held; await route.continue(); });
  await page.goto(want.base + service);
  await page.locator("#spinner").waitFor({ state: "visible" });
  check(await page.locator("#spinner").textContent() === "Loading…" && await page.evaluate(() => document.body.classList.contains("busy")),
    "a slow answer shows the loading indicator");
  await shot("40-loading.png");
  release();
  await ready();
  await page.unroute("**/api/v1/query?*");
  check(await page.locator("#spinner").isHidden() && (await view()).nodes > 20, "the indicator goes when the graph is drawn");

  // 2. No data: a tenant with nothing at all, then a selection with nothing in its range.
  await page.goto(want.base + "/?tenant=nobody");
  await ready();
  let said = await status();
  check(/Tenant "nobody" has no profiles at all/.test(said) && /agent/.test(said) && /Tenant field/.test(said),
    "an empty tenant says so, with the agent and tenant hints: " + said);
  await page.goto(want.base + '/?query={service_name="nope"}');
  await ready();
  said = await status();
  check(/^No profiles/.test(said) && /longer range/.test(said) && /agent/.test(said) && /anonymous/.test(said),
    "an empty selection names the range, agent and tenant: " + said);
  expectErrors = /status of 404/;
  await page.goto(want.base + '/?page=compare&query={service_name="nope"}');
  await ready();
  said = await status();
  check(/either side of the comparison/.test(said) && /longer range/.test(said), "an empty comparison says so: " + said);
  await shot("41-no-data.png");
  expectErrors = null;

  // 3. An unreachable server: a readable error, not a blank page.
  expectErrors = /ERR_CONNECTION_REFUSED|Failed to load resource/;
  await page.route("**/api/v1/**", (route) => route.abort("connectionrefused"));
  await page.goto(want.base + service);
  await ready();
  said = await status();
  check(/cannot be reached/.test(said) && await page.locator("#status").getAttribute("class") === "error",
    "an unreachable server is said: " + said);
  await page.unroute("**/api/v1/**");
  expectErrors = null;

  // 4. Keyboard: zoom two levels, Backspace goes up one, Escape resets, "/" searches.
  await page.goto(want.base + service + "&zoom=" + encodeURIComponent(want.zoomPath.join(";")));
  await ready();
  check(JSON.stringify((await view()).zoom) === JSON.stringify(want.zoomPath), "zoomed from the URL " + JSON.stringify(want.zoomPath));
  await page.keyboard.press("Backspace");
  check(JSON.stringify((await view()).zoom) === JSON.stringify(want.zoomPath.slice(0, 1)), "Backspace zooms out one level");
  await page.keyboard.press("Backspace");
  check((await view()).zoom.length === 0, "Backspace again: the whole graph");
  await page.goBack();
  await ready();
  check(JSON.stringify((await view()).zoom) === JSON.stringify(want.zoomPath.slice(0, 1)), "Back (Alt+Left) restores the previous zoom");
  await page.keyboard.press("Escape");
  check((await view()).zoom.length === 0, "Escape resets the zoom");
  await page.keyboard.press("/");
  check(await page.evaluate(() => document.activeElement.id) === "search", "/ focuses the search box");
  await page.keyboard.type("java");
  await page.keyboard.press("Escape");
  check(await page.evaluate(() => document.activeElement.id) !== "search" && (await view()).search?.count > 0,
    "Escape leaves the search box, the search stays");

  // 5. The help overlay lists the shortcuts: "?" opens it, Escape closes it; so does its button.
  await page.keyboard.press("?");
  check(await page.locator("#help").isVisible(), "? opens the help overlay");
  const keys = await page.locator("#help kbd").allTextContents();
  for (const k of ["/", "Esc", "Backspace", "?"]) check(keys.includes(k), `the help lists ${k}`);
  await shot("42-help.png");
  await page.keyboard.press("Escape");
  check(await page.locator("#help").isHidden(), "Escape closes it");
  await page.locator("#help-btn").click();
  check(await page.locator("#help").isVisible() && await page.locator("#help-btn").getAttribute("aria-expanded") === "true", "the ? button opens it");
  await page.locator("#help-close").click();
  check(await page.locator("#help").isHidden(), "its Close button closes it");

  // 6. Contrast, light theme (the system's), with the help and a tooltip shown.
  const measure = async (theme) => {
    await page.locator(`#top tbody tr`).first().click();
    await page.locator("#help-btn").click();
    const frame = await page.evaluate((n) => window.__ember.flame.frameBox(n), want.zoomPath[0]);
    await page.mouse.move(frame.x, frame.y);
    await page.locator("#tooltip").waitFor({ state: "visible" });
    const c = await page.evaluate(contrasts, TEXT);
    await page.locator("#help-close").click();
    await page.locator(`#top tbody tr.picked`).click();
    check(c.text.length >= 20, `${theme}: ${c.text.length} kinds of text measured`);
    const low = c.text.filter(([, r]) => r < 4.5);
    check(low.length === 0, `${theme}: every text passes WCAG AA (lowest ${Math.min(...c.text.map(([, r]) => r)).toFixed(2)}:1) ` + JSON.stringify(low));
    const lowLabels = c.labels.filter(([, r]) => r < 4.5);
    check(c.labels.length > 20 && lowLabels.length === 0,
      `${theme}: the flame graph's labels pass on all ${c.labels.length} fills (lowest ${Math.min(...c.labels.map(([, r]) => r)).toFixed(2)}:1) ` + JSON.stringify(lowLabels));
    return c;
  };
  await page.goto(want.base + service);
  await ready();
  check((await view()).theme === "light", "the theme follows the system: light");
  await measure("light");
  // The movers' colours (Compare).
  const compareContrast = async (theme) => {
    await page.goto(want.base + `/?page=compare&query=${encodeURIComponent(`{service_name="${want.diffService}"}`)}`);
    await ready();
    const c = await page.evaluate(contrasts, TEXT);
    const movers = c.text.filter(([s]) => /movers|legend|range|cmp/.test(s));
    check(movers.length >= 5 && movers.every(([, r]) => r >= 4.5), `${theme}: Compare's texts pass WCAG AA ` + JSON.stringify(movers.map(([s, r]) => [s, r.toFixed(2)])));
  };
  await compareContrast("light");

  // 7. The toggle: light → dark → auto, kept across a reload; canvases redrawn in its colours.
  await page.goto(want.base + service);
  await ready();
  const bg = () => page.evaluate(() => getComputedStyle(document.body).backgroundColor);
  check(await page.locator("#theme").textContent() === "Theme: auto", "the toggle starts on auto");
  await page.locator("#theme").click();
  check(await page.locator("#theme").textContent() === "Theme: light" && await bg() === "rgb(255, 255, 255)", "one click: light");
  await page.locator("#theme").click();
  check(await page.locator("#theme").textContent() === "Theme: dark" && await bg() === "rgb(22, 24, 29)" && (await view()).theme === "dark",
    "two clicks: dark, though the system is light");
  const dimmed = await page.evaluate(() => {
    // The canvas was redrawn in the dark theme: a search dims the rest in its dimmed colour.
    return getComputedStyle(document.documentElement).getPropertyValue("--frame-dim").trim();
  });
  check(dimmed === "#3a3e47", "the canvases draw with the dark theme's colours");
  await page.reload();
  await ready();
  check(await page.locator("#theme").textContent() === "Theme: dark" && await bg() === "rgb(22, 24, 29)", "the choice survives a reload");
  await measure("dark (toggle)");
  await shot("43-dark-toggle.png");
  await compareContrast("dark (toggle)");
  await page.goto(want.base + service);
  await ready();
  await page.locator("#theme").click();
  check(await page.locator("#theme").textContent() === "Theme: auto" && await bg() === "rgb(255, 255, 255)", "a third click: auto again (the system's light)");

  // 8. The system's dark setting, and the toggle's light overriding it.
  await page.emulateMedia({ colorScheme: "dark" });
  await page.reload();
  await ready();
  check(await bg() === "rgb(22, 24, 29)" && (await view()).theme === "dark", "auto follows the system: dark");
  await measure("dark (system)");
  await page.locator("#theme").click();
  check(await bg() === "rgb(255, 255, 255)" && (await view()).theme === "light", "light chosen over the system's dark");
  await measure("light over a dark system");
  await page.locator("#theme").click();
  await page.locator("#theme").click();

  // 9. Layouts: nothing runs off the side at 1280×800 or 1920×1080; the graph has room.
  for (const [w, h, theme] of [[1280, 800, "dark"], [1920, 1080, "dark"], [1280, 800, "light"], [1920, 1080, "light"]]) {
    await page.emulateMedia({ colorScheme: theme });
    await page.setViewportSize({ width: w, height: h });
    await page.goto(want.base + service);
    await ready();
    const layout = await page.evaluate(() => {
      const box = (id) => document.getElementById(id).getBoundingClientRect();
      const right = Math.max(...["export-png", "search", "tenant", "help-btn", "top-filter"].map((id) => box(id).right));
      return { scroll: document.documentElement.scrollWidth, width: innerWidth, right, header: box("status").top,
        graph: box("flame-wrap").height, graphTop: box("flame-wrap").top, height: innerHeight };
    });
    check(layout.scroll <= layout.width && layout.right <= layout.width,
      `${w}×${h} ${theme}: no horizontal overflow (page ${layout.scroll} px, controls end at ${Math.round(layout.right)} px)`);
    check(layout.graph >= 300 && layout.graphTop + 200 < layout.height,
      `${w}×${h} ${theme}: the flame graph is ${Math.round(layout.graph)} px high, starting at ${Math.round(layout.graphTop)} px`);
    await shot(`44-layout-${w}-${theme}.png`);
  }

  check(problems.length === 0, "no console or page errors " + JSON.stringify(problems));
  check(true, "all checks ran");
});
