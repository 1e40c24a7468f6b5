// The flame graph's model: a flamebearer answer decoded into per-depth typed arrays (absolute
// x, total, self, name, parent), and the questions the view asks of it: paths, zoom targets,
// search matches with their share, the node under the pointer. The server's binary flame
// graph (`format=flamebearer-bin`) becomes a model without parsing: `FlameModel.decode`.

// Typed arrays use the machine's byte order; the binary answer is little-endian.
const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

// `n` values of `Type` (Float64Array, Uint32Array or Int32Array) at byte `at` of `buffer`: a
// view of the bytes themselves on a little-endian machine, a decoded copy otherwise.
function column(buffer, Type, at, n) {
  if (at + n * Type.BYTES_PER_ELEMENT > buffer.byteLength) {
    throw new Error("the binary flame graph is cut short");
  }
  if (LITTLE_ENDIAN) return new Type(buffer, at, n);
  const dv = new DataView(buffer), out = new Type(n);
  for (let i = 0; i < n; i++) {
    out[i] = Type === Float64Array ? dv.getFloat64(at + 8 * i, true)
      : Type === Int32Array ? dv.getInt32(at + 4 * i, true) : dv.getUint32(at + 4 * i, true);
  }
  return out;
}

export class FlameModel {
  // `fb` is the API's flamebearer JSON (`/api/v1/query`, format flamebearer), or a diff's
  // `double` one (`/api/v1/diff`): then a frame is as wide as both sides together and the
  // model keeps each side's total and self (`left`, `right`) for the diff's colours.
  constructor(fb) {
    const f = fb.flamebearer;
    const double = fb.metadata?.format === "double";
    const width = double ? 7 : 4;
    this.names = f.names;
    this.total = f.numTicks;
    this.double = double;
    this.leftTicks = fb.leftTicks || 0;
    this.rightTicks = fb.rightTicks || 0;
    this.levels = f.levels.map((row) => {
      const n = row.length / width;
      const level = {
        x: new Float64Array(n), total: new Float64Array(n), self: new Float64Array(n),
        name: new Int32Array(n), parent: new Int32Array(n),
      };
      if (double) {
        Object.assign(level, {
          leftTotal: new Float64Array(n), leftSelf: new Float64Array(n),
          rightTotal: new Float64Array(n), rightSelf: new Float64Array(n),
        });
      }
      // Each side's offsets are relative to the end of the previous node of its side; the
      // combined x is the sum of both sides' absolute x (both lay the tree out in one order).
      let end = 0, endR = 0;
      for (let i = 0; i < n; i++) {
        const r = width * i;
        const x = end + row[r];
        end = x + row[r + 1];
        if (double) {
          const xr = endR + row[r + 3];
          endR = xr + row[r + 4];
          level.x[i] = x + xr;
          level.leftTotal[i] = row[r + 1];
          level.leftSelf[i] = row[r + 2];
          level.rightTotal[i] = row[r + 4];
          level.rightSelf[i] = row[r + 5];
          level.total[i] = row[r + 1] + row[r + 4];
          level.self[i] = row[r + 2] + row[r + 5];
          level.name[i] = row[r + 6];
        } else {
          level.x[i] = x;
          level.total[i] = row[r + 1];
          level.self[i] = row[r + 2];
          level.name[i] = row[r + 3];
        }
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

  // The model of a binary flame graph (an ArrayBuffer of `format=flamebearer-bin`; layout in
  // ember_query::flamebin): the header, then per node (depth by depth, left to right) total
  // and self (a diff: each side's) and name and parent columns, then the names. Each depth's
  // arrays are views into those columns; only x (a node starts where its parent does, plus
  // its earlier siblings' totals; a pruned answer, `minShare`, sends it), values sent as u32
  // multiples of a scale, and a diff's summed sides are computed.
  static decode(buffer) {
    const bytes = new Uint8Array(buffer);
    if (bytes.length < 8 || String.fromCharCode(...bytes.subarray(0, 4)) !== "EMFG") {
      throw new Error("the server's answer is not a binary flame graph");
    }
    const h = new DataView(buffer).getUint32(4, true);
    const utf8 = new TextDecoder();
    const header = JSON.parse(utf8.decode(bytes.subarray(8, 8 + h)));
    const counts = header.levels;
    const n = counts.reduce((a, c) => a + c, 0);
    const double = header.format === "double";
    let at = Math.ceil((8 + h) / 8) * 8;
    const take = (Type, k) => {
      const c = column(buffer, Type, at, k);
      at += k * Type.BYTES_PER_ELEMENT;
      return c;
    };
    // Value columns: u32 multiples of `scale` (made into Float64Arrays of the values) or f64.
    const values = () => {
      if (header.values !== "u32") return take(Float64Array, n);
      const narrow = take(Uint32Array, n), out = new Float64Array(n), scale = header.scale;
      for (let i = 0; i < n; i++) out[i] = narrow[i] * scale;
      return out;
    };
    const sides = double ? [0, 1, 2, 3].map(values) : null;
    let total, self;
    if (double) {
      total = new Float64Array(n);
      self = new Float64Array(n);
      for (let i = 0; i < n; i++) {
        total[i] = sides[0][i] + sides[2][i];
        self[i] = sides[1][i] + sides[3][i];
      }
    } else {
      total = values();
      self = values();
    }
    // A pruned answer (`minShare`) says where each node starts: the nodes left out leave gaps.
    const given = header.x ? values() : null;
    // Int32Array like the JSON model's (indexes well below 2^31): V8 keeps their values small
    // integers in the hot loops (marking, drawing), where Uint32Array's may not be.
    const name = take(Int32Array, n), parent = take(Int32Array, n);
    const lengths = take(Uint32Array, header.names);
    const text = utf8.decode(bytes.subarray(at));
    const names = new Array(header.names);
    for (let i = 0, p = 0; i < names.length; i++) {
      names[i] = text.slice(p, p + lengths[i]);
      p += lengths[i];
    }
    const x = given || new Float64Array(n);
    const m = Object.create(FlameModel.prototype);
    m.names = names;
    m.total = header.numTicks;
    m.double = double;
    m.leftTicks = header.leftTicks || 0;
    m.rightTicks = header.rightTicks || 0;
    m.levels = [];
    for (let d = 0, start = 0, up = 0; d < counts.length; d++) {
      const end = start + counts[d];
      for (let i = given ? end : start; i < end; i++) {
        const p = parent[i];
        if (d === 0) x[i] = 0;
        else if (i > start && p === parent[i - 1]) x[i] = x[i - 1] + total[i - 1];
        else x[i] = x[up + p];
      }
      const level = {
        x: x.subarray(start, end), total: total.subarray(start, end), self: self.subarray(start, end),
        name: name.subarray(start, end), parent: parent.subarray(start, end),
      };
      if (double) {
        const [leftTotal, leftSelf, rightTotal, rightSelf] = sides.map((c) => c.subarray(start, end));
        Object.assign(level, { leftTotal, leftSelf, rightTotal, rightSelf });
      }
      m.levels.push(level);
      up = start;
      start = end;
    }
    m.nodeCount = n;
    return m;
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
