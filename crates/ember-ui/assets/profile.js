// Single profiles: the list of the individual profiles of the selection's time range (also
// drawn as points on the time series when there are few enough), and the view of exactly one
// of them (its series labels and its flame graph). The profile shown is in the URL
// (`profile`: its unix time in ns, `pseries`: its series' labels as a selector), so a reload
// or a pasted link opens it again.

import { FlameView } from "./flamedraw.js";
import { formatTime, formatValue, unitOf } from "./format.js";

const $ = (id) => document.getElementById(id);
// Profiles listed at most (the newest); the server counts the rest.
const LIST_LIMIT = 200;
// Points drawn on the chart only when the range holds at most this many profiles.
const MAX_POINTS = 300;

// The labels worth a glance in a list row: the service and the user's own labels, not the
// profile type's `__…__` ones.
function shortLabels(labels) {
  return Object.entries(labels).filter(([k]) => !k.startsWith("__"))
    .map(([k, v]) => `${k}=${v}`).join(", ");
}

export class ProfilesView {
  // `api`, `state()`, `save(push)`, `task(f)`, `hook` are the Explore page's; `chart` the
  // time series (its points open profiles); `reload()` loads the page for the new state.
  constructor({ api, state, save, task, hook, chart, reload }) {
    Object.assign(this, { api, state, save, task, hook, chart, reload });
    this.list = null;
    this.flame = new FlameView({
      wrap: $("pflame-wrap"), canvas: $("pflame"), spacer: $("pflame-spacer"), tooltip: $("pflame-tooltip"),
      onZoom: (path) => this.flame.setZoom(path),
    });
    hook.profileFlame = this.flame;
    hook.chart = chart;
    $("profiles-btn").addEventListener("click", () => {
      const panel = $("profiles");
      panel.hidden = !panel.hidden;
      $("profiles-btn").setAttribute("aria-pressed", String(!panel.hidden));
    });
    $("profile-back").addEventListener("click", () => this.close());
    $("profile-pprof").addEventListener("click", (e) => {
      e.preventDefault();
      task(async () => {
        const file = await api.blob("/api/v1/profile", this.params("pprof"));
        const a = document.createElement("a");
        a.href = URL.createObjectURL(file);
        a.download = "profile.pb.gz";
        a.click();
        setTimeout(() => URL.revokeObjectURL(a.href), 10000);
      });
    });
  }

  // Whether the URL names a single profile.
  active() {
    const s = this.state();
    return Boolean(s.profile && s.pseries);
  }

  params(format) {
    const s = this.state();
    return { series: s.pseries, time: s.profile, format, maxNodes: s.maxNodes };
  }

  // Lists the profiles of the selection's range (`params` as the Explore page asks) in the
  // panel and as points on the chart.
  async loadList(params) {
    const list = await this.api.json("/api/v1/profiles", { ...params, limit: LIST_LIMIT }, "profiles");
    this.list = list;
    const unit = unitOf(this.state().type);
    const more = list.matched > list.profiles.length;
    $("profiles-btn").textContent = `Profiles (${list.matched})`;
    $("profiles-note").textContent = more
      ? `The ${list.profiles.length} most recent of ${list.matched} profiles in this range: narrow the range to see the others.`
      : `${list.matched} profiles in this range. Click one to open exactly that profile.`;
    const body = document.createElement("tbody");
    for (const p of list.profiles) {
      const tr = document.createElement("tr");
      tr.dataset.time = p.time;
      tr.title = p.series;
      for (const text of [formatTime(p.timeMs), shortLabels(p.labels), formatValue(p.total, unit)]) {
        const td = document.createElement("td");
        td.textContent = text;
        tr.append(td);
      }
      tr.addEventListener("click", () => this.open(p));
      body.append(tr);
    }
    $("profile-list").replaceChildren(body);
    const points = list.matched <= MAX_POINTS ? list.profiles : [];
    this.chart.setPoints(points, (p) => this.open(p));
    this.hook.view.profiles = { matched: list.matched, listed: list.profiles.length, points: points.length };
    return list;
  }

  // Opens exactly `p` (an entry of the list).
  open(p) {
    const s = this.state();
    s.profile = p.time;
    s.pseries = p.series;
    this.save(true);
    this.reload();
  }

  close() {
    const s = this.state();
    s.profile = "";
    s.pseries = "";
    this.save(true);
    this.reload();
  }

  // Shows the single profile of the URL: its labels, time, total and flame graph.
  async load() {
    const s = this.state();
    const fb = await this.api.json("/api/v1/profile", this.params("flamebearer"), "profile");
    const p = fb.profile;
    // The profile's own unit (its series says it), whatever type the page was showing.
    const unit = p.labels.__unit__ || unitOf(s.type);
    $("profile-pprof").href = this.api.url("/api/v1/profile", this.params("pprof"));
    $("profile-time").textContent = formatTime(p.timeMs);
    $("profile-total").textContent = `total ${formatValue(p.total, unit)}`;
    const labels = $("profile-labels");
    // The series' own labels first, the profile type's `__…__` ones after.
    const pairs = Object.entries(p.labels).sort(([a], [b]) => a.startsWith("__") - b.startsWith("__") || (a < b ? -1 : 1));
    labels.replaceChildren(...pairs.map(([k, v]) => {
      const chip = document.createElement("span");
      chip.className = "chip";
      const name = document.createElement("span");
      name.className = "muted";
      name.textContent = k + "=";
      chip.append(name, v);
      chip.dataset.name = k;
      return chip;
    }));
    this.flame.setData(fb.flamebearer.numTicks ? fb : null, unit);
    this.flame.setFlipped(s.view === "flame");
    const model = this.flame.model;
    this.hook.view.profile = {
      time: p.time, labels: p.labels, total: p.total, numTicks: fb.flamebearer.numTicks,
      topFrame: model ? model.topFrame() : "", nodes: model ? model.nodeCount : 0,
    };
  }
}
