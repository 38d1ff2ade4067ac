// The run viewer: lists executions and follows one execution's events live.
// The SSE stream is read with fetch (EventSource cannot send an Authorization header); on a
// dropped connection it reconnects with Last-Event-ID, and it stops after the `finished` event.
"use strict";

const TOKEN_KEY = "studio.api.token";
const state = { token: sessionStorage.getItem(TOKEN_KEY) || "", current: null, abort: null };
const $ = (id) => document.getElementById(id);

function authHeaders(extra) {
  return Object.assign({ Authorization: "Bearer " + state.token }, extra || {});
}

async function api(path) {
  const response = await fetch(path, { headers: authHeaders() });
  const body = await response.json();
  if (!response.ok) {
    const error = body && body.error ? body.error : { code: "http_" + response.status, message: "" };
    throw new Error(error.code + ": " + error.message);
  }
  return body;
}

function cell(row, text, cls) {
  const td = document.createElement("td");
  td.textContent = text === null || text === undefined ? "" : String(text);
  if (cls) td.className = cls;
  row.appendChild(td);
  return td;
}

function badge(element, text) {
  element.textContent = text;
  element.className = "badge " + text;
}

async function loadList() {
  if (!state.token) return;
  try {
    const body = await api("/api/executions?limit=50");
    const tbody = $("executions");
    tbody.replaceChildren();
    for (const execution of body.executions) {
      const row = document.createElement("tr");
      row.dataset.id = execution.id;
      if (execution.id === state.current) row.classList.add("selected");
      cell(row, execution.id.slice(0, 8)).title = execution.id;
      const status = cell(row, "");
      const span = document.createElement("span");
      badge(span, execution.status);
      status.appendChild(span);
      cell(row, execution.provider);
      cell(row, (execution.created_at || "").replace("T", " ").slice(0, 19));
      row.addEventListener("click", () => { location.hash = "#/executions/" + execution.id; });
      tbody.appendChild(row);
    }
    $("list-message").textContent = body.executions.length ? "" : "No executions yet.";
  } catch (error) {
    $("list-message").textContent = String(error.message || error);
  }
}

function toolRow(callId) {
  let row = document.querySelector('#tool-calls tr[data-call-id="' + CSS.escape(callId) + '"]');
  if (!row) {
    row = document.createElement("tr");
    row.dataset.callId = callId;
    for (const name of ["cycle", "call", "tool", "outcome", "ms"]) cell(row, "", name);
    $("tool-calls").appendChild(row);
  }
  return row;
}

function onToolCall(event) {
  const call = event.data.call || {};
  const row = toolRow(call.call_id || String(event.seq));
  row.querySelector(".cycle").textContent = event.cycle;
  row.querySelector(".call").textContent = call.call_id || "";
  row.querySelector(".tool").textContent = (call.domain || "") + "." + (call.operation || "");
  const outcome = row.querySelector(".outcome");
  if (!outcome.firstChild) {
    const span = document.createElement("span");
    badge(span, "pending");
    outcome.appendChild(span);
  }
}

function onToolResult(event) {
  const envelope = event.data.envelope || {};
  const row = toolRow(envelope.call_id || String(event.seq));
  if (!row.querySelector(".tool").textContent) {
    row.querySelector(".tool").textContent = envelope.domain + "." + envelope.operation;
    row.querySelector(".call").textContent = envelope.call_id || "";
  }
  const outcome = row.querySelector(".outcome");
  outcome.replaceChildren();
  const span = document.createElement("span");
  if (envelope.ok) badge(span, "ok");
  else { badge(span, "error"); span.textContent = (envelope.error || {}).code || "error"; }
  outcome.appendChild(span);
  row.querySelector(".ms").textContent =
    envelope.duration_ms === undefined ? "" : Math.round(envelope.duration_ms);
}

function setStatus(executionId, status) {
  if (executionId === state.current) badge($("execution-status"), status);
  const row = document.querySelector('#executions tr[data-id="' + CSS.escape(executionId) + '"]');
  if (row) badge(row.querySelector(".badge"), status);
}

