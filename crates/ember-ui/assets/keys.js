// The page's keyboard shortcuts and the help overlay that lists them ("?" or the header's
// "?" button). The shortcuts act on the page shown (Explore or Compare).

const $ = (id) => document.getElementById(id);

// Every shortcut: its keys and what it does (the help overlay's rows).
export const SHORTCUTS = [
  ["/", "search the flame graph (a regular expression)"],
  ["Esc", "close this help; else leave the search box, or reset the zoom"],
  ["Backspace", "zoom out one level"],
  ["Alt+←  Alt+→", "back and forward through views: zoom, range, selector and page are in the address"],
  ["?", "show or hide this help"],
];

// Whether a key pressed in `target` is the control's own (typing in a field).
function typing(target) {
  return target instanceof HTMLInputElement || target instanceof HTMLTextAreaElement ||
    target instanceof HTMLSelectElement || target?.isContentEditable;
}

// Shows (`on`) or hides the help overlay; focus goes to its close button and back.
function showHelp(on) {
  const help = $("help");
  if (help.hidden === !on) return;
  help.hidden = !on;
  $("help-btn").setAttribute("aria-expanded", String(on));
  if (on) $("help-close").focus();
  else $("help-btn").focus();
}

// Installs the shortcuts. `search()` focuses the page's search box, `zoom()` is its zoom path
// (names joined by ";"), `zoomTo(path)` zooms to a path of names (empty = reset).
export function installKeys({ search, zoom, zoomTo }) {
  const rows = SHORTCUTS.map(([keys, what]) => {
    const tr = document.createElement("tr");
    const k = document.createElement("th");
    k.scope = "row";
    for (const key of keys.split("  ")) {
      const kbd = document.createElement("kbd");
      kbd.textContent = key;
      k.append(kbd, " ");
    }
    const d = document.createElement("td");
    d.textContent = what;
    tr.append(k, d);
    return tr;
  });
  $("help-keys").replaceChildren(...rows);
  $("help-btn").addEventListener("click", () => showHelp($("help").hidden));
  $("help-close").addEventListener("click", () => showHelp(false));
  document.addEventListener("keydown", (e) => {
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    if (typing(e.target)) {
      // Esc in a search box hands the keys back to the page (the text stays).
      if (e.key === "Escape" && e.target.type === "search") e.target.blur();
      return;
    }
    const helpOpen = !$("help").hidden;
    if (e.key === "?") {
      e.preventDefault();
      showHelp(!helpOpen);
    } else if (e.key === "Escape") {
      if (helpOpen) showHelp(false);
      else zoomTo([]);
    } else if (helpOpen) {
      return;
    } else if (e.key === "/") {
      e.preventDefault();
      search();
    } else if (e.key === "Backspace") {
      e.preventDefault();
      const path = zoom() ? zoom().split(";") : [];
      if (path.length) zoomTo(path.slice(0, -1));
    }
  });
}
