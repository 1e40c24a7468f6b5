// The sandwich of one function: every path that calls it (callers, merged, the function at
// the bottom) above everything it calls (callees, merged, the function at the top), both built
// from the flame graph's model as flamebearer answers the flame view draws.

// A tree node being merged: name, total, self, children by name.
function node(name) {
  return { name, total: 0, self: 0, kids: new Map() };
}

function child(parent, name) {
  let c = parent.kids.get(name);
  if (!c) {
    c = node(name);
    parent.kids.set(name, c);
  }
  return c;
}

// A merged tree as a flamebearer answer: levels of `[x offset, total, self, name]`, heaviest
// children first.
function flamebearer(root) {
  const names = [], ids = new Map(), levels = [], ends = [];
  const id = (n) => {
    if (!ids.has(n)) { ids.set(n, names.length); names.push(n); }
    return ids.get(n);
  };
  const stack = [[root, 0, 0]];
  while (stack.length) {
    const [n, d, x] = stack.pop();
    if (!levels[d]) { levels[d] = []; ends[d] = 0; }
    levels[d].push(x - ends[d], n.total, n.self, id(n.name));
    ends[d] = x + n.total;
    const kids = [...n.kids.values()].sort((a, b) => b.total - a.total || (a.name < b.name ? -1 : 1));
    let cx = x;
    const next = [];
    for (const k of kids) { next.push([k, d + 1, cx]); cx += k.total; }
    stack.push(...next.reverse());
  }
  return { flamebearer: { names, levels, numTicks: root.total, maxSelf: 0 } };
}

// The callers and callees of `fn` in `model` (a FlameModel). Occurrences below another
// occurrence (recursion) are counted once, in the outermost one, so the function's total here
// is its total in the top table. Returns `{callers, callees, total}`; the trees' roots are
// named `fn`.
export function sandwich(model, fn) {
  const covered = [];
  const callers = node(fn), callees = node(fn);
  for (let d = 0; d < model.depth; d++) {
    const lv = model.levels[d], n = lv.x.length;
    const c = new Uint8Array(n);
    for (let i = 0; i < n; i++) {
      const under = d > 0 && covered[d - 1][lv.parent[i]];
      const hit = d > 0 && model.names[lv.name[i]] === fn;
      c[i] = under || hit ? 1 : 0;
      if (!hit || under) continue;
      const v = lv.total[i];
      // Callers: the path upwards, nearest caller first.
      callers.total += v;
      let up = callers, pd = d, pi = i;
      while (pd > 1) {
        pi = model.levels[pd].parent[pi];
        pd -= 1;
        up = child(up, model.nameOf(pd, pi));
        up.total += v;
      }
      up.self += v;
      // Callees: the subtree, merged by path of names.
      callees.total += v;
      callees.self += lv.self[i];
      const todo = [[d, i, callees]];
      while (todo.length) {
        const [sd, si, into] = todo.pop();
        const below = model.levels[sd + 1];
        if (!below) continue;
        for (let j = model.firstAt(sd + 1, model.levels[sd].x[si]); j < below.x.length && below.parent[j] === si; j++) {
          const k = child(into, model.names[below.name[j]]);
          k.total += below.total[j];
          k.self += below.self[j];
          todo.push([sd + 1, j, k]);
        }
      }
    }
    covered.push(c);
  }
  return { callers: flamebearer(callers), callees: flamebearer(callees), total: callers.total };
}
