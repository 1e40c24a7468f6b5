// What every differential flame graph shares: the fill of a frame by its change from the
// baseline to the comparison (the Compare view's diff, and a pushed `pprof -diff_base`
// profile in Explore), and the tooltip of a pushed diff, whose shares are of the base's total
// as `go tool pprof` reads such a file. A module of its own so the first paint (`boot.js`
// loads only what draws a flame graph) draws a diff without loading the Compare view.

import { formatValue } from "./format.js";

// Below this relative change a frame counts as unchanged (grey).
const SAME = 0.05;

// The fill of a frame whose figure went from `a` (baseline) to `b` (comparison): red when the
// comparison has more, blue-green when less, grey when about the same; the larger the change
// relative to the larger side, the stronger the colour.
export function diffColour(a, b) {
  const top = Math.max(Math.abs(a), Math.abs(b));
  const r = top ? (b - a) / top : 0;
  if (Math.abs(r) < SAME) return "hsl(0 0% 80%)";
  // At most this dark, so the labels' near-black text keeps WCAG AA contrast (4.5:1) on red.
  const light = Math.round(86 - 29 * Math.min(1, Math.abs(r)));
  return r > 0 ? `hsl(0 85% ${light}%)` : `hsl(190 75% ${light}%)`;
}

// `v` as a signed share of `base` with two decimals, as Go's `-top` prints a diff's
// percentages ("+12.34 %"); "–" without a base.
export function baseShare(v, base) {
  if (!base) return "–";
  const p = (100 * v) / base;
  return (p > 0 ? "+" : p < 0 ? "−" : "") + Math.abs(p).toFixed(2) + " %";
}

// A frame's net change (new − base) as a share of the base's total: what `go tool pprof -top`
// prints as its cum% for a function met once per stack.
export function netShare(model, lv, i) {
  return model.leftTicks ? (lv.rightTotal[i] - lv.leftTotal[i]) / model.leftTicks : 0;
}

// The tooltip rows of frame `i` of depth `lv` of a pushed diff profile (`model.double`):
// each side's value, and the change, every share of the base's total.
export function pushedDiffRows(model, lv, i, unit) {
  const a = lv.leftTotal[i], b = lv.rightTotal[i], base = model.leftTicks;
  const sign = b - a > 0 ? "+" : b - a < 0 ? "−" : "";
  return [
    ["base", `${formatValue(a, unit)} (${baseShare(a, base).replace(/^\+/, "")} of the base), self ${formatValue(lv.leftSelf[i], unit)}`],
    ["new", `${formatValue(b, unit)} (${baseShare(b, base).replace(/^\+/, "")} of the base), self ${formatValue(lv.rightSelf[i], unit)}`],
    ["change", `${sign}${formatValue(Math.abs(b - a), unit)} (${baseShare(b - a, base)} of the base's total, as go tool pprof)`],
  ];
}
