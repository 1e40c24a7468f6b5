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
