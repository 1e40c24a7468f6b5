// Ember flame graph interaction: click a frame to zoom, "Reset Zoom" to go back,
// "Search" (or Ctrl+F / F3) to highlight frames matching a regular expression,
// Escape to clear the search. Hovering a frame shows its tooltip in the details line.
"use strict";
var em = { frames: null, all: [], total: 1, zx: 0, zw: 1, term: null, orig: new Map(), byEl: new Map() };

function init(evt) {
    em.frames = document.getElementById("frames");
    em.details = document.getElementById("details");
    em.unzoom = document.getElementById("unzoom");
    em.search = document.getElementById("search");
    em.matched = document.getElementById("matched");
    em.total = parseFloat(em.frames.getAttribute("total_samples")) || 1;
    em.zw = em.total;
    var kids = em.frames.children;
    for (var i = 0; i < kids.length; i++) {
        var el = kids[i];
        var rect = el.querySelector("rect");
        if (!rect) continue;
        var titleEl = el.querySelector("title");
        var title = titleEl ? titleEl.textContent : "";
        var rec = {
            el: el,
            rect: rect,
            text: el.querySelector("text"),
            title: title,
            name: title.replace(/ \([^()]*\)$/, ""),
            x: parseFloat(rect.getAttribute("fg:x")),
            w: parseFloat(rect.getAttribute("fg:w")),
            y: parseFloat(rect.getAttribute("y"))
        };
        em.all.push(rec);
        em.byEl.set(el, rec);
    }
    em.frames.addEventListener("click", function (e) {
        var f = frameOf(e.target);
        if (f) { e.preventDefault(); zoom(f); }
    });
    em.frames.addEventListener("mouseover", function (e) {
        var f = frameOf(e.target);
        if (f) setText(em.details, nametype + " " + f.title);
    });
    em.frames.addEventListener("mouseout", function () { setText(em.details, " "); });
    em.unzoom.addEventListener("click", resetZoom);
    em.search.addEventListener("click", function () {
        if (em.term === null) askSearch(); else resetSearch();
    });
    window.addEventListener("keydown", function (e) {
        if (e.keyCode === 114 || ((e.ctrlKey || e.metaKey) && e.keyCode === 70)) {
            e.preventDefault();
            askSearch();
        } else if (e.key === "Escape") {
            resetSearch();
        }
    });
    layout();
}

function setText(el, s) { el.textContent = s; }

function frameOf(node) {
    while (node && node !== em.frames) {
        var f = em.byEl.get(node);
        if (f) return f;
        node = node.parentNode;
    }
    return null;
}

function pct(v) { return v.toFixed(4) + "%"; }

// Shows the frames inside the zoom window [zx, zx+zw), scaled to full width, ancestors greyed.
function layout(zoomed) {
    var width = parseFloat(em.frames.getAttribute("width")) || em.frames.getBoundingClientRect().width;
    var textPad = 300 / width;
    for (var i = 0; i < em.all.length; i++) {
        var f = em.all[i];
        var visible = f.x < em.zx + em.zw && f.x + f.w > em.zx;
        var ancestor = zoomed && visible && f.x <= em.zx && f.x + f.w >= em.zx + em.zw &&
            (inverted ? f.y < zoomed.y : f.y > zoomed.y);
        f.el.classList.toggle("hide", !visible);
        f.el.classList.toggle("parent", !!ancestor);
        if (!visible) continue;
        var x = ancestor ? 0 : (f.x - em.zx) / em.zw * 100;
        var w = ancestor ? 100 : Math.min(f.w / em.zw * 100, 100 - x);
        f.rect.setAttribute("x", pct(x));
        f.rect.setAttribute("width", pct(w));
        if (f.text) {
            f.text.setAttribute("x", pct(x + textPad));
            fitText(f, w * width / 100);
        }
    }
}

function fitText(f, px) {
    var chars = Math.floor(px / (fontsize * fontwidth));
    var name = f.name.replace(/_\[[kwij]\]$/, "");
    if (chars < 3) { f.text.textContent = ""; return; }
    if (name.length < chars) { f.text.textContent = name; return; }
    f.text.textContent = truncate_text_right ?
        ".." + name.slice(name.length - (chars - 2)) :
        name.slice(0, chars - 2) + "..";
}

function zoom(f) {
    em.zx = f.x;
    em.zw = Math.max(f.w, 1e-9);
    em.unzoom.classList.remove("hide");
    layout(f);
    if (em.term !== null) applySearch();
}

function resetZoom() {
    em.zx = 0;
    em.zw = em.total;
    em.unzoom.classList.add("hide");
    layout(null);
    if (em.term !== null) applySearch();
}

function askSearch() {
    var term = prompt("Enter a search term (regexp allowed, eg: ^ext4_)" +
        (em.term !== null ? ", press Cancel to keep the current one" : ""), em.term || "");
    if (term === null || term === "") return;
    try { new RegExp(term); } catch (err) { alert("Invalid regular expression: " + err.message); return; }
    em.term = term;
    applySearch();
}

function resetSearch() {
    em.orig.forEach(function (fill, rect) { rect.setAttribute("fill", fill); });
    em.orig.clear();
    em.term = null;
    em.search.classList.remove("show");
    setText(em.search, "Search");
    setText(em.matched, " ");
}

// Highlights matches and reports the share of the visible window they cover, counting
// nested matches (a matching frame under a matching frame) once.
function applySearch() {
    var re = new RegExp(em.term);
    var spans = [];
    for (var i = 0; i < em.all.length; i++) {
        var f = em.all[i];
        var hit = re.test(f.name);
        if (hit) {
            if (!em.orig.has(f.rect)) em.orig.set(f.rect, f.rect.getAttribute("fill"));
            f.rect.setAttribute("fill", searchcolor);
            var a = Math.max(f.x, em.zx), b = Math.min(f.x + f.w, em.zx + em.zw);
            if (b > a) spans.push([a, b]);
        } else if (em.orig.has(f.rect)) {
            f.rect.setAttribute("fill", em.orig.get(f.rect));
            em.orig.delete(f.rect);
        }
    }
    spans.sort(function (p, q) { return p[0] - q[0]; });
    var covered = 0, end = -Infinity;
    for (var j = 0; j < spans.length; j++) {
        var s = Math.max(spans[j][0], end);
        if (spans[j][1] > s) covered += spans[j][1] - s;
        end = Math.max(end, spans[j][1]);
    }
    em.search.classList.add("show");
    setText(em.search, "Reset Search");
    setText(em.matched, "Matched: " + (covered / em.zw * 100).toFixed(1) + "%");
}
