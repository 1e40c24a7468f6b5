// The one way the UI talks to the server: GET requests to the JSON API of the page's own
// origin, with the tenant header, cancellation of superseded requests, and errors turned
// into readable messages.

// An API answer that was not a success: `status` and the server's message.
export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

export class Api {
  // `tenant()` returns the tenant to send as X-Scope-OrgID, `token()` the bearer token of a
  // server with auth ("" = none).
  constructor(tenant, token = () => "") {
    this.tenant = tenant;
    this.token = token;
    this.inflight = new Map();
    // URLs answered by the requests `boot.js` sent before the modules ran.
    this.fromBoot = [];
  }

  // The request `boot.js` already sent for `url` with these `headers`, taken (once), or null.
  early(url, headers) {
    const boot = window.__emberBoot;
    const e = boot?.requests.get(url);
    if (!e) return null;
    boot.requests.delete(url);
    if (e.headers !== JSON.stringify(headers)) return null;
    this.fromBoot.push(url);
    return e;
  }

  // A URL of the API for `path` with `params` (empty values left out).
  url(path, params = {}) {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== "") q.set(k, v);
    const s = q.toString();
    return path + (s ? "?" + s : "");
  }

  // The headers of every request: tenant and token.
  headers() {
    const headers = {};
    const t = this.tenant();
    if (t) headers["X-Scope-OrgID"] = t;
    const token = this.token();
    if (token) headers["Authorization"] = "Bearer " + token;
    return headers;
  }

  // GETs `path`; a non-2xx answer becomes an ApiError with the server's message. A newer
  // request under the same `key` aborts this one (its promise then rejects with an
  // AbortError, which callers ignore).
  async get(path, params, key) {
    this.inflight.get(key)?.abort();
    const url = this.url(path, params), headers = this.headers();
    const early = this.early(url, headers);
    const ctl = early ? early.ctl : new AbortController();
    this.inflight.set(key, ctl);
    let res;
    try {
      res = await (early ? early.promise : fetch(url, { headers, signal: ctl.signal }));
    } catch (e) {
      if (e.name === "AbortError") throw e;
      throw new ApiError(0, "the server cannot be reached (" + e.message + ")");
    } finally {
      if (this.inflight.get(key) === ctl) this.inflight.delete(key);
    }
    if (!res.ok) {
      const body = await res.text();
      let message = body.trim();
      try { message = JSON.parse(body).message || message; } catch { /* plain text */ }
      throw new ApiError(res.status, `${res.status} ${res.statusText}: ${message}`);
    }
    return res;
  }

  // The model `boot.js` made (and drew) of its answer for `path` with `params`, taken, or
  // null: then the page asks the usual way (an answer boot.js did not use is dropped unread
  // or, when it failed, asked for again, so its error is reported as any other's).
  async bootModel(path, params) {
    const url = this.url(path, params), boot = window.__emberBoot;
    const e = boot?.requests.get(url);
    if (!e?.model || e.headers !== JSON.stringify(this.headers())) return null;
    const model = await e.model;
    if (boot.requests.get(url) === e) boot.requests.delete(url);
    if (model) this.fromBoot.push(url);
    return model;
  }

  // Drops what `boot.js` sent that nobody took (a view the page did not show after all).
  forgetEarly() {
    const boot = window.__emberBoot;
    if (!boot) return;
    for (const e of boot.requests.values()) e.ctl.abort();
    boot.requests.clear();
  }

  // GETs `path` as JSON.
  async json(path, params = {}, key = path) {
    return (await this.get(path, params, key)).json();
  }

  // GETs `path` as bytes (an ArrayBuffer: the binary flame graph).
  async buffer(path, params = {}, key = path) {
    return (await this.get(path, params, key)).arrayBuffer();
  }

  // GETs `path` as a file (exports), with the same headers as every other request.
  async blob(path, params = {}) {
    return (await this.get(path, params, "export")).blob();
  }
}