function onStarted(event) {
  setStatus(state.current, "running");
}

const FINAL = ["succeeded", "failed", "cancelled", "stalled"];

async function onFinished(event) {
  const data = event.data || {};
  const executionId = state.current;
  badge($("stream-state"), "finished");
  $("final-result").textContent = JSON.stringify(data.result || data, null, 2);
  $("final-result").className = "";
  // The loop writes `finished` just before the execution row gets its final status.
  for (let attempt = 0; attempt < 20 && executionId === state.current; attempt++) {
    const execution = await api("/api/executions/" + executionId);
    if (FINAL.includes(execution.status)) { setStatus(executionId, execution.status); break; }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  loadList();
}

const HANDLERS = {
  started: onStarted, tool_call: onToolCall, tool_result: onToolResult, finished: onFinished,
};

function dispatch(block, cursor) {
  let kind = "message", data = "", id = null;
  for (const line of block.split("\n")) {
    if (line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
    if (field === "event") kind = value;
    else if (field === "data") data += (data ? "\n" : "") + value;
    else if (field === "id") id = value;
  }
  if (id !== null) cursor.lastId = id;
  if (!data) return false;
  const handler = HANDLERS[kind];
  if (handler) handler(JSON.parse(data));
  return kind === "finished";
}

async function readStream(executionId, cursor, signal) {
  const headers = authHeaders({ Accept: "text/event-stream" });
  if (cursor.lastId) headers["Last-Event-ID"] = cursor.lastId;
  const response = await fetch("/api/executions/" + executionId + "/events", { headers, signal });
  if (!response.ok) throw new Error("stream answered " + response.status);
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return false;
    buffer += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      if (dispatch(block, cursor)) return true;
    }
  }
}

async function follow(executionId) {
  if (state.abort) state.abort.abort();
  const controller = new AbortController();
  state.abort = controller;
  const cursor = { lastId: null };
  badge($("stream-state"), "live");
  while (!controller.signal.aborted) {
    try {
      if (await readStream(executionId, cursor, controller.signal)) return;
    } catch (error) {
      if (controller.signal.aborted) return;
    }
    await new Promise((resolve) => setTimeout(resolve, 1000));  // then resume after lastId
  }
}

async function show(executionId) {
  state.current = executionId;
  $("execution-id").textContent = executionId;
  $("tool-calls").replaceChildren();
  $("final-result").textContent = "(not finished)";
  $("final-result").className = "muted";
  for (const row of document.querySelectorAll("#executions tr")) {
    row.classList.toggle("selected", row.dataset.id === executionId);
  }
  try {
    const execution = await api("/api/executions/" + executionId);
    badge($("execution-status"), execution.status);
    $("execution-provider").textContent = execution.provider + " · " + execution.model;
    $("execution-repo").textContent = execution.repo_url || execution.workspace || "";
  } catch (error) {
    badge($("execution-status"), "error");
    $("execution-status").textContent = String(error.message || error);
    return;
  }
  follow(executionId);
}

function route() {
  const match = location.hash.match(/^#\/executions\/([A-Za-z0-9._-]+)$/);
  if (match && state.token) show(match[1]);
}

function useToken(token) {
  state.token = token;
  if (token) sessionStorage.setItem(TOKEN_KEY, token);
  else sessionStorage.removeItem(TOKEN_KEY);
  $("token-state").textContent = token ? "token set" : "no token";
  loadList();
  route();
}

$("token-form").addEventListener("submit", (event) => {
  event.preventDefault();
  useToken($("token-input").value.trim());
  $("token-input").value = "";
});
$("token-forget").addEventListener("click", () => useToken(""));
$("refresh").addEventListener("click", loadList);
window.addEventListener("hashchange", route);
setInterval(() => { if (document.visibilityState === "visible") loadList(); }, 5000);
useToken(state.token);
