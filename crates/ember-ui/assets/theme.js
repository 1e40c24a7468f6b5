// The colour theme: the system's (prefers-color-scheme) unless the header's toggle picks light
// or dark; the choice is kept in this browser (localStorage), not in the view's address.

const KEY = "ember-theme";
const NEXT = { "": "light", light: "dark", dark: "" };
const LABEL = { "": "auto", light: "light", dark: "dark" };
const dark = window.matchMedia("(prefers-color-scheme: dark)");

// The theme in effect: "light" or "dark".
export function currentTheme() {
  const chosen = document.documentElement.dataset.theme;
  return chosen || (dark.matches ? "dark" : "light");
}

// Wires `button` (cycles auto → light → dark); `onChange()` redraws what is painted on
// canvases (they read the theme's colours when they draw).
export function initTheme(button, onChange) {
  const apply = (choice) => {
    if (choice) document.documentElement.dataset.theme = choice;
    else delete document.documentElement.dataset.theme;
    button.textContent = "Theme: " + LABEL[choice];
    button.title = "Colour theme: " + (choice ? choice : `the system's (now ${currentTheme()})`) + ". Click for " + LABEL[NEXT[choice]];
    onChange(currentTheme());
  };
  let choice = "";
  try { choice = localStorage.getItem(KEY) || ""; } catch { /* storage blocked: auto */ }
  if (!(choice in NEXT)) choice = "";
  apply(choice);
  button.addEventListener("click", () => {
    choice = NEXT[choice];
    try { localStorage.setItem(KEY, choice); } catch { /* kept for this page only */ }
    apply(choice);
  });
  dark.addEventListener("change", () => apply(choice));
}
