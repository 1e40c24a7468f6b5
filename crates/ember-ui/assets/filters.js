// Frame filters, applied by the server before its node limit: hide the frames whose name
// matches a regex (wrappers, runtime), collapse direct recursion, drop everything below a
// function, and focus on one function (only the stacks through it, every call site of it
// added up under one root frame). They live in the URL like the rest of the view and go with every query of the
// selection (flame graph, top table, call graph, single profiles, exports), so a hidden frame
// never spends a node of the limit.

// The API parameters of the filters set in `state` (none when none is set).
export function filterParams(state) {
  const p = {};
  if (state.hide) p.hide = state.hide;
  if (state.rec) p.collapseRecursion = "true";
  if (state.below) p.dropBelow = state.below;
  if (state.ffn) p.focusFunction = state.ffn;
  return p;
}

// Wires the filter controls (`#hide`, `#rec`, `#below`, `#below-clear`, and the focus on the
// function chosen in the table: `#focus-fn-btn`, `#ffn`, `#ffn-clear`): `get()` is the
// current view state, `apply()` runs after a change. Returns the function that shows the
// state in the controls (after a reload or Back).
export function wireFilters({ $, get, apply }) {
  const hide = $("hide"), rec = $("rec"), below = $("below"), clear = $("below-clear");
  const set = (key, value) => {
    const s = get();
    if (s[key] === value) return;
    s[key] = value;
    apply();
  };
  hide.addEventListener("change", () => set("hide", hide.value.trim()));
  rec.addEventListener("change", () => set("rec", rec.checked ? "1" : ""));
  below.addEventListener("change", () => set("below", below.value.trim()));
  clear.addEventListener("click", () => set("below", ""));
  $("focus-fn-btn").addEventListener("click", () => set("ffn", get().fn));
  $("ffn-clear").addEventListener("click", () => set("ffn", ""));
  return () => {
    const s = get();
    hide.value = s.hide;
    rec.checked = s.rec === "1";
    below.value = s.below;
    clear.hidden = !s.below;
    $("ffn").hidden = !s.ffn;
    $("ffn-name").textContent = s.ffn;
    const on = Boolean(s.hide || s.rec || s.below || s.ffn);
    $("filters").classList.toggle("on", on);
  };
}
