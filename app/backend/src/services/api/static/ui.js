// Shared helpers of the pages. Everything that comes from a run, a flowchart or the API is put
// in the page as text (textContent, text nodes, attribute values): never parsed as HTML. Links
// from data are made only for http(s) URLs. The token lives in sessionStorage (this tab, this
// session), is sent in the Authorization header only, and never appears in a URL.
"use strict";

const Studio = (() => {
  const TOKEN_KEY = "studio.api.token";
  const state = { token: sessionStorage.getItem(TOKEN_KEY) || "", cleanups: [] };
  const SVG_NS = "http://www.w3.org/2000/svg";
  const FINAL = ["succeeded", "failed", "cancelled", "stalled"];

  function fill(node, attrs, children) {
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key === "class") node.setAttribute("class", String(value));
      else if (key === "text") node.textContent = String(value);
      else if (key.startsWith("on")) throw new Error("no event attributes: " + key);
      else node.setAttribute(key, value === true ? "" : String(value));
    }
    for (const child of children) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  function el(tag, attrs, ...children) {
    return fill(document.createElement(tag), attrs, children);
  }

  function svg(tag, attrs, ...children) {
    return fill(document.createElementNS(SVG_NS, tag), attrs, children);
  }

  // An absolute http(s) URL from data, else null: a path (a local repository such as
  // "/tmp/demo") is never resolved against the page's own address.
  function safeUrl(url) {
    if (typeof url !== "string" || !/^https?:\/\//i.test(url)) return null;
    try {
      const parsed = new URL(url);
      return parsed.protocol === "https:" || parsed.protocol === "http:" ? parsed.href : null;
    } catch (error) {
      return null;
    }
  }

  // A link for an http(s) URL from data; anything else is shown as plain text.
  function link(url, text, attrs) {
    const href = safeUrl(url);
    const label = text === undefined ? url : text;
    if (!href) return el("span", attrs, label || "");
    return el("a", Object.assign({ href, rel: "noopener noreferrer", target: "_blank" }, attrs),
              label);
  }

  function badge(text, attrs) {
    const value = text === null || text === undefined ? "" : String(text);
    return el("span", Object.assign({ class: "badge " + value.replace(/[^a-z_-]/g, "") },
                                    attrs || {}), value);
  }

  function setBadge(node, text) {
    const value = String(text);
    const keep = node.classList.contains("outcome") ? " outcome" : "";
    node.textContent = value;
    node.setAttribute("class", "badge " + value.replace(/[^a-z_-]/g, "") + keep);
  }

  class ApiError extends Error {
    constructor(status, code, message) {
      super(code + ": " + message);
      this.status = status;
      this.code = code;
    }
  }

  function headers(extra) {
    return Object.assign({ Authorization: "Bearer " + state.token }, extra || {});
  }

  async function api(path, options) {
    const init = Object.assign({ method: "GET" }, options || {});
    init.headers = headers(init.body !== undefined ? { "Content-Type": "application/json" } : {});
    if (init.body !== undefined) init.body = JSON.stringify(init.body);
    const response = await fetch(path, init);
    const text = await response.text();
    let body = null;
    try { body = text ? JSON.parse(text) : null; } catch (error) { body = null; }
    if (!response.ok) {
      const error = body && body.error ? body.error : { code: "http_" + response.status,
                                                        message: text.slice(0, 200) };
      throw new ApiError(response.status, error.code, error.message);
    }
    return body;
  }

  function message(node, text, isError) {
    node.textContent = text;
    node.setAttribute("class", "message" + (isError ? " error" : ""));
  }

  // Asks with the page's dialog; resolves true when confirmed.
  function confirmAction(title, text, yesLabel) {
    const dialog = document.getElementById("confirm-dialog");
    document.getElementById("confirm-title").textContent = title;
    document.getElementById("confirm-text").textContent = text;
    document.getElementById("confirm-yes").textContent = yesLabel || "Confirm";
    return new Promise((resolve) => {
      dialog.addEventListener("close", () => resolve(dialog.returnValue === "yes"),
                              { once: true });
      dialog.returnValue = "";
      dialog.showModal();
    });
  }

  function onLeave(cleanup) { state.cleanups.push(cleanup); }

  // Which page is drawn: a page's drawing that awaited something checks it is still current
  // (a slow answer for the page left must not draw over the page shown now).
  state.generation = 0;
  function current() {
    const generation = state.generation;
    return () => generation === state.generation;
  }

  function leave() {
    state.generation += 1;
    for (const cleanup of state.cleanups.splice(0)) {
      try { cleanup(); } catch (error) { /* the page is going away */ }
    }
  }

  function every(ms, action) {
    const timer = setInterval(action, ms);
    onLeave(() => clearInterval(timer));
  }

  function when(value) {
    return value ? String(value).replace("T", " ").slice(0, 19) : "";
  }

  function money(value) {
    return "$" + Number(value || 0).toFixed(4);
  }

  // "1.2 s", "3 min 4 s", "2 h 5 min"; "" when unknown.
  function duration(ms) {
    if (ms === null || ms === undefined || !Number.isFinite(ms) || ms < 0) return "";
    if (ms < 1000) return Math.round(ms) + " ms";
    const seconds = ms / 1000;
    if (seconds < 60) return seconds.toFixed(1) + " s";
    const minutes = Math.floor(seconds / 60);
    if (minutes < 60) return minutes + " min " + Math.round(seconds % 60) + " s";
    return Math.floor(minutes / 60) + " h " + (minutes % 60) + " min";
  }

  function time(value) {
    const parsed = value ? Date.parse(value) : NaN;
    return Number.isFinite(parsed) ? parsed : null;
  }

  // From `start` to `end` (or to now while it runs): "" when it has not started.
  function between(start, end) {
    const from = time(start);
    if (from === null) return "";
    const to = time(end);
    return duration((to === null ? Date.now() : to) - from) + (to === null ? " so far" : "");
  }

  // The one message at the top of the page (a refused token, a missing run); null hides it.
  function alert(text) {
    const node = document.getElementById("page-alert");
    node.textContent = text || "";
    node.hidden = !text;
  }

  // What the page shows instead of its layout when what it is about cannot be read: said once,
  // at the top (the banner), with a way back.
  function problem(view, title, error) {
    const status = error && error.status;
    const text = status === 404 ? title + ": nothing has this id."
      : status === 401 ? "The API refused the token (unauthorized): enter a valid one above."
        : title + ": " + String((error && error.message) || error);
    alert(text);
    view.replaceChildren(el("h1", { id: "problem-title" }, status === 404 ? title : "Studio"),
                         el("p", {}, el("a", { href: "#/runs" }, "Back to the runs")));
  }

  let graphLibrary = null;
  // The layout library, loaded only by the pages that draw a graph.
  function loadGraphLibrary() {
    if (!graphLibrary) {
      graphLibrary = new Promise((resolve, reject) => {
        if (window.dagre) { resolve(window.dagre); return; }
        const script = document.createElement("script");
        script.src = "/static/vendor/dagre.min.js";
        script.addEventListener("load", () => resolve(window.dagre));
        script.addEventListener("error", () => {
          graphLibrary = null;
          reject(new Error("the graph library did not load"));
        });
        document.head.append(script);
      });
    }
    return graphLibrary;
  }

  return { state, TOKEN_KEY, FINAL, el, svg, link, safeUrl, badge, setBadge, api, headers,
           ApiError, message, confirmAction, onLeave, leave, every, when, money, duration, time,
           between, alert, problem, loadGraphLibrary, current };
})();
