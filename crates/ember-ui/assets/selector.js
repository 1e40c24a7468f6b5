// The label-selector editor: `{name="value", other=~"re.*"}` text with autocompletion of
// label names and values (from the API), and helpers to read or set one matcher.

const MATCHER = /([A-Za-z_][\w.]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"/g;

function quote(v) {
  return JSON.stringify(v);
}

// The matchers of a selector: `[{name, op, value}]`.
export function matchers(selector) {
  return [...(selector || "").matchAll(MATCHER)].map((m) => ({
    name: m[1], op: m[2], value: JSON.parse('"' + m[3] + '"'),
  }));
}

// `selector` with `name="value"` as its only matcher on `name` (removed when `value` is "").
export function setMatcher(selector, name, value) {
  const rest = matchers(selector).filter((m) => m.name !== name);
  if (value) rest.unshift({ name, op: "=", value });
  return "{" + rest.map((m) => `${m.name}${m.op}${quote(m.value)}`).join(", ") + "}";
}

// What the caret is in: `{kind: "name", prefix}`, `{kind: "value", name, prefix}` or null.
export function context(text, caret) {
  const before = text.slice(0, caret);
  const value = before.match(/([A-Za-z_][\w.]*)\s*(?:=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)$/);
  if (value) return { kind: "value", name: value[1], prefix: value[2] };
  const name = before.match(/(?:^\{?|[{,]\s*)([A-Za-z_][\w.]*)?$/);
  if (name) return { kind: "name", prefix: name[1] || "" };
  return null;
}

// Suggestions shown at a time (and added by each "more"), and how long a fetched list of
// label names or values is reused while typing.
const PAGE = 50;
const CACHE_MS = 30_000;

export class SelectorInput {
  // `input` holds the selector, `list` (an <ul>) shows suggestions; `names()` and
  // `values(name)` resolve to arrays of strings or of `{value, note}`; `onCommit(text)`
  // applies the selector.
  constructor(input, list, { names, values, onCommit }) {
    Object.assign(this, { input, list, names, values, onCommit });
    this.items = [];
    this.active = -1;
    this.seq = 0;
    // How many suggestions are shown (grows by PAGE with "more"), and the last lists asked
    // for: a label of tens of thousands of values is fetched once, not at every key.
    this.shown = PAGE;
    this.cache = new Map();
    input.addEventListener("input", () => this.suggest());
    input.addEventListener("focus", () => this.suggest());
    input.addEventListener("blur", () => setTimeout(() => this.close(), 150));
    input.addEventListener("keydown", (e) => this.key(e));
  }

  close() {
    this.list.hidden = true;
    this.items = [];
    this.active = -1;
    this.shown = PAGE;
  }

  // The options for `ctx`, from the cache when asked for in the last CACHE_MS. The promise is
  // kept, so keys typed while the list is on its way wait for the same answer.
  options(ctx) {
    const key = ctx.kind === "name" ? "" : "=" + ctx.name;
    const hit = this.cache.get(key);
    if (hit && Date.now() - hit.at < CACHE_MS) return hit.options;
    const options = ctx.kind === "name" ? this.names() : this.values(ctx.name);
    const entry = { at: Date.now(), options };
    this.cache.set(key, entry);
    // A failed answer is not kept: the next key asks again.
    options.catch(() => { if (this.cache.get(key) === entry) this.cache.delete(key); });
    return options;
  }

  // Forgets the cached lists (the selection's range or type changed).
  forget() {
    this.cache.clear();
  }

  async suggest() {
    const seq = ++this.seq;
    const ctx = context(this.input.value, this.input.selectionStart ?? this.input.value.length);
    if (!ctx) { this.close(); return; }
    let options;
    try {
      options = await this.options(ctx);
    } catch {
      return;
    }
    if (seq !== this.seq) return;
    // Options are strings, or `{value, note}` (a label name with its number of values).
    options = options.map((o) => (typeof o === "string" ? { value: o, note: "" } : o));
    const prefix = ctx.prefix.toLowerCase();
    const all = options.filter((o) => o.value.toLowerCase().includes(prefix));
    if (!this.ctx || this.ctx.kind !== ctx.kind || this.ctx.name !== ctx.name || this.ctx.prefix !== ctx.prefix) {
      this.shown = PAGE;
    }
    this.ctx = ctx;
    this.items = all.slice(0, this.shown);
    this.active = this.items.length ? 0 : -1;
    this.list.replaceChildren();
    const head = document.createElement("li");
    head.className = "hint";
    head.textContent = ctx.kind === "name"
      ? `${options.length} label names`
      : `${options.length} values of ${ctx.name}` +
        (all.length > this.items.length ? `, ${this.items.length} of ${all.length} matching shown: type to narrow` : "");
    this.list.append(head);
    this.items.forEach((item, i) => {
      const li = document.createElement("li");
      li.textContent = item.value;
      li.dataset.value = item.value;
      if (item.note) {
        const note = document.createElement("span");
        note.className = "note";
        note.textContent = item.note;
        li.append(note);
      }
      li.addEventListener("mousedown", (e) => { e.preventDefault(); this.accept(i); });
      this.list.append(li);
    });
    if (all.length > this.items.length) {
      // The next page of the matching values (the list is the server's, searched here).
      const more = document.createElement("li");
      more.className = "more";
      more.id = "suggest-more";
      more.textContent = `${Math.min(PAGE, all.length - this.items.length)} more…`;
      more.addEventListener("mousedown", (e) => {
        e.preventDefault();
        this.shown += PAGE;
        this.suggest();
      });
      this.list.append(more);
    }
    this.mark();
    this.list.hidden = false;
  }

  mark() {
    [...this.list.querySelectorAll("li[data-value]")].forEach((li, i) => li.classList.toggle("active", i === this.active));
  }

  accept(i) {
    const item = this.items[i]?.value;
    if (item === undefined) return;
    const text = this.input.value, caret = this.input.selectionStart ?? text.length;
    // The context of the text as it is now: the suggestions may be of a few keys ago.
    const ctx = context(text, caret);
    if (!ctx || ctx.kind !== this.ctx.kind) return;
    const start = caret - ctx.prefix.length;
    const insert = ctx.kind === "name" ? item + "=\"" : JSON.stringify(item).slice(1, -1) + "\"";
    let after = text.slice(caret);
    if (ctx.kind === "value" && after.startsWith("\"")) after = after.slice(1);
    this.input.value = text.slice(0, start) + insert + after;
    const pos = start + insert.length;
    this.input.setSelectionRange(pos, pos);
    this.input.focus();
    this.suggest();
  }

  key(e) {
    const open = !this.list.hidden && this.items.length > 0;
    if (open && (e.key === "ArrowDown" || e.key === "ArrowUp")) {
      e.preventDefault();
      const n = this.items.length;
      this.active = (this.active + (e.key === "ArrowDown" ? 1 : n - 1)) % n;
      this.mark();
    } else if (open && e.key === "Tab") {
      e.preventDefault();
      this.accept(Math.max(0, this.active));
    } else if (e.key === "Enter") {
      e.preventDefault();
      this.close();
      this.onCommit(this.input.value);
    } else if (e.key === "Escape") {
      this.close();
    }
  }
}
