// Formatting shared by every view: values in their sample unit, shares, times, and the
// package a frame belongs to (which decides its colour).

const BINARY = [["GiB", 2 ** 30], ["MiB", 2 ** 20], ["KiB", 2 ** 10]];
const DURATION = [["h", 3600e9], ["min", 60e9], ["s", 1e9], ["ms", 1e6], ["µs", 1e3]];

function trim(x) {
  const digits = x >= 100 ? 0 : x >= 10 ? 1 : 2;
  return x.toFixed(digits).replace(/\.0+$|(\.\d*[1-9])0+$/, "$1");
}

// `v` in `unit` (a pprof sample unit: nanoseconds, microseconds, bytes, count, ...) as short
// text: 1.5 s, 3.2 MiB, 12.3k.
export function formatValue(v, unit) {
  const neg = v < 0 ? "-" : "";
  let a = Math.abs(v);
  if (unit === "microseconds") { a *= 1e3; unit = "nanoseconds"; }
  if (unit === "milliseconds") { a *= 1e6; unit = "nanoseconds"; }
  if (unit === "seconds") { a *= 1e9; unit = "nanoseconds"; }
  if (unit === "nanoseconds") {
    for (const [name, size] of DURATION) if (a >= size) return neg + trim(a / size) + " " + name;
    return neg + trim(a) + " ns";
  }
  if (unit === "bytes") {
    for (const [name, size] of BINARY) if (a >= size) return neg + trim(a / size) + " " + name;
    return neg + a + " B";
  }
  const suffix = unit && unit !== "count" && unit !== "samples" ? " " + unit : "";
  if (a >= 1e9) return neg + trim(a / 1e9) + "G" + suffix;
  if (a >= 1e6) return neg + trim(a / 1e6) + "M" + suffix;
  if (a >= 1e4) return neg + trim(a / 1e3) + "k" + suffix;
  return neg + a + suffix;
}

// `part / whole` as a percentage with two decimals ("12.34 %").
export function percent(part, whole) {
  return whole ? ((100 * part) / whole).toFixed(2) + " %" : "–";
}

// The sample unit of a profile type id `name:type:unit:period_type:period_unit`.
export function unitOf(profileType) {
  return (profileType || "").split(":")[2] || "count";
}

// The package of a frame name: `net/http.(*conn).serve` → `net/http`, `std::io::Read::read`
// → `std::io::Read`, `io/netty/Foo:.bar` → `io/netty`, `java.util.Map.get` → `java.util.Map`.
export function packageOf(name) {
  let n = name.replace(/^\[|\]$/g, "").split(/[ (<]/)[0] || name;
  if (n.includes("::")) return n.slice(0, n.lastIndexOf("::"));
  const slash = n.lastIndexOf("/");
  if (slash >= 0) {
    const dot = n.indexOf(".", slash);
    return dot > 0 ? n.slice(0, dot) : n.slice(0, slash);
  }
  const dot = n.lastIndexOf(".");
  return dot > 0 ? n.slice(0, dot) : n;
}

function hash(s) {
  let h = 2166136261;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 16777619);
  return h >>> 0;
}

// A warm colour per package, stable across views; lighter in the dark theme's contrast
// direction so black text stays readable on it in both themes.
export function packageColour(name) {
  const h = hash(packageOf(name));
  const hue = 5 + (h % 50);
  const sat = 60 + ((h >>> 8) % 25);
  const light = 62 + ((h >>> 16) % 14);
  return `hsl(${hue} ${sat}% ${light}%)`;
}

// A unix time in ms as local `YYYY-MM-DD HH:MM:SS`.
export function formatTime(ms) {
  const d = new Date(ms);
  const p = (x) => String(x).padStart(2, "0");
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ` +
    `${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}
