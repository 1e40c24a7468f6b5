// Exports of a view: the files the server writes (pprof, folded, SVG, speedscope), fetched
// through the API client so they carry the tenant and token like every other request (a
// plain link would not; the links stay copyable), and a PNG of the flame graph as it is drawn.

const $ = (id) => document.getElementById(id);

// Links of the files the server writes: element id and `format` of `/api/v1/query`.
export const FILE_EXPORTS = [
  ["export-pprof", "pprof"], ["export-folded", "folded"], ["export-svg", "svg"],
  ["export-speedscope", "speedscope"],
];

// Hands `blob` to the browser as a download called `name`.
export function saveBlob(blob, name) {
  const a = document.createElement("a");
  a.href = URL.createObjectURL(blob);
  a.download = name;
  a.click();
  // The download has started from the URL by then; revoking it later frees the blob.
  setTimeout(() => URL.revokeObjectURL(a.href), 10000);
}

// A PNG of `canvases` as they are drawn (the visible part of the graph, at the device pixel
// ratio: each canvas is already that size), stacked top to bottom on the page's background
// colour (the canvases are transparent where nothing is drawn, which an image viewer would
// show as black or a checkerboard).
export function canvasPng(canvases) {
  const shown = canvases.filter((c) => c.width > 0 && c.height > 0);
  const out = document.createElement("canvas");
  out.width = Math.max(1, ...shown.map((c) => c.width));
  out.height = Math.max(1, shown.reduce((h, c) => h + c.height, 0));
  const ctx = out.getContext("2d");
  ctx.fillStyle = getComputedStyle(document.body).backgroundColor || "#fff";
  ctx.fillRect(0, 0, out.width, out.height);
  let y = 0;
  for (const c of shown) {
    ctx.drawImage(c, 0, y);
    y += c.height;
  }
  return new Promise((resolve, reject) => {
    out.toBlob((blob) => (blob ? resolve(blob) : reject(new Error("the PNG could not be made"))), "image/png");
  });
}

// Wires a view's export controls: each `[id, format]` of `files` downloads
// `path?…params(format)` from the server, and `pngId` the PNG of `canvases()` (the flame
// graph canvases shown). `task(f)` runs `f` with the loading indicator and error line.
export function wireExports({ api, task, path, files, params, pngId, canvases }) {
  for (const [id, format] of files) {
    $(id).addEventListener("click", (e) => {
      e.preventDefault();
      task(async () => saveBlob(await api.blob(path, params(format)), $(id).getAttribute("download")));
    });
  }
  $(pngId).addEventListener("click", (e) => {
    e.preventDefault();
    task(async () => saveBlob(await canvasPng(canvases()), $(pngId).dataset.download));
  });
}

// Points each file link of `files` at its export of the current view (so it can be copied).
export function linkExports(api, path, files, params) {
  for (const [id, format] of files) $(id).href = api.url(path, params(format));
}
