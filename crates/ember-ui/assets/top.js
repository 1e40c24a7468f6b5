// The top table: functions by self and total value, computed by the server from the full
// selection (`format=top-json`), sortable and filterable here; a click chooses the function
// the flame graph highlights.

import { formatValue, percent } from "./format.js";

const COLUMNS = [
  ["name", "Function"], ["self", "Self"], ["selfPct", "Self %"], ["total", "Total"], ["totalPct", "Total %"],
];

export class TopTable {
  // `onPick(name)` is called with the clicked function ("" when it is clicked again);
  // `onSort(column)` and `onFilter(text)` when those change.
  constructor(table, filterInput, { onPick, onSort, onFilter }) {
    Object.assign(this, { table, filterInput, onPick, onSort, onFilter });
    this.data = null;
    this.sort = "self";
    this.filter = "";
    this.picked = "";
    filterInput.addEventListener("input", () => {
      this.filter = filterInput.value;
      this.onFilter(this.filter);
      this.render();
    });
  }

  set({ data, unit, sort, filter, picked }) {
    if (data !== undefined) { this.data = data; this.unit = unit; }
    if (sort !== undefined) this.sort = sort;
    if (filter !== undefined) { this.filter = filter; this.filterInput.value = filter; }
    if (picked !== undefined) this.picked = picked;
    this.render();
  }

  rows() {
    if (!this.data) return [];
    let re = null;
    try { re = this.filter ? new RegExp(this.filter, "i") : null; } catch { re = null; }
    const rows = this.data.rows.filter((r) => !this.filter || (re ? re.test(r.name) : r.name.includes(this.filter)));
    const key = this.sort.replace(/Pct$/, "");
    rows.sort((a, b) => (key === "name" ? a.name.localeCompare(b.name) : b[key] - a[key] || a.name.localeCompare(b.name)));
    return rows;
  }

  render() {
    const t = this.table;
    t.replaceChildren();
    const head = t.createTHead().insertRow();
    for (const [key, label] of COLUMNS) {
      const th = document.createElement("th");
      th.textContent = label + (this.sort === key ? " ▾" : "");
      th.dataset.sort = key;
      th.tabIndex = 0;
      th.addEventListener("click", () => { this.sort = key; this.onSort(key); this.render(); });
      head.append(th);
    }
    if (!this.data) return;
    const body = t.createTBody();
    // A pushed diff profile's table (`leftTotal`: the base's) reads shares against the base's
    // total, as `go tool pprof -top` does.
    const total = this.data.total ?? this.data.leftTotal;
    // The table stays light: only the first rows are built (the filter reaches the rest).
    for (const r of this.rows().slice(0, 500)) {
      const tr = body.insertRow();
      tr.dataset.name = r.name;
      if (r.name === this.picked) tr.className = "picked";
      const cells = [r.name, formatValue(r.self, this.unit), percent(r.self, total),
        formatValue(r.total, this.unit), percent(r.total, total)];
      for (const c of cells) tr.insertCell().textContent = c;
      tr.cells[0].title = r.name;
      tr.addEventListener("click", () => this.onPick(this.picked === r.name ? "" : r.name));
    }
  }
}
