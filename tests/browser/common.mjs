// What every browser check shares: reading its JSON argument, reporting a check, and starting
// Debian's chromium (through playwright-core) headless, offline-minded (no background
// networking, updates or sync), at the path in $CHROMIUM or /usr/bin/chromium.
import { chromium } from "playwright-core";

/** The script's JSON argument; exits with a usage line (status 2) when it is missing. */
export function jsonArgument(script) {
  const want = JSON.parse(process.argv[2] || "null");
  if (!want) {
    console.error(`usage: node ${script} JSON`);
    process.exit(2);
  }
  return want;
}

/** Prints "ok: what", or throws "FAILED: what" so the script exits non-zero. */
export function check(ok, what) {
  if (!ok) throw new Error("FAILED: " + what);
  console.log("ok: " + what);
}

/** A headless chromium. */
export function launch() {
  return chromium.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
}

/**
 * Runs `body` (the checks), prints the failure's message if one throws, closes `browser`,
 * and exits: 0 when every check passed, 1 otherwise.
 */
export async function runChecks(browser, body) {
  let failed = false;
  try {
    await body();
  } catch (e) {
    console.log(e.message);
    failed = true;
  } finally {
    await browser.close();
  }
  process.exit(failed ? 1 : 0);
}

/**
 * A page of a new 1280×800 context of `browser` that records what must not happen: page
 * errors and console errors go to `problems`, and every request outside `base`'s origin is
 * aborted and kept in `foreign` (the UI must work offline).
 */
export async function watchedPage(browser, base) {
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const page = await context.newPage();
  const problems = [];
  page.on("pageerror", (e) => problems.push("page error: " + e.message));
  page.on("console", (m) => { if (m.type() === "error") problems.push("console: " + m.text()); });
  const origin = new URL(base).origin;
  const foreign = [];
  await context.route("**/*", (route) => {
    const url = route.request().url();
    if (url.startsWith(origin + "/")) return route.continue();
    foreign.push(url);
    return route.abort();
  });
  return { context, page, problems, foreign };
}
