// The flame graph's model: a flamebearer answer decoded into per-depth typed arrays (absolute
// x, total, self, name, parent), and the questions the view asks of it: paths, zoom targets,
// search matches with their share, the node under the pointer.

export class FlameModel {
  // `fb` is the API's flamebearer JSON (`/api/v1/query`, format flamebearer).
  constructor(fb) {
    const f = fb.flamebearer;
    this.names = f.names;
    this.total = f.numTicks;
    this.levels = f.levels.map((row) => {
      const n = row.length / 4;
      const level = {
        x: new Float64Array(n), total: new Float64Array(n), self: new Float64Array(n),
        name: new Int32Array(n), parent: new Int32Array(n),
      };
      let end = 0;
      for (let i = 0; i < n; i++) {
        const x = end + row[4 * i];
        level.x[i] = x;
        level.total[i] = row[4 * i + 1];
        level.self[i] = row[4 * i + 2];
        level.name[i] = row[4 * i + 3];
        end = x + row[4 * i + 1];
      }
      return level;
    });
    // Parents by a merge walk of each pair of levels (both sorted by x).
    for (let d = 1; d < this.levels.length; d++) {
      const up = this.levels[d - 1], lv = this.levels[d];
      let p = 0;
      for (let i = 0; i < lv.x.length; i++) {
        while (p + 1 < up.x.length && up.x[p] + up.total[p] <= lv.x[i]) p++;
        lv.parent[i] = p;
      }
    }
    this.nodeCount = this.levels.reduce((a, l) => a + l.x.length, 0);
  }

  get depth() { return this.levels.length; }

  nameOf(d, i) { return this.names[this.levels[d].name[i]]; }

  // The names from depth 1 down to node (d, i).
  path(d, i) {
    const out = [];
    for (; d > 0; d--) {
      out.push(this.nameOf(d, i));
      i = this.levels[d].parent[i];
    }
    return out.reverse();
  }

  // The node at the end of a path of names, or the deepest node found along it
  // (`[depth, index]`; `[0, 0]` is the root).
  find(path) {
    let d = 0, i = 0;
    for (const name of path) {
      const lv = this.levels[d + 1];
      if (!lv) break;
      let found = -1;
      for (let j = this.firstAt(d + 1, this.levels[d].x[i]); j < lv.x.length && lv.parent[j] === i; j++) {
        if (this.names[lv.name[j]] === name) { found = j; break; }
      }
      if (found < 0) break;
      d += 1;
      i = found;
    }
    return [d, i];
  }

  // Index of the first node of depth `d` whose end is past `x` (binary search).
  firstAt(d, x) {
    const lv = this.levels[d];
    let lo = 0, hi = lv.x.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (lv.x[mid] + lv.total[mid] <= x) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  // The node of depth `d` covering position `x`, or -1.
  at(d, x) {
    if (d < 0 || d >= this.levels.length) return -1;
    const i = this.firstAt(d, x);
    const lv = this.levels[d];
    return i < lv.x.length && lv.x[i] <= x ? i : -1;
  }

  // Marks the nodes whose name satisfies `pred`: per depth a Uint8Array of flags, how many
  // nodes match, and their share: the total of the matches not below another match (so
  // recursion is counted once), within the node (zd, zi) when given.
  mark(pred, zd = 0, zi = 0) {
    const hits = this.names.map((n) => (pred(n) ? 1 : 0));
    const flags = [], covered = [];
    let count = 0, value = 0;
    const zx = this.levels[zd].x[zi], zend = zx + this.levels[zd].total[zi];
    for (let d = 0; d < this.levels.length; d++) {
      const lv = this.levels[d], n = lv.x.length;
      const f = new Uint8Array(n), c = new Uint8Array(n);
      for (let i = 0; i < n; i++) {
        const inherited = d > 0 && covered[d - 1][lv.parent[i]];
        if (d > 0 && hits[lv.name[i]]) {
          f[i] = 1;
          count++;
          if (!inherited && lv.x[i] >= zx && lv.x[i] < zend) value += lv.total[i];
        }
        c[i] = inherited || f[i];
      }
      flags.push(f);
      covered.push(c);
    }
    return { flags, count, value };
  }

  // The widest child of the root: the frame most of the time goes through first.
  topFrame() {
    const lv = this.levels[1];
    if (!lv) return "";
    let best = 0;
    for (let i = 1; i < lv.x.length; i++) if (lv.total[i] > lv.total[best]) best = i;
    return this.nameOf(1, best);
  }
}

// A regex from the search box, case-insensitive; null for empty text, an Error when invalid.
export function searchRegex(text) {
  if (!text) return null;
  try { return new RegExp(text, "i"); } catch (e) { return e; }
}
