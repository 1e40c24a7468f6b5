// The Compare view's table of biggest movers: per function its baseline and comparison values
// and the change, computed by the server from both full selections (`/api/v1/diff`,
// `format=top-json`); here only ordered by |change| in the chosen mode and measure. A click
// chooses the function the diff flame graph highlights.

import { formatValue } from "./format.js";

// At most this many rows are built (the table is for the biggest movers, not every function).
const SHOWN = 300;

// The change of a function in `mode` ("abs": value, "norm": share of each side's total) by
// `by` ("self" or "total"): `{a, b, change}` with `a`/`b` the baseline/comparison figures.
export function moverChange(row, data, mode, by) {
  const key = by === "total" ? "Total" : "Self";
  let a = row["left" + key], b = row["right" + key];
  if (mode === "norm") {
    a = data.leftTotal ? a / data.leftTotal : 0;
    b = data.rightTotal ? b / data.rightTotal : 0;
  }
  return { a, b, change: b - a };
}

// A share as a percentage; a change of share in percentage points.
const pct = (v) => (100 * v).toFixed(2) + " %";
const pp = (v) => (v > 0 ? "+" : v < 0 ? "−" : "") + Math.abs(100 * v).toFixed(2) + " pp";
const signed = (v, unit) => (v > 0 ? "+" : v < 0 ? "−" : "") + formatValue(Math.abs(v), unit);

export class MoversTable {
  // `onPick(name)` is called with the clicked function ("" when it is clicked again).
  constructor(table, { onPick }) {
    Object.assign(this, { table, onPick });
    this.data = null;
    this.mode = "abs";
    this.by = "self";
    this.picked = "";
    this.unit = "count";
  }

  set({ data, unit, mode, by, picked }) {
    if (data !== undefined) { this.data = data; this.unit = unit; }
    if (mode !== undefined) this.mode = mode;
    if (by !== undefined) this.by = by;
    if (picked !== undefined) this.picked = picked;
    this.render();
  }

  // The rows by |change|, largest first (ties: by name), each with its figures.
  rows() {
    if (!this.data) return [];
    return this.data.rows
      .map((r) => ({ name: r.name, ...moverChange(r, this.data, this.mode, this.by) }))
      .filter((r) => r.a !== 0 || r.b !== 0)
      .sort((x, y) => Math.abs(y.change) - Math.abs(x.change) || x.name.localeCompare(y.name));
  }

  render() {
    const t = this.table;
    t.replaceChildren();
    const head = t.createTHead().insertRow();
    const what = this.by === "total" ? "total" : "self";
    const labels = ["Function", `Baseline ${what}`, `Comparison ${what}`, this.mode === "norm" ? "Change (share)" : "Change"];
    for (const label of labels) {
      const th = document.createElement("th");
      th.textContent = label;
      head.append(th);
    }
    if (!this.data) return;
    const body = t.createTBody();
    const show = this.mode === "norm" ? pct : (v) => formatValue(v, this.unit);
    for (const r of this.rows().slice(0, SHOWN)) {
      const tr = body.insertRow();
      tr.dataset.name = r.name;
      if (r.name === this.picked) tr.className = "picked";
      const change = this.mode === "norm" ? pp(r.change) : signed(r.change, this.unit);
      for (const c of [r.name, show(r.a), show(r.b), change]) tr.insertCell().textContent = c;
      tr.cells[0].title = r.name;
      tr.cells[3].className = r.change > 0 ? "more" : r.change < 0 ? "less" : "";
      tr.addEventListener("click", () => this.onPick(this.picked === r.name ? "" : r.name));
    }
  }
}
